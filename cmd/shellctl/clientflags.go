package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shellctl/shellctl/internal/client"
)

// clientFlags are the connection flags of the client verbs.
type clientFlags struct {
	server    string
	token     string
	tokenFile string
	json      bool
	fs        *pflag.FlagSet
	// resolved is the server's URL once a verb made its client, for
	// messages.
	resolved string
}

var theClientFlags = &clientFlags{}

func (f *clientFlags) flagSet() *pflag.FlagSet {
	if f.fs == nil {
		fs := pflag.NewFlagSet("client", pflag.ContinueOnError)
		// The value starts as the server the default leads to (a verb
		// that reads the flag itself, such as mcp, gets a usable one);
		// --help shows the rule instead of the value.
		def := os.Getenv("SHELLCTL_URL")
		if def == "" {
			def = "http://" + defaultListen
		}
		fs.StringVar(&f.server, "server", def, "server as host:port or URL (default $SHELLCTL_URL, else "+defaultListen+")")
		fs.Lookup("server").DefValue = ""
		fs.StringVar(&f.token, "auth-token", "", "bearer token (default $SHELLCTL_AUTH_TOKEN); visible in /proc: prefer --token-file")
		fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from this file (one line; default $SHELLCTL_AUTH_TOKEN_FILE)")
		fs.BoolVar(&f.json, "json", false, "print JSON (the API's answers) instead of text")
		f.fs = fs
	}
	return f.fs
}

// serverURL is the server to talk to: --server, else $SHELLCTL_URL, else
// the default listen address. host:port is taken as http://host:port.
func (f *clientFlags) serverURL() (string, error) {
	if fl := f.flagSet().Lookup("server"); fl.Changed {
		return normalizeServer(f.server, "--server")
	}
	if env := os.Getenv("SHELLCTL_URL"); env != "" {
		return normalizeServer(env, "SHELLCTL_URL")
	}
	return "http://" + defaultListen, nil
}

func normalizeServer(raw, what string) (string, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
		return "", &usageError{fmt.Sprintf("%s %q is not a server address: give host:port (127.0.0.1:8765) or a URL (http://127.0.0.1:8765)", what, raw)}
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", &usageError{fmt.Sprintf("%s %q: port %q is not a number 1..65535", what, raw, port)}
		}
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func (f *clientFlags) client() (*client.Client, error) {
	base, err := f.serverURL()
	if err != nil {
		return nil, err
	}
	f.resolved = base
	tok, err := f.bearer()
	if err != nil {
		return nil, err
	}
	return &client.Client{BaseURL: base, Token: tok, HTTP: &http.Client{}}, nil
}

// bearer is the token the client verbs send (clientToken's rule).
func (f *clientFlags) bearer() (string, error) {
	return clientToken(f.token, f.tokenFile, os.Getenv)
}

// clientToken picks the token a client verb sends, first match wins:
// --auth-token, --token-file, $SHELLCTL_AUTH_TOKEN_FILE,
// $SHELLCTL_AUTH_TOKEN (serve's own order, resolveToken). Both flags at
// once is a usage error: which one was meant is unknowable.
func clientToken(flagToken, flagFile string, getenv func(string) string) (string, error) {
	if flagToken != "" && flagFile != "" {
		return "", &usageError{"--auth-token and --token-file are both given: pass one of them (--token-file keeps the token out of /proc)"}
	}
	if flagToken != "" {
		return flagToken, nil
	}
	what, path := "--token-file", flagFile
	if path == "" {
		what, path = envTokenFile, getenv(envTokenFile)
	}
	if path != "" {
		tok, note, err := readTokenFile(path, what)
		if err != nil {
			return "", err
		}
		if note != "" {
			fmt.Fprintln(os.Stderr, "shellctl:", note)
		}
		return tok, nil
	}
	return getenv(envToken), nil
}

func (f *clientFlags) print(v any, human func()) {
	if f.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return
	}
	human()
}

// explain turns an error of a client verb into what a person can act on.
func explain(err error) string {
	where := theClientFlags.resolved
	if where == "" {
		where = "the server"
	}
	var ae *client.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), isDNSError(err), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Sprintf("cannot reach the shellctl server at %s: is a server running? start one with `shellctl serve` (or point --server or $SHELLCTL_URL at it)", where)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the shellctl server at %s did not answer in time: %v", where, err)
	case errors.As(err, &ae):
		if ae.Status == http.StatusUnauthorized {
			return fmt.Sprintf("the server at %s wants a token: pass --token-file (or $SHELLCTL_AUTH_TOKEN_FILE), --auth-token or $SHELLCTL_AUTH_TOKEN (%s)", where, ae.Message)
		}
		msg := fmt.Sprintf("%s (HTTP %d %s)", ae.Message, ae.Status, ae.Code)
		if ae.Code == "job_not_found" && !strings.Contains(ae.Message, "gc-retention") {
			// An older server's 404 does not say it: the usual reason a
			// job id that worked minutes ago is unknown now.
			msg += " " + gcHint
		}
		return msg
	}
	return err.Error()
}

// gcHint follows a job_not_found: a finished job is removed after the
// server's retention, which the client cannot know (5 min by default).
const gcHint = "(finished jobs are collected after the server's --gc-retention, 5m by default)"

func isDNSError(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}

// apiCode is the API error code of err, or "".
func apiCode(err error) string {
	var ae *client.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// optSeconds is a number of seconds that may be left unset (the server's
// default then applies). Unset, it shows no default of its own in --help.
type optSeconds struct {
	v   float64
	set bool
}

func (o *optSeconds) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatFloat(o.v, 'f', -1, 64)
}
func (o *optSeconds) Type() string { return "seconds" }
func (o *optSeconds) Set(s string) error {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 || n != n || n > 1e9 {
		return fmt.Errorf("%q is not a number of seconds ≥ 0", s)
	}
	o.v, o.set = n, true
	return nil
}

// orDefault is the value, or -1 (the server's default) when unset.
func (o *optSeconds) orDefault() float64 {
	if !o.set {
		return -1
	}
	return o.v
}

// completeJobIDs completes a job id argument with the server's jobs.
func completeJobIDs(cf *clientFlags) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		c, err := cf.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list, err := c.List(cmd.Context(), "", 200)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var ids []string
		for _, j := range list {
			if strings.HasPrefix(j.JobID, prefix) {
				ids = append(ids, j.JobID+"\t"+j.Status)
			}
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}
