package main

// shellctl prepare: register a session's credentials with the egress
// proxy (docs/egress.md). Values come from a file, never from the command
// line: /proc/<pid>/cmdline is readable by every process of the user.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func prepareCmd(cf *clientFlags) *cobra.Command {
	var session, file string
	var remove bool
	c := &cobra.Command{
		Use:   "prepare --session S (--from-file creds.json | --delete)",
		Short: "Register a session's credentials with the egress proxy (jobs of the session get placeholders, never values)",
		Long: `Register a session's credentials with the server's egress proxy (serve --egress-proxy).
creds.json is PUT /v1/prepare's body ({"credentials":[...]}) or just the list of
credentials; --session sets its session_id. A second prepare of a session
replaces its credentials; --delete drops them. Values are read from the file
only (use - for stdin) and never printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" {
				return errors.New("--session is required: the session id jobs are run with (shellctl run --session)")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			if remove {
				n, err := c.Unprepare(cmd.Context(), session)
				if err != nil {
					return err
				}
				cf.print(map[string]any{"removed": n}, func() { fmt.Printf("removed %d credential(s) of session %s\n", n, session) })
				return nil
			}
			if file == "" {
				return errors.New("--from-file is required (or --delete): a JSON file of the credentials")
			}
			var raw []byte
			if file == "-" {
				raw, err = readAllStdin()
			} else {
				raw, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("--from-file %s: %w", file, err)
			}
			defer clear(raw)
			body, err := prepareBody(raw, session)
			if err != nil {
				return fmt.Errorf("--from-file %s: %w", file, err)
			}
			defer clear(body)
			n, err := c.Prepare(cmd.Context(), body)
			if err != nil {
				return err
			}
			cf.print(map[string]any{"registered": n}, func() { fmt.Printf("registered %d credential(s) for session %s\n", n, session) })
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&session, "session", "", "the session id (jobs run with --session S use these credentials)")
	f.StringVar(&file, "from-file", "", "JSON file of the credentials (- for stdin)")
	f.BoolVar(&remove, "delete", false, "drop the session's credentials instead")
	return c
}

func readAllStdin() ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(os.Stdin)
	return b.Bytes(), err
}

// prepareBody makes PUT /v1/prepare's body from a file holding either
// that body or only the list of credentials, with session as its id.
func prepareBody(raw []byte, session string) ([]byte, error) {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) > 0 && t[0] == '[':
		return json.Marshal(map[string]any{"session_id": session, "credentials": json.RawMessage(t)})
	case len(t) > 0 && t[0] == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(t, &m); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		delete(m, "sandbox_id")
		s, _ := json.Marshal(session)
		m["session_id"] = s
		return json.Marshal(m)
	}
	return nil, errors.New("want a JSON object {\"credentials\":[...]} or a JSON list of credentials")
}
