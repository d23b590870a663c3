package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shellctl/shellctl/internal/client"
)

// interruptWindow: a second Ctrl-C within it terminates the job.
const interruptWindow = 3 * time.Second

func runCmd(cf *clientFlags) *cobra.Command {
	var req client.RunRequest
	var env []string
	var detach, interactive bool
	detachKeys := defaultDetachKeys
	c := &cobra.Command{
		Use:   "run [flags] SCRIPT... | -",
		Short: "Run a script as a job in your working directory, print its output, exit with its code",
		Long: `Run a script as a job and print its output as it comes (stderr of a stdio job
on your stderr). The job runs in your working directory (--cwd to choose another)
and shellctl exits with the job's exit code.

Ctrl-C sends SIGINT to the job (to the terminal's foreground program for a pty
job) and keeps following it; a second Ctrl-C within 3 seconds terminates the job.
Either way shellctl exits with the job's code. -d starts the job and prints its id.
-i attaches your terminal to the job (as attach does: what you type goes to it,
Ctrl-P Ctrl-Q detaches).
Exit 125: shellctl itself failed (no server, a refused request).`,
		Example: `  shellctl run 'make -j2 test'
  shellctl run -d 'python3 -m http.server 8000'
  echo 'uname -a' | shellctl run -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			script := strings.Join(args, " ")
			if script == "-" {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return fmt.Errorf("reading the script from stdin: %w", err)
				}
				script = string(b)
			}
			req.Script = script
			if len(env) > 0 {
				req.Env = map[string]string{}
				for _, kv := range env {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return &usageError{fmt.Sprintf("--env %q is not NAME=VALUE", kv)}
					}
					req.Env[k] = v
				}
			}
			if req.Cwd == "" {
				wd, err := os.Getwd()
				if err != nil {
					return fmt.Errorf("finding your working directory for the job (pass --cwd DIR): %w", err)
				}
				req.Cwd = wd
			}
			if req.Mode != "" && req.Mode != "pty" && req.Mode != "stdio" {
				return &usageError{fmt.Sprintf("--mode %q is not pty or stdio", req.Mode)}
			}
			var keys []byte
			if interactive {
				if detach || req.Mode == "stdio" || script == "-" {
					return &usageError{"-i needs a pty job that runs attached: not with -d, --mode stdio or a script from stdin"}
				}
				var err error
				if keys, err = parseDetachKeys(detachKeys); err != nil {
					return err
				}
			}
			if req.Mode != "stdio" {
				// The job's terminal takes the size of ours.
				if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 && h > 0 {
					req.Terminal = &client.Terminal{Cols: min(w, 4096), Rows: min(h, 4096)}
				}
			}
			// The smallest wait: the answer comes at once, the output
			// follows by the stream.
			req.Timeout = 0.001
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var sigs chan os.Signal
			if !detach && !interactive {
				// Caught from before the job starts: a Ctrl-C that comes
				// while the run request is on its way is sent to the job.
				sigs = notifyRun()
				defer signal.Stop(sigs)
			}
			res, err := c.Run(ctx, req)
			if err != nil {
				if code := apiCode(err); code == "invalid_cwd" || code == "cwd_not_allowed" {
					return fmt.Errorf("%s: the job runs in your working directory unless you pass --cwd DIR (one the server has and allows)", explain(err))
				}
				return err
			}
			if detach {
				// The id once the job runs, so that what comes next (kill
				// -s, input, attach) finds it running.
				if err := waitStarted(ctx, c, res.JobID); err != nil {
					return err
				}
				cf.print(res, func() { fmt.Println(res.JobID) })
				return nil
			}
			if interactive {
				return attachPTY(ctx, c, res.JobID, 0, keys)
			}
			return followRun(ctx, c, cf, sigs, res.JobID, req.Mode == "stdio", req.Terminal != nil)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Mode, "mode", "", "pty (a terminal; the default) or stdio (pipes; stderr apart)")
	f.StringVar(&req.Cwd, "cwd", "", "working directory of the job (default: yours)")
	f.StringArrayVarP(&env, "env", "e", nil, "NAME=VALUE for the job's environment (repeatable)")
	f.StringVar(&req.SessionID, "session-id", "", "session id stored with the job")
	f.BoolVarP(&detach, "detach", "d", false, "print the job id and return once the job runs")
	f.BoolVarP(&interactive, "interactive", "i", false, "attach your terminal: type to the job (pty only)")
	f.StringVar(&detachKeys, "detach-keys", defaultDetachKeys, "with -i: the key sequence that detaches")
	return c
}

// followRun prints job id's output until it ends, turns Ctrl-C into
// signals to the job, and ends with the job's code.
func followRun(ctx context.Context, c *client.Client, cf *clientFlags, sigs chan os.Signal, id string, stdio, sizeTerm bool) error {
	return followRunFrom(ctx, c, cf, sigs, id, stdio, sizeTerm, 0, 0)
}

// notifyRun catches what followRun handles: Ctrl-C and window changes.
func notifyRun() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGWINCH)
	return sigs
}

// followRunFrom is followRun from the given offsets of output and stderr.
func followRunFrom(ctx context.Context, c *client.Client, cf *clientFlags, sigs chan os.Signal, id string, stdio, sizeTerm bool, outOff, errOff int64) error {
	out := io.Writer(os.Stdout)
	if cf.json {
		out = io.Discard
	}
	f := &follower{c: c, id: id, out: &sink{w: out, offset: outOff}}
	if stdio {
		errw := io.Writer(os.Stderr)
		if cf.json {
			errw = io.Discard
		}
		f.stderr = &sink{w: errw, offset: errOff}
	}
	type result struct {
		end *jobEnd
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := f.run(ctx)
		done <- result{end, err}
	}()
	var lastInt time.Time
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return r.err
			}
			return endWith(ctx, c, cf, id, r.end)
		case s := <-sigs:
			if s == syscall.SIGWINCH {
				if !sizeTerm || stdio {
					continue
				}
				if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 && h > 0 {
					go c.Resize(ctx, id, min(w, 4096), min(h, 4096))
				}
				continue
			}
			if !lastInt.IsZero() && time.Since(lastInt) < interruptWindow {
				lastInt = time.Time{}
				fmt.Fprintf(os.Stderr, "\nshellctl: terminating job %s\n", id)
				go func() {
					if _, err := c.Terminate(ctx, id, -1); err != nil && apiCode(err) != "job_not_running" {
						fmt.Fprintln(os.Stderr, "shellctl: terminate:", explain(err))
					}
				}()
				continue
			}
			lastInt = time.Now()
			fmt.Fprintf(os.Stderr, "\nshellctl: sent SIGINT to job %s; Ctrl-C again within %.0fs terminates it\n", id, interruptWindow.Seconds())
			go func() {
				if _, err := c.Signal(ctx, id, "INT", ""); err != nil && apiCode(err) != "job_not_running" {
					fmt.Fprintln(os.Stderr, "shellctl: signal:", explain(err))
				}
			}()
		}
	}
}

// endWith reports a followed job's end: with --json its record, and the
// exit code of the job (125 and why, when it has none: it never started or
// its runner was lost).
func endWith(ctx context.Context, c *client.Client, cf *clientFlags, id string, end *jobEnd) error {
	if cf.json {
		rec, err := c.RecordJSON(ctx, id)
		if err != nil {
			return err
		}
		os.Stdout.Write(append(rec, '\n'))
	}
	return exitOf(ctx, c, id, end)
}

func exitOf(ctx context.Context, c *client.Client, id string, end *jobEnd) error {
	if end.ExitCode != nil {
		if *end.ExitCode == 0 {
			return nil
		}
		return &jobExit{code: *end.ExitCode}
	}
	msg := fmt.Sprintf("job %s ended %s without an exit code", id, end.Status)
	if rec, err := c.Record(ctx, id); err == nil && rec.Message != nil {
		msg += ": " + *rec.Message
	}
	return &jobExit{code: exitClient, msg: msg}
}
