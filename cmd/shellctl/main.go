// Command shellctl is the job runtime's server (`shellctl serve`) and a
// client of its API: run, logs, attach, ps, inspect, kill, rm, wait, input,
// snapshot save|restore and more (see README.md, "The command line").
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/buildinfo"
)

// Exit codes of the client verbs (docker's convention): a job's own code
// when the verb reports a job's end (run, wait, attach), else exitOK, or
// exitClient for every failure of shellctl itself (usage, server not
// reachable, an error answer). 126 and 127 stay what a job means by them.
// serve keeps 1 (failure) and 2 (usage).
const (
	exitOK     = 0
	exitClient = 125
)

func main() {
	// Non-dumpable before anything is read: the kernel then hands our
	// /proc files (environ, maps, mem) to root, so processes of our user
	// cannot read the server's memory or what the environment held before
	// it is scrubbed. (cmdline stays world-readable: secrets come by file,
	// see --token-file.) Runners are separate programs and reset it by
	// exec. run makes the client verbs dumpable again.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	os.Exit(run(os.Args[1:]))
}

// run runs the command line args and returns the process's exit code.
func run(args []string) int {
	root := rootCmd()
	root.SetArgs(args)
	if c, _, err := root.Find(args); err == nil && !isServe(c) {
		// A client is dumpable: a server that is not root tells a client
		// from a job's process by reading its descriptors, which it may
		// not do of a non-dumpable process (it would refuse it as it
		// refuses a job: docs/security.md). What that opens to the same
		// user's processes is little: a client's environment is its
		// parent shell's, readable to them already, and its memory (a
		// token read from a file) stays out of a job's reach, as Landlock
		// denies ptrace-level access (/proc/PID/mem) outside its domain.
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	}
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var je *jobExit
	if errors.As(err, &je) {
		if je.msg != "" {
			fmt.Fprintln(os.Stderr, "shellctl:", je.msg)
		}
		return je.code
	}
	if cmd != nil && isServe(cmd) {
		if serveLogJSON {
			slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error(err.Error())
		} else {
			fmt.Fprintln(os.Stderr, "shellctl:", err)
		}
		var ue *usageError
		if errors.As(err, &ue) || isFlagError(err) {
			return 2
		}
		return 1
	}
	fmt.Fprintln(os.Stderr, "shellctl:", explain(err))
	if isFlagError(err) {
		fmt.Fprintf(os.Stderr, "run '%s --help' for usage\n", cmd.CommandPath())
	}
	return exitClient
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "shellctl",
		Short: "Run an agent's shell commands as jobs, over HTTP",
		Long: "shellctl is a job server (shellctl serve) and its client.\n\n" +
			"Client verbs exit with the job's code where they report a job's end (run, wait,\n" +
			"attach) and with 125 for shellctl's own failures (usage, no server, an error answer).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd())
	addClientCommands(root)
	root.AddCommand(mcpCmd()) // cmd/shellctl/mcp.go
	root.AddCommand(versionCmd(theClientFlags))
	root.AddCommand(healthcheckCmd(theClientFlags))
	root.Version = buildinfo.Get().Version // --version, as well as the verb
	root.SetVersionTemplate("shellctl {{.Version}}\n")
	// The connection flags are the client verbs': persistent on the root,
	// so they may come before the verb (shellctl --json ps) as after it,
	// but neither shown nor taken by serve and completion.
	cf := theClientFlags
	root.PersistentFlags().AddFlagSet(cf.flagSet())
	for _, c := range root.Commands() {
		switch c.Name() {
		case "serve", "completion":
			withoutClientFlags(c, cf)
		}
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			withoutClientFlags(c, cf)
		}
	}
	return root
}

// withoutClientFlags hides the client flags from cmd's help and refuses
// them there.
func withoutClientFlags(cmd *cobra.Command, cf *clientFlags) {
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		cf.flagSet().VisitAll(func(f *pflag.Flag) { f.Hidden = true })
		defer cf.flagSet().VisitAll(func(f *pflag.Flag) { f.Hidden = false })
		help(c, args)
	})
	usage := cmd.UsageFunc()
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		cf.flagSet().VisitAll(func(f *pflag.Flag) { f.Hidden = true })
		defer cf.flagSet().VisitAll(func(f *pflag.Flag) { f.Hidden = false })
		return usage(c)
	})
	pre := cmd.PersistentPreRunE
	cmd.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		var bad error
		cf.flagSet().VisitAll(func(f *pflag.Flag) {
			if f.Changed && bad == nil {
				bad = &usageError{fmt.Sprintf("--%s is a flag of the client verbs, not of %s", f.Name, cmd.Name())}
			}
		})
		if bad != nil {
			return bad
		}
		if pre != nil {
			return pre(c, args)
		}
		return nil
	}
}

func isServe(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "serve" && c.Parent() != nil && c.Parent().Parent() == nil {
			return true
		}
	}
	return false
}

// jobExit ends the command with a job's exit code (and msg on stderr when
// not empty).
type jobExit struct {
	code int
	msg  string
}

func (e *jobExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// isFlagError tells cobra's usage errors (flags, argument counts, unknown
// commands), which it does not type, by their words.
func isFlagError(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "unknown command"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
