package cli

import (
	"bytes"
	"encoding/json"

	"github.com/spf13/cobra"
)

// dumpHelpName is the hidden command that prints the command tree as JSON
// for docs/dify-agent-cli-help.json (make gen-cli-help).
const dumpHelpName = "__dump-cli-help"

// helpNode is one command in the dump: its usage line and short help.
type helpNode struct {
	Name     string      `json:"name"`
	Usage    string      `json:"usage"`
	Short    string      `json:"short"`
	Commands []*helpNode `json:"commands,omitempty"`
}

func (a *app) dumpHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:    dumpHelpName,
		Short:  "Print the command tree with usage and short help as JSON",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(helpTree(cmd.Root())); err != nil {
				return err
			}
			_, err := a.stdout.Write(buf.Bytes())
			return err
		},
	}
}

// helpTree walks the available commands (not hidden ones, not "help").
func helpTree(c *cobra.Command) *helpNode {
	n := &helpNode{Name: c.Name(), Usage: c.UseLine(), Short: c.Short}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			n.Commands = append(n.Commands, helpTree(sub))
		}
	}
	return n
}
