package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
)

// Default local paths of the text items.
var (
	promptPath = filepath.Join(confDir, "prompt.md")
	notePath   = filepath.Join(confDir, "note.md")
)

func (a *app) promptPullCmd() *cobra.Command {
	return a.pullTextCmd("prompt", promptPath, (*agentstub.Client).GetPrompt)
}

// getNote reads the note, which the backend serves in the manifest.
func getNote(c *agentstub.Client, ctx context.Context) (string, error) {
	m, err := c.Manifest(ctx)
	if err != nil {
		return "", err
	}
	return m.Note, nil
}

// pullTextCmd is "pull [--to PATH]" of a text item: it is written byte for
// byte to def (or PATH) and the absolute path is printed.
func (a *app) pullTextCmd(item, def string, get func(*agentstub.Client, context.Context) (string, error)) *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "pull [--to PATH]",
		Short: "Write the " + item + " to " + def + " and print its absolute path",
		Long: "Writes the " + item + " byte for byte (no newline added) to " + def + "\n" +
			"or PATH, creating directories, and prints the file's absolute path.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			what := "pull " + item
			c, err := a.client(what)
			if err != nil {
				return err
			}
			text, err := get(c, ctxOf(cmd))
			if err != nil {
				return fail(what, err)
			}
			abs, err := writeFile(to, []byte(text))
			if err != nil {
				return &failure{What: what, Code: codeWriteFailed, Message: oneLine(err.Error())}
			}
			_, err = fmt.Fprintln(a.stdout, abs)
			return err
		},
	}
	c.Flags().StringVar(&to, "to", def, "write to `PATH`")
	return c
}

func (a *app) promptPushCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "push [PATH | -]",
		Short: "Save .dify_conf/prompt.md (or PATH, or stdin for -) as the prompt",
		Long: `Sends .dify_conf/prompt.md (or PATH, or stdin for -) byte for byte as the
prompt and prints the saved prompt as JSON. An empty input clears the prompt.
The text must be valid UTF-8. Only your own build draft can be changed: a
snapshot or a shared draft is read-only.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := promptPath
			if len(args) == 1 {
				path = args[0]
			}
			return a.pushText(cmd, "push prompt", path, (*agentstub.Client).PutPrompt)
		},
	}
}

func (a *app) notePullCmd() *cobra.Command {
	return a.pullTextCmd("note", notePath, getNote)
}

func (a *app) notePushCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "push PATH | -",
		Short: "Save PATH (or stdin for -) as the note",
		Long: `Sends PATH (or stdin for -) byte for byte as the note and prints the
backend's answer as JSON. An empty input clears the note.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.pushText(cmd, "push note", args[0], (*agentstub.Client).PutNote)
		},
	}
}

func (a *app) envPushCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "push PATH | -",
		Short: "Replace the environment text with PATH (or stdin for -)",
		Long: `Sends PATH (or stdin for -) byte for byte as the environment text and
prints the backend's answer as JSON.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.pushText(cmd, "push env", args[0], (*agentstub.Client).PatchEnv)
		},
	}
}

// pushText sends the text of path ("-": stdin) with send and prints the
// backend's answer as JSON. The settings are checked first, then the input;
// nothing is sent when either is wrong.
func (a *app) pushText(cmd *cobra.Command, what, path string,
	send func(*agentstub.Client, context.Context, string) (json.RawMessage, error)) error {
	c, err := a.client(what)
	if err != nil {
		return err
	}
	text, err := a.readText(what, path)
	if err != nil {
		return err
	}
	reply, err := send(c, ctxOf(cmd), text)
	if err != nil {
		return fail(what, err)
	}
	return a.printReply(reply, false)
}
