package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
)

// clientFlags are the connection flags of the client verbs.
type clientFlags struct {
	server string
	token  string
	json   bool
}

func (f *clientFlags) client() *client.Client {
	tok := f.token
	if tok == "" {
		tok = os.Getenv("SHELLCTL_AUTH_TOKEN")
	}
	return &client.Client{BaseURL: f.server, Token: tok, HTTP: &http.Client{}}
}

func (f *clientFlags) print(v any, human func()) {
	if f.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return
	}
	human()
}

func defaultServer() string {
	if u := os.Getenv("SHELLCTL_URL"); u != "" {
		return u
	}
	return "http://" + defaultListen
}

func addClientCommands(root *cobra.Command) {
	cf := &clientFlags{}
	pf := root.PersistentFlags()
	pf.StringVar(&cf.server, "server", defaultServer(), "server URL (default $SHELLCTL_URL, else http://127.0.0.1:8765)")
	pf.StringVar(&cf.token, "auth-token", "", "bearer token (default $SHELLCTL_AUTH_TOKEN)")
	pf.BoolVar(&cf.json, "json", false, "print the API's JSON answers")
	root.AddCommand(runCmd(cf), waitCmd(cf), inputCmd(cf), tailCmd(cf), statusCmd(cf), jobsCmd(cf),
		terminateCmd(cf), deleteCmd(cf), snapshotCmd(cf))
}

// follow prints a job's output until it is done and returns its result.
func follow(ctx context.Context, c *client.Client, res *client.JobResult, cf *clientFlags) (*client.JobResult, error) {
	for {
		if !cf.json {
			io.WriteString(os.Stdout, res.Output)
		}
		if res.Done {
			return res, nil
		}
		t := 30.0
		next, err := c.Wait(ctx, res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &t})
		if err != nil {
			return nil, err
		}
		res = next
	}
}

// exitWith ends the command with the job's exit code, so scripts can use
// `shellctl run` like the command itself.
func exitWith(res *client.JobResult) error {
	if res.Done && res.ExitCode != nil && *res.ExitCode != 0 {
		os.Exit(*res.ExitCode)
	}
	if res.Done && res.ExitCode == nil {
		fmt.Fprintf(os.Stderr, "shellctl: job %s %s\n", res.JobID, res.Status)
		os.Exit(1)
	}
	return nil
}

func runCmd(cf *clientFlags) *cobra.Command {
	var req client.RunRequest
	var env []string
	var detach bool
	c := &cobra.Command{
		Use:   "run [flags] SCRIPT|-",
		Short: "Run a script as a job and print its output (exit code = the job's)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			script := strings.Join(args, " ")
			if script == "-" {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return err
				}
				script = string(b)
			}
			req.Script = script
			if len(env) > 0 {
				req.Env = map[string]string{}
				for _, kv := range env {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return &usageError{fmt.Sprintf("--env %q is not NAME=VALUE", kv)}
					}
					req.Env[k] = v
				}
			}
			if detach {
				req.Timeout = 0.001
			}
			ctx := cmd.Context()
			c := cf.client()
			res, err := c.Run(ctx, req)
			if err != nil {
				return err
			}
			if detach {
				cf.print(res, func() { fmt.Println(res.JobID) })
				return nil
			}
			res, err = follow(ctx, c, res, cf)
			if err != nil {
				return err
			}
			cf.print(res, func() {})
			return exitWith(res)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Mode, "mode", "", "pty (default) or stdio")
	f.StringVar(&req.Cwd, "cwd", "", "working directory (default the server's $HOME)")
	f.StringArrayVarP(&env, "env", "e", nil, "NAME=VALUE for the job's environment (repeatable)")
	f.StringVar(&req.SessionID, "session-id", "", "session id stored with the job")
	f.BoolVarP(&detach, "detach", "d", false, "print the job id and return at once")
	return c
}

func waitCmd(cf *clientFlags) *cobra.Command {
	var offset int64
	var timeout float64
	var limit int
	var all bool
	c := &cobra.Command{
		Use:   "wait JOB_ID",
		Short: "Wait for a job's output or end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := cf.client()
			res, err := c.Wait(cmd.Context(), args[0], client.WaitRequest{Offset: offset, Timeout: &timeout, OutputLimit: limit})
			if err != nil {
				return err
			}
			if all {
				res, err = follow(cmd.Context(), c, res, cf)
				if err != nil {
					return err
				}
				cf.print(res, func() {})
				return exitWith(res)
			}
			cf.print(res, func() {
				io.WriteString(os.Stdout, res.Output)
				fmt.Fprintf(os.Stderr, "[job %s %s, offset %d]\n", res.JobID, res.Status, res.Offset)
			})
			return nil
		},
	}
	c.Flags().Int64Var(&offset, "offset", 0, "byte offset to read from")
	c.Flags().Float64Var(&timeout, "timeout", 30, "seconds to wait")
	c.Flags().IntVar(&limit, "output-limit", 0, "bytes per window")
	c.Flags().BoolVar(&all, "follow", false, "print everything until the job is done")
	return c
}

func inputCmd(cf *clientFlags) *cobra.Command {
	var offset int64
	var timeout float64
	c := &cobra.Command{
		Use:   "input JOB_ID TEXT",
		Short: "Send text to a job's terminal (no newline is added; use $'...\\n')",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := cf.client().Input(cmd.Context(), args[0], args[1], client.WaitRequest{Offset: offset, Timeout: &timeout})
			if err != nil {
				return err
			}
			cf.print(res, func() { io.WriteString(os.Stdout, res.Output) })
			return nil
		},
	}
	c.Flags().Int64Var(&offset, "offset", 0, "byte offset to read output from")
	c.Flags().Float64Var(&timeout, "timeout", 5, "seconds to wait for output")
	return c
}

func tailCmd(cf *clientFlags) *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:   "tail JOB_ID",
		Short: "Print the end of a job's output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := cf.client().Tail(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			cf.print(res, func() { io.WriteString(os.Stdout, res.Output) })
			return nil
		},
	}
	c.Flags().IntVarP(&limit, "bytes", "c", 0, "bytes to print (default 16384)")
	return c
}

func statusCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status JOB_ID",
		Short: "Show a job's status",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := cf.client().Status(cmd.Context(), args[0])
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

func jobsCmd(cf *clientFlags) *cobra.Command {
	var status string
	var limit int
	c := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := cf.client().List(cmd.Context(), status, limit)
			if err != nil {
				return err
			}
			cf.print(map[string]any{"jobs": list}, func() {
				for _, j := range list {
					fmt.Printf("%s  %-10s %s\n", j.JobID, j.Status, j.CreatedAt)
				}
			})
			return nil
		},
	}
	c.Flags().StringVar(&status, "status", "", "only jobs in this state")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many (default 50, at most 200)")
	return c
}

func terminateCmd(cf *clientFlags) *cobra.Command {
	var grace float64
	c := &cobra.Command{
		Use:   "terminate JOB_ID",
		Short: "End a job and its whole process tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := cf.client().Terminate(cmd.Context(), args[0], grace)
			if err != nil {
				return err
			}
			cf.print(v, func() { printStatus(v) })
			return nil
		},
	}
	c.Flags().Float64Var(&grace, "grace", -1, "seconds between SIGTERM and SIGKILL (default 10)")
	return c
}

func deleteCmd(cf *clientFlags) *cobra.Command {
	var grace float64
	var force bool
	c := &cobra.Command{
		Use:   "delete JOB_ID",
		Short: "Delete a finished job (--force terminates a running one first)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.client().Delete(cmd.Context(), args[0], force, grace); err != nil {
				return err
			}
			cf.print(map[string]any{"job_id": args[0], "deleted": true}, func() { fmt.Println("deleted", args[0]) })
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "terminate the job first if it runs")
	c.Flags().Float64Var(&grace, "grace", -1, "seconds between SIGTERM and SIGKILL (default 10)")
	return c
}

// progressOut is stderr when it is a terminal, else nil (no progress).
func progressOut() io.Writer {
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err == nil {
		return os.Stderr
	}
	return nil
}
