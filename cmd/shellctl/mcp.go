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
// verbs' (--server, --auth-token) and --token-file.
func mcpCmd() *cobra.Command {
	var tokenFile string
	var outputCap int
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the shell tools over MCP on stdin/stdout, driving a shellctl server",
		Long: "Serve the Model Context Protocol on stdin and stdout (the stdio transport) with the tools shell_run, shell_wait,\n" +
			"shell_input, shell_interrupt, shell_status, shell_list, shell_screen and shell_keys, which run jobs on the shellctl\n" +
			"server given by --server.\n" +
			"stdout carries only the protocol; messages go to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server, err := theClientFlags.serverURL() // host:port or URL
			if err != nil {
				return err
			}
			token, _ := cmd.Flags().GetString("auth-token")
			token, err = mcpToken(token, tokenFile, os.Getenv)
			if err != nil {
				return err
			}
			if outputCap < 1 || outputCap > 524288 {
				return &usageError{fmt.Sprintf("--output-cap %d is not within 1..524288 bytes", outputCap)}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cl := &client.Client{BaseURL: server, Token: token, HTTP: &http.Client{}}
			srv := mcp.New(mcp.ClientJobs{C: cl}, mcp.Options{OutputCap: outputCap, Version: buildinfo.Get().Version, Logger: log})
			return srv.RunStdio(cmd.Context())
		},
	}
	c.Flags().StringVar(&tokenFile, "token-file", "", "read the bearer token from this file (default $SHELLCTL_AUTH_TOKEN_FILE; else --auth-token, $SHELLCTL_AUTH_TOKEN)")
	c.Flags().IntVar(&outputCap, "output-cap", mcp.DefaultOutputCap, "most output bytes one tool answer carries (the rest is read by shell_wait)")
	return c
}

// mcpToken picks the token `shellctl mcp` sends, first match wins:
// --auth-token, --token-file, $SHELLCTL_AUTH_TOKEN_FILE, $SHELLCTL_AUTH_TOKEN.
// Both flags at once is a usage error.
func mcpToken(flagToken, flagFile string, getenv func(string) string) (string, error) {
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
			fmt.Fprintln(os.Stderr, "shellctl mcp:", note)
		}
		return tok, nil
	}
	return getenv(envToken), nil
}
