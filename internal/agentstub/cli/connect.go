package cli

import (
	"os"

	"github.com/spf13/cobra"
)

func (a *app) connectCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "connect [--json] ARGV...",
		Short: "Ask the backend for a connection described by ARGV and print its answer",
		Long: `Asks the backend for a connection described by ARGV and prints its answer.
Flags go before ARGV; everything from the first word of ARGV on is sent as is.
"dify-agent WORD ..." with a WORD that is no command is "dify-agent connect WORD ...".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "connect"
			c, err := a.client(what)
			if err != nil {
				return err
			}
			// The metadata says where the request comes from; the backend may
			// ignore it.
			meta := map[string]string{}
			if wd, err := os.Getwd(); err == nil {
				meta["cwd"] = wd
			}
			reply, err := c.Connect(ctxOf(cmd), args, meta)
			if err != nil {
				return fail(what, err)
			}
			return a.printReply(reply, !asJSON)
		},
	}
	// ARGV is someone else's command line: its flags are not ours.
	c.Flags().SetInterspersed(false)
	c.Flags().BoolVar(&asJSON, jsonFlag, false, jsonFlagUse)
	return c
}
