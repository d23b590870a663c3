package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/buildinfo"
)

// versionCmd is `shellctl version`: this binary's version, commit and Go
// toolchain (with --json, as GET /v1/info gives a server's). It asks no
// server: `shellctl inspect`'s info and GET /v1/info tell a server's.
func versionCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this shellctl's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Get()
			cf.print(in, func() {
				fmt.Printf("shellctl %s (commit %s, %s)\n", in.Version, in.Commit, in.GoVersion)
			})
			return nil
		},
	}
}
