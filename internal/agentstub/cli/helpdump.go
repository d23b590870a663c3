package cli

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"
)

// dumpHelpName is the hidden command that prints every command's help as
// JSON for docs/dify-agent-cli-help.json (make gen-cli-help).
const dumpHelpName = "__dump-cli-help"

func (a *app) dumpHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:    dumpHelpName,
		Short:  "Print the help of every command as JSON",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.printDump(helpDump(cmd.Root()))
		},
	}
}

// printDump writes the dump as the original does: one JSON object, keys
// sorted, indented by two spaces, ending in a newline.
func (a *app) printDump(dump map[string]string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(dump); err != nil {
		return err
	}
	_, err := a.stdout.Write(buf.Bytes())
	return err
}

// helpDump maps the path of every available command (space-joined, without
// "dify-agent"; the root is "") to its full --help text, trailing newlines
// trimmed. Hidden commands (home-snapshot, this one) and "help" are left
// out, as are their subcommands.
func helpDump(root *cobra.Command) map[string]string {
	out := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		out[path] = helpText(c)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
	return out
}

// helpText is what "dify-agent <path> --help" prints, trailing newlines
// trimmed.
func helpText(c *cobra.Command) string {
	var buf bytes.Buffer
	c.SetOut(&buf)
	defer c.SetOut(nil)
	_ = c.Help()
	return strings.TrimRight(buf.String(), "\n")
}
