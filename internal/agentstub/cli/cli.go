// Package cli is the dify-agent command line: the commands of
// shared/spec/agent-cli.md over the agentstub client. Its help text is shown
// to a model, so it is short and exact, and tested against golden files.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
)

const rootName = "dify-agent"

// Exit statuses.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

const (
	// confDir is where local copies live, relative to the working directory.
	confDir = ".dify_conf"
	// jsonFlag is the flag of the commands that can print stable JSON.
	jsonFlag    = "json"
	jsonFlagUse = "print JSON"
)

// app holds what the commands read and write, so tests of the package and
// the binary see the same behaviour.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	getenv func(string) string
}

// Main runs dify-agent with args (without the program name) and returns the
// exit status. Failures go to stderr as one line each.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, getenv: getenv}
	root := a.newRoot()
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	args, typo := withConnect(root, args)
	if typo != nil {
		fmt.Fprintln(stderr, typo.Error())
		return ExitUsage
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var f *failure
	var fs failures
	var p *plainError
	switch {
	case errors.As(err, &p):
		fmt.Fprintln(stderr, p.Error())
		return ExitFailed
	case errors.As(err, &fs):
		fmt.Fprintln(stderr, fs.Error())
		return ExitFailed
	case errors.As(err, &f):
		fmt.Fprintln(stderr, f.Error())
		return ExitFailed
	}
	// Everything else comes from parsing the command line: cobra's own
	// errors (unknown flag, wrong number of arguments) and ours.
	var u *usageError
	if !errors.As(err, &u) {
		u = &usageError{path: cmd.CommandPath(), msg: err.Error()}
	}
	fmt.Fprintln(stderr, u.Error())
	return ExitUsage
}

// withConnect treats an unknown first word as the first word of connect's
// ARGV: "dify-agent psql -h db" is "dify-agent connect psql -h db". A word
// within two letters of a command's name, or the start of one ("hlep",
// "flie", "know"), is a typo, not a program to connect to: it is a usage
// error that names the commands it may have meant, so a typo never
// becomes a call to the backend. "connect WORD" reaches any program.
func withConnect(root *cobra.Command, args []string) ([]string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == "help" {
		return args, nil
	}
	for _, c := range root.Commands() {
		if c.Name() == args[0] || c.HasAlias(args[0]) {
			return args, nil
		}
	}
	if near := commandsNear(root, args[0]); len(near) > 0 {
		return nil, &usageError{path: root.CommandPath(), msg: fmt.Sprintf("unknown command %q: did you mean %s? (to run a program of that name: %s connect %s)",
			args[0], strings.Join(quoteAll(near), " or "), rootName, args[0])}
	}
	return append([]string{"connect"}, args...), nil
}

// typoDistance is how many letters a word may differ from a command's
// name (insertions, deletions, changes) and still be taken for it.
const typoDistance = 2

// commandsNear are the commands (help included, hidden ones not) whose
// name is within typoDistance of word or starts with it.
func commandsNear(root *cobra.Command, word string) []string {
	names := []string{"help"}
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	var near []string
	w := strings.ToLower(word)
	for _, n := range names {
		if strings.HasPrefix(n, w) || editDistance(w, n) <= typoDistance {
			near = append(near, n)
		}
	}
	return near
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = fmt.Sprintf("%q", w)
	}
	return out
}

const helpTemplate = `{{with or .Long .Short}}{{trimTrailingWhitespaces .}}{{end}}

Usage: {{.UseLine}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name (namePad $)}} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsagesWrapped 100 | trimTrailingWhitespaces}}{{end}}
`

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   rootName + " COMMAND",
		Short: "The agent's CLI to its backend, the Agent Stub",
		Long: `dify-agent talks to this agent's backend: configuration, files, drive, knowledge.
An unknown first word runs connect with all arguments.
Needs DIFY_AGENT_STUB_API_BASE_URL and DIFY_AGENT_STUB_AUTH_JWE.
Exit status: 0 ok, 1 failed (one line per failure on stderr), 2 usage error.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		// completion bash|zsh|fish|powershell works, and is left out of
		// the help a model reads.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
		RunE:              showHelp,
	}
	cobra.AddTemplateFunc("namePad", namePad)
	root.SetHelpTemplate(helpTemplate)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{path: c.CommandPath(), msg: err.Error()}
	})
	root.AddCommand(a.configCmd(), a.connectCmd(), a.fileCmd(), a.driveCmd(), a.knowledgeCmd(),
		a.homeSnapshotCmd(), a.dumpHelpCmd())
	// Made now rather than when cobra runs, so withConnect knows the word.
	root.InitDefaultCompletionCmd()
	finish(root)
	return root
}

func (a *app) configCmd() *cobra.Command {
	c := group("config COMMAND", "Read and change the agent's configuration")
	prompt := group("prompt COMMAND", "Pull, edit and push the prompt")
	prompt.Long = `The prompt lives in .dify_conf/prompt.md: pull it, edit the file, push it.
Edits take effect only when pushed; requests already built keep their prompt.`
	prompt.AddCommand(a.promptPullCmd(), a.promptPushCmd())
	env := group("env COMMAND", "Set the agent's environment text")
	env.AddCommand(a.envPushCmd())
	note := group("note COMMAND", "Pull and push the note")
	note.AddCommand(a.notePullCmd(), a.notePushCmd())
	c.AddCommand(prompt, a.manifestCmd(), a.itemsCmd(agentstub.KindSkill), a.itemsCmd(agentstub.KindFile), env, note)
	return c
}

// group is a command that only holds subcommands: alone it prints its help,
// with an unknown word it is a usage error.
func group(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: showHelp}
}

func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// finish applies what every command shares: flags are spelled out in Use
// (no "[flags]" added), and --help works everywhere without being listed.
func finish(c *cobra.Command) {
	c.DisableFlagsInUseLine = true
	c.InitDefaultHelpFlag()
	_ = c.Flags().MarkHidden("help")
	for _, sub := range c.Commands() {
		finish(sub)
	}
}

// ctxOf returns the command's context (set by ExecuteContext).
func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// client reads the connection settings; a missing or malformed variable is
// a failure of what, before any request.
func (a *app) client(what string) (*agentstub.Client, error) {
	cfg, err := agentstub.ConfigFromEnv(a.getenv)
	if err != nil {
		return nil, fail(what, err)
	}
	c, err := agentstub.New(cfg)
	if err != nil {
		return nil, fail(what, err)
	}
	return c, nil
}

// backend reads the connection settings for a command of
// agent-cli-backend.md; failures use its plain form.
func (a *app) backend() (*agentstub.Client, error) {
	cfg, err := agentstub.ConfigFromEnv(a.getenv)
	if err != nil {
		return nil, envFail(err)
	}
	c, err := agentstub.New(cfg)
	if err != nil {
		return nil, envFail(err)
	}
	return c, nil
}

// namePad is the width of the subcommand names in c's help: the longest
// name of an available subcommand, and at least 9.
func namePad(c *cobra.Command) int {
	n := 9
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && len(sub.Name()) > n {
			n = len(sub.Name())
		}
	}
	return n
}
