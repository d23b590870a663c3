package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/snapshot"
)

func snapshotCmd(cf *clientFlags) *cobra.Command {
	c := &cobra.Command{Use: "snapshot", Short: "Save or restore the server's Home"}
	var out string
	var excludes []string
	save := &cobra.Command{
		Use:   "save [-o FILE] [--exclude PATTERN]...",
		Short: "Save the server's Home as tar+zstd (verified before it counts)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl := cf.client()
			st, err := snapshot.SaveToFile(cmd.Context(), snapshot.Conn{BaseURL: cl.BaseURL, Token: cl.Token, HTTP: cl.HTTP}, out, excludes, progressOut())
			if err != nil {
				return err
			}
			if out == "-" {
				// Standard output carries the archive: nothing else goes there.
				return nil
			}
			cf.print(st, func() { fmt.Fprintf(os.Stderr, "saved %s\n", out) })
			return nil
		},
	}
	save.Flags().StringVarP(&out, "output", "o", "-", "file to write (- for stdout)")
	save.Flags().StringArrayVar(&excludes, "exclude", nil, "gitignore-style pattern to leave out (repeatable)")
	restore := &cobra.Command{
		Use:   "restore FILE|-",
		Short: "Restore a saved Home into the server's Home",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl := cf.client()
			st, err := snapshot.RestoreFromFile(cmd.Context(), snapshot.Conn{BaseURL: cl.BaseURL, Token: cl.Token, HTTP: cl.HTTP}, args[0], progressOut())
			if err != nil {
				return err
			}
			cf.print(st, func() { fmt.Fprintf(os.Stderr, "restored %s\n", args[0]) })
			return nil
		},
	}
	c.AddCommand(save, restore)
	return c
}
