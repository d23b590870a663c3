// Command shellctl is the job runtime's server (`shellctl serve`) and a
// small client of its API (run, wait, input, tail, status, jobs, terminate,
// delete, snapshot save|restore).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func main() {
	// Non-dumpable before anything is read: the kernel then hands our
	// /proc files (environ, maps, mem) to root, so processes of our user —
	// jobs among them — cannot read our memory or what the environment
	// held before it is scrubbed. (cmdline stays world-readable: secrets
	// come by file, see --token-file.) Runners are separate programs and
	// reset it by exec.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	root := &cobra.Command{
		Use:           "shellctl",
		Short:         "Run an agent's shell commands as jobs, over HTTP",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd())
	addClientCommands(root)
	root.AddCommand(mcpCmd()) // cmd/shellctl/mcp.go
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shellctl:", err)
		var ue *usageError
		if errors.As(err, &ue) || isFlagError(err) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// isFlagError tells cobra's usage errors (flags, argument counts, unknown
// commands), which it does not type, by their words.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "unknown command"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
