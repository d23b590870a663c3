package main

// The smaller job verbs: wait, input, tail, status, kill, terminate, rm.

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/client"
)

func waitCmd(cf *clientFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "wait JOB_ID",
		Short: "Wait until a job is done; print and exit with its exit code",
		Long: `Wait until a job is done, print its exit code and exit with it (125, and why,
when the job has none: it never started or its runner was lost).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id := args[0]
			rec, err := c.Record(ctx, id)
			if err != nil {
				return err
			}
			// Follow the output without printing it: wait's answer comes at
			// the job's end (or after each window, which is skipped).
			end := &jobEnd{Status: rec.Status, ExitCode: rec.ExitCode}
			if !rec.Done {
				f := &follower{c: c, id: id, out: &sink{w: io.Discard, offset: rec.OutputBytes}}
				if end, err = f.run(ctx); err != nil {
					return err
				}
			}
			cf.print(map[string]any{"job_id": id, "status": end.Status, "exit_code": end.ExitCode}, func() {
				if end.ExitCode != nil {
					fmt.Println(*end.ExitCode)
				}
			})
			return exitOf(ctx, c, id, end)
		},
	}
	return c
}

func inputCmd(cf *clientFlags) *cobra.Command {
	var offset int64
	var timeout float64
	var eof bool
	c := &cobra.Command{
		Use:   "input [--eof] JOB_ID TEXT",
		Short: "Send text to a job's terminal or stdin pipe and print the output that follows (no newline is added: use $'...\\n')",
		Long: `Send TEXT to a job's terminal (a pty job) or to the stdin pipe of a stdio job run
with one (shellctl run -i --stdio, or "stdin":"pipe"), then print the output that
follows. --eof closes the stdin pipe after TEXT (TEXT may then be left out); for a
pty job it sends the terminal's EOF character, Ctrl-D.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if eof {
				return cobra.RangeArgs(1, 2)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			text := ""
			if len(args) == 2 {
				text = args[1]
			}
			wr := client.WaitRequest{Offset: offset, Timeout: &timeout}
			var res *client.JobResult
			if eof {
				res, err = c.InputBytes(cmd.Context(), args[0], []byte(text), true, wr)
			} else {
				res, err = c.Input(cmd.Context(), args[0], text, wr)
			}
			if err != nil {
				return err
			}
			cf.print(res, func() { io.WriteString(os.Stdout, res.Output) })
			return nil
		},
	}
	c.Flags().Int64Var(&offset, "offset", 0, "byte offset to read output from")
	c.Flags().Float64Var(&timeout, "timeout", 30, "seconds to wait for output (the API's default)")
	c.Flags().BoolVar(&eof, "eof", false, "close the job's stdin pipe after TEXT (a pty job: Ctrl-D)")
	return c
}

func tailCmd(cf *clientFlags) *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:               "tail JOB_ID",
		Short:             "Print the end of a job's output",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.Tail(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			cf.print(res, func() { io.WriteString(os.Stdout, res.Output) })
			return nil
		},
	}
	c.Flags().IntVarP(&limit, "bytes", "c", 16384, "bytes to print")
	return c
}

func statusCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "status JOB_ID",
		Short:             "Show a job's status",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			v, err := c.Status(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			cf.print(v, func() { printStatus(v) })
			return nil
		},
	}
}

func printStatus(v *client.JobStatus) {
	code := "-"
	if v.ExitCode != nil {
		code = fmt.Sprint(*v.ExitCode)
	}
	fmt.Printf("%s  %-10s exit %-4s created %s  output %d bytes\n", v.JobID, v.Status, code, v.CreatedAt, v.Offset)
}

func killCmd(cf *clientFlags) *cobra.Command {
	var sig, target string
	var grace optSeconds
	c := &cobra.Command{
		Use:   "kill [-s SIGNAL] JOB_ID...",
		Short: "Kill jobs at once (SIGKILL to their whole process tree), or send them a signal with -s",
		Long: `Without -s: end each job as docker kill does, at once: SIGKILL to its whole
process tree (the job ends terminated, exit 137). stop is the polite way (SIGTERM,
then SIGKILL after a grace period); kill --grace S is the same as stop --grace S.
With -s SIGNAL (INT, TERM, HUP, KILL, SIGUSR1, 9 …): send that signal only, to
--target: foreground (a pty job's default: the terminal's foreground program),
group (a stdio job's default: the job's process group) or tree (every process of
the job).`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("target") && sig == "" {
				return &usageError{"--target needs -s SIGNAL: without it kill ends the whole tree"}
			}
			if grace.set && sig != "" {
				return &usageError{"--grace is for kill without -s (SIGTERM, then SIGKILL after it): with -s only that signal is sent"}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			// docker kill's default: no grace at all, so the server's
			// ladder goes straight to SIGKILL of the tree.
			g := 0.0
			if grace.set {
				g = grace.v
			}
			var failed error
			for _, id := range args {
				if sig == "" {
					v, err := c.Terminate(cmd.Context(), id, g)
					if err != nil {
						fmt.Fprintf(os.Stderr, "shellctl: %s: %s\n", id, explain(err))
						failed = &jobExit{code: exitClient}
						continue
					}
					cf.print(v, func() { fmt.Println(id) })
					continue
				}
				rec, err := c.Signal(cmd.Context(), id, sig, target)
				if err != nil {
					fmt.Fprintf(os.Stderr, "shellctl: %s: %s\n", id, explain(err))
					failed = &jobExit{code: exitClient}
					continue
				}
				cf.print(rec, func() { fmt.Println(id) })
			}
			return failed
		},
	}
	c.Flags().StringVarP(&sig, "signal", "s", "", "signal to send instead of ending the job")
	c.Flags().StringVar(&target, "target", "", "with -s: foreground, group or tree")
	c.Flags().Var(&grace, "grace", "without -s: SIGTERM first, SIGKILL after this many seconds (as stop; default: SIGKILL at once)")
	return c
}

func terminateCmd(cf *clientFlags) *cobra.Command {
	var grace optSeconds
	c := &cobra.Command{
		Use:     "terminate JOB_ID...",
		Aliases: []string{"stop"},
		Short:   "Stop jobs politely: SIGTERM, then SIGKILL to the whole tree after a grace period (alias: stop)",
		Long: `End each job and its whole process tree the polite way: SIGINT to a pty job's
foreground program and SIGTERM to the tree, then SIGKILL after --grace seconds
(the server's default is 10) to what is left. It returns as soon as nothing of
the job is left. docker stop is the same; kill (without -s) is the SIGKILL at once.`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var failed error
			for _, id := range args {
				v, err := c.Terminate(cmd.Context(), id, grace.orDefault())
				if err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(os.Stderr, "shellctl: %s: %s\n", id, explain(err))
					failed = &jobExit{code: exitClient}
					continue
				}
				cf.print(v, func() { printStatus(v) })
			}
			return failed
		},
	}
	c.Flags().VarP(&grace, "grace", "t", "seconds between SIGTERM and SIGKILL (server default 10; -t as docker stop's)")
	return c
}

func rmCmd(cf *clientFlags) *cobra.Command {
	var grace optSeconds
	var force bool
	c := &cobra.Command{
		Use:               "rm [-f] JOB_ID...",
		Aliases:           []string{"delete"},
		Short:             "Delete finished jobs and their output (-f ends running ones first)",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var failed error
			for _, id := range args {
				err := c.Delete(cmd.Context(), id, force, grace.orDefault())
				if err != nil {
					msg := explain(err)
					if apiCode(err) == "job_running" {
						msg = fmt.Sprintf("job %s is still running: pass -f (--force) to end it and delete it", id)
					}
					fmt.Fprintf(os.Stderr, "shellctl: %s\n", msg)
					failed = &jobExit{code: exitClient}
					continue
				}
				cf.print(map[string]any{"job_id": id, "deleted": true}, func() { fmt.Println(id) })
			}
			return failed
		},
	}
	c.Flags().BoolVarP(&force, "force", "f", false, "end the job first if it runs")
	c.Flags().Var(&grace, "grace", "with -f: seconds between SIGTERM and SIGKILL (server default 10)")
	return c
}

func addClientCommands(root *cobra.Command) {
	cf := theClientFlags
	root.AddCommand(runCmd(cf), logsCmd(cf), attachCmd(cf), psCmd(cf), inspectCmd(cf), killCmd(cf),
		rmCmd(cf), waitCmd(cf), inputCmd(cf), tailCmd(cf), statusCmd(cf), terminateCmd(cf), snapshotCmd(cf),
		screenCmd(cf), keysCmd(cf)) // screen.go
	root.AddCommand(prepareCmd(cf)) // prepare.go
}
