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
	var detach, interactive, tty, stdio bool
	detachKeys := defaultDetachKeys
	c := &cobra.Command{
		Use:   "run [flags] SCRIPT... | -",
		Short: "Run a script as a job in your working directory, print its output, exit with its code",
		Long: `Run a script as a job and print its output as it comes (stderr of a stdio job
on your stderr). The job runs in your working directory (--cwd to choose another)
and shellctl exits with the job's exit code.

Flags come before the script: everything from its first word on is the script's,
as in docker (shellctl run ls -la; or put -- before it). The words are joined by
spaces into one shell command line.

Ctrl-C sends SIGINT to the job (to the terminal's foreground program for a pty
job) and keeps following it; a second Ctrl-C within 3 seconds terminates the job.
Either way shellctl exits with the job's code. -d starts the job and prints its id
(exit 125 and the reason when it failed to start).
-i attaches your terminal to the job (as attach does: what you type goes to it,
Ctrl-P Ctrl-Q detaches). -t asks for a terminal: a pty job, the default; -it is
-i with it, as in docker. With --mode stdio (--stdio), -i keeps your stdin open
and pipes it to the job's stdin byte for byte; its end is the job's end of file
(printf 'a\nb\n' | shellctl run -i --stdio sort). -di keeps the pipe open for
shellctl input (input --eof closes it). Without -i the job's stdin is empty and
yours is not read, as in docker: shellctl says so when yours had data.
-e NAME=VALUE sets a variable; -e NAME passes your own value of NAME (left out
when you have none).
Exit 125: shellctl itself failed (no server, a refused request, a job that could
not start).`,
		Example: `  shellctl run 'make -j2 test'
  shellctl run ls -la
  shellctl run -it bash
  shellctl run -e GOFLAGS -e CI=1 go test ./...
  shellctl run -d 'python3 -m http.server 8000'
  echo 'uname -a' | shellctl run -
  seq 3 | shellctl run -i --stdio 'wc -l'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			script := strings.Join(args, " ")
			if stdio {
				if req.Mode != "" && req.Mode != "stdio" {
					return &usageError{fmt.Sprintf("--stdio is --mode stdio, and --mode is %q: pass one of them", req.Mode)}
				}
				req.Mode = "stdio"
			}
			if tty && req.Mode == "stdio" {
				return &usageError{"-t asks for a terminal (a pty job) and --mode stdio for pipes: pass one of them"}
			}
			if tty && req.Mode == "" {
				req.Mode = "pty"
			}
			fromStdin := script == "-"
			if fromStdin && interactive && req.Mode == "stdio" {
				return &usageError{"-i with --mode stdio pipes your stdin to the job: not with a script read from stdin (-)"}
			}
			if fromStdin {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return fmt.Errorf("reading the script from stdin: %w", err)
				}
				script = string(b)
			}
			req.Script = script
			jobEnv, err := envOf(env, os.LookupEnv)
			if err != nil {
				return err
			}
			req.Env = jobEnv
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
			pipeIn := interactive && req.Mode == "stdio" // runpipe.go
			if pipeIn {
				// With -d, as docker run -di: the pipe stays open for
				// shellctl input (--eof closes it).
				req.Stdin = "pipe"
			}
			if interactive && !pipeIn {
				if detach || fromStdin {
					return &usageError{"-i needs a job that runs attached: not with -d or a script from stdin"}
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
			// follows by the stream. (0 would not do: run takes a timeout
			// ≤ 0 as its default of 30 s, http-api.md.)
			req.Timeout = 0.001
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var sigs chan os.Signal
			if !detach && (!interactive || pipeIn) {
				// Caught from before the job starts: a Ctrl-C that comes
				// while the run request is on its way is sent to the job.
				sigs = notifyRun(true)
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
				// The id is printed either way (docker's run -d does so
				// too): inspect and logs take it.
				return startFailure(ctx, c, res.JobID)
			}
			if pipeIn && !detach {
				go func() {
					if err := pipeStdin(ctx, c, res.JobID, os.Stdin); err != nil {
						fmt.Fprintln(os.Stderr, "shellctl:", explain(err))
					}
				}()
			} else if interactive {
				return attachPTY(ctx, c, res.JobID, -1, 0, keys, true)
			}
			err = followRun(ctx, c, cf, sigs, res.JobID, req.Mode == "stdio", req.Terminal != nil)
			if !pipeIn && !fromStdin {
				unsentStdinHint()
			}
			return err
		},
	}
	f := c.Flags()
	// Flags end at the script's first word (docker's rule): run ls -la is
	// the script "ls -la", not an unknown flag -l.
	f.SetInterspersed(false)
	f.StringVar(&req.Mode, "mode", "", "pty (a terminal; the default) or stdio (pipes; stderr apart)")
	f.StringVar(&req.Cwd, "cwd", "", "working directory of the job (default: yours)")
	f.StringArrayVarP(&env, "env", "e", nil, "NAME=VALUE for the job's environment, or NAME for your value of NAME (repeatable)")
	f.StringVar(&req.SessionID, "session-id", "", "session id stored with the job")
	f.StringVar(&req.SessionID, "session", "", "the job's session: its egress credentials (shellctl prepare) and id stored with the job")
	f.BoolVarP(&detach, "detach", "d", false, "print the job id and return once the job runs")
	f.BoolVarP(&interactive, "interactive", "i", false, "attach your terminal: type to the job (pty); with --mode stdio, pipe your stdin to it")
	f.BoolVar(&stdio, "stdio", false, "same as --mode stdio")
	f.BoolVarP(&tty, "tty", "t", false, "a terminal for the job: pty mode (the default; not with --mode stdio)")
	f.StringVar(&detachKeys, "detach-keys", defaultDetachKeys, "with -i: the key sequence that detaches")
	return c
}

// envOf turns the -e values into the job's environment: NAME=VALUE as
// given, a bare NAME with the caller's value, or left out when the caller
// has none (docker's -e NAME). nil when there are none.
func envOf(vals []string, lookup func(string) (string, bool)) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, kv := range vals {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return nil, &usageError{fmt.Sprintf("--env %q has no name: give NAME=VALUE or NAME", kv)}
		}
		if !ok {
			if v, ok = lookup(k); !ok {
				continue
			}
		}
		env[k] = v
	}
	return env, nil
}

// startFailure is run -d's answer for a job whose script never ran: exit
// 125 with the record's message. Such a job ended failed, without having
// started, or with a reason that says its script was never reached
// (start_failed: its program could not be executed, with 126 or 127;
// isolation_failed: its confinement could not be set up, with 125). A job
// that ran and ended by itself already is no failure of run's.
func startFailure(ctx context.Context, c *client.Client, id string) error {
	rec, err := c.Record(ctx, id)
	if err != nil {
		return err
	}
	neverRan := rec.Status == "failed" || rec.StartedAt == nil ||
		(rec.Reason != nil && (*rec.Reason == "start_failed" || *rec.Reason == "isolation_failed"))
	if !rec.Done || !neverRan {
		return nil
	}
	msg := fmt.Sprintf("job %s could not start (%s)", id, rec.Status)
	if rec.Message != nil && *rec.Message != "" {
		msg += ": " + *rec.Message
	}
	return &jobExit{code: exitClient, msg: msg + fmt.Sprintf("; `shellctl inspect %s` shows its record", id)}
}

// followRun prints job id's output until it ends, turns Ctrl-C into
// signals to the job, and ends with the job's code.
func followRun(ctx context.Context, c *client.Client, cf *clientFlags, sigs chan os.Signal, id string, stdio, sizeTerm bool) error {
	return followRunFrom(ctx, c, cf, sigs, id, stdio, sizeTerm, 0, 0)
}

// notifyRun catches what followRun handles: Ctrl-C, window changes, and,
// for a job the client runs in the foreground (owned), the ends of the
// client itself (SIGTERM, SIGHUP: its terminal closed), which end the job.
func notifyRun(owned bool) chan os.Signal {
	sigs := make(chan os.Signal, 4)
	if owned {
		signal.Notify(sigs, os.Interrupt, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP)
	} else {
		signal.Notify(sigs, os.Interrupt, syscall.SIGWINCH)
	}
	return sigs
}

// terminateOwned ends a job the client ran in the foreground, as the
// client is ended: it returns once nothing of the job is left.
func terminateOwned(ctx context.Context, c *client.Client, id string) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if _, err := c.Terminate(tctx, id, -1); err != nil && apiCode(err) != "job_not_running" {
		fmt.Fprintln(os.Stderr, "shellctl: terminate:", explain(err))
	}
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
			if s == syscall.SIGTERM || s == syscall.SIGHUP {
				// The client is being ended: a job it runs in the
				// foreground ends with it (run -d is how to leave one
				// running). Terminate answers once nothing of the job is
				// left; then the follow reports its end.
				fmt.Fprintf(os.Stderr, "\nshellctl: %v: terminating job %s (run -d leaves a job running)\n", s, id)
				terminateOwned(ctx, c, id)
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
