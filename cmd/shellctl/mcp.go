package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/buildinfo"
	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/mcp"
)

// mcpCmd is `shellctl mcp`: an MCP server on stdin and stdout (the stdio
// transport), for clients that start a local command, whose tools drive a
// `shellctl serve` over its API. The connection flags are the client
// verbs' (--server, --auth-token, --token-file).
func mcpCmd() *cobra.Command {
	var outputCap int
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the shell tools over MCP on stdin/stdout, driving a shellctl server",
		Long: "Serve the Model Context Protocol on stdin and stdout (the stdio transport) with the tools shell_run, shell_wait,\n" +
			"shell_input, shell_interrupt, shell_status, shell_list, shell_screen and shell_keys, which run jobs on the shellctl\n" +
			"server given by --server, and read_file, write_file, edit_file and list_dir, which reach its files.\n" +
			"stdout carries only the protocol; messages go to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server, err := theClientFlags.serverURL() // host:port or URL
			if err != nil {
				return err
			}
			token, err := theClientFlags.bearer()
			if err != nil {
				return err
			}
			if outputCap < 1 || outputCap > 524288 {
				return &usageError{fmt.Sprintf("--output-cap %d is not within 1..524288 bytes", outputCap)}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cl := &client.Client{BaseURL: server, Token: token, HTTP: &http.Client{}}
			srv := mcp.New(mcp.ClientJobs{C: cl}, mcp.Options{OutputCap: outputCap, Version: buildinfo.Get().Version, Logger: log, Files: cl})
			return srv.RunStdio(cmd.Context())
		},
	}
	c.Flags().IntVar(&outputCap, "output-cap", mcp.DefaultOutputCap, "most output bytes one tool answer carries (the rest is read by shell_wait)")
	return c
}
