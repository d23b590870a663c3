package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/buildinfo"
)

// versionAnswer is `shellctl version --json`: this binary's build, and with
// --server the server's version as GET /v1/info gives it.
type versionAnswer struct {
	buildinfo.Info
	Server *serverVersion `json:"server,omitempty"`
}

type serverVersion struct {
	URL     string `json:"url"`
	Version string `json:"version"`
}

// versionCmd is `shellctl version` (and `--version`): this binary's
// version, commit and Go toolchain. It asks a server only when --server
// names one: a version that fails because no server runs would be no use
// to someone checking what they installed.
func versionCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this shellctl's version, commit and Go version (and, with --server, the server's version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ans := versionAnswer{Info: buildinfo.Get()}
			if cf.flagSet().Lookup("server").Changed {
				c, err := cf.client()
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
				defer cancel()
				info, err := c.Info(ctx)
				if err != nil {
					return err
				}
				ans.Server = &serverVersion{URL: c.BaseURL, Version: info.Version}
			}
			cf.print(ans, func() {
				fmt.Printf("shellctl %s (commit %s, %s)\n", ans.Version, ans.Commit, ans.GoVersion)
				if ans.Server != nil {
					fmt.Printf("server   %s at %s\n", ans.Server.Version, ans.Server.URL)
				}
			})
			return nil
		},
	}
}
