package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/statedir"
)

// psRow is one job as ps shows it (and prints it with --json).
type psRow struct {
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	ExitCode  *int    `json:"exit_code"`
	Mode      string  `json:"mode"`
	CreatedAt string  `json:"created_at"`
	StartedAt *string `json:"started_at"`
	EndedAt   *string `json:"ended_at"`
	// Command is the start of the job's script, or null where this client
	// cannot read it (see commandOf).
	Command *string `json:"command"`
}

// commandWidth bounds the COMMAND column.
const commandWidth = 48

func psCmd(cf *clientFlags) *cobra.Command {
	var status string
	var limit int
	var quiet bool
	c := &cobra.Command{
		Use:     "ps",
		Aliases: []string{"jobs"},
		Short:   "List jobs, newest first (ID, STATUS, EXIT, MODE, AGE, COMMAND)",
		Long: `List jobs, newest first: ID, STATUS, EXIT (the exit code, - while running or
when the job has none), MODE, AGE (since it was created) and COMMAND (the start of
its script). -q prints the ids only. --json prints the same as JSON.

COMMAND is read from the job's script file in the server's state dir, so it shows
only where this client runs on the server's machine as its user; elsewhere it is
"?" (the API does not send scripts back).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			list, err := c.List(ctx, status, limit)
			if err != nil {
				return err
			}
			if quiet {
				for _, j := range list {
					fmt.Println(j.JobID)
				}
				return nil
			}
			rows := psRows(ctx, c, list)
			if cf.json {
				cf.print(map[string]any{"jobs": rows}, nil)
				return nil
			}
			printPS(os.Stdout, rows, time.Now())
			return nil
		},
	}
	c.Flags().StringVar(&status, "status", "", "only jobs in this state (created, starting, running, exited, terminated, failed, lost)")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many jobs (the server's default is 50, at most 200)")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print the job ids only")
	return c
}

// psRows fills in each job's record (a few at a time) and command.
func psRows(ctx context.Context, c *client.Client, list []client.JobInfo) []psRow {
	stateDir := ""
	if info, err := c.Info(ctx); err == nil {
		stateDir = info.StateDir
	}
	// The state dir is opened once; each script beneath it without
	// following a link (statedir.Dir), as the server opens its files.
	var sd *statedir.Dir
	if stateDir != "" {
		if d, err := statedir.OpenDir(stateDir); err == nil {
			sd = d
			defer d.Close()
		}
	}
	rows := make([]psRow, len(list))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, j := range list {
		rows[i] = psRow{JobID: j.JobID, Status: j.Status, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, EndedAt: j.EndedAt}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if rec, err := c.Record(ctx, j.JobID); err == nil {
				r := &rows[i]
				r.Status, r.ExitCode, r.Mode = rec.Status, rec.ExitCode, rec.Mode
				r.CreatedAt, r.StartedAt, r.EndedAt = rec.CreatedAt, rec.StartedAt, rec.EndedAt
			}
			rows[i].Command = commandOf(sd, j.JobID)
		}()
	}
	wg.Wait()
	return rows
}

// commandOf is the start of job id's script, read from its file in the
// server's state dir (jobs/<id>/script), or nil where this client cannot
// read it (another machine or user). The API has no route that gives a
// script back, and the record's keys are fixed by the spec.
func commandOf(sd *statedir.Dir, id string) *string {
	if sd == nil || !jobs.ValidID(id) {
		return nil
	}
	f, err := sd.Open(filepath.Join("jobs", id, "script"), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, 512)
	n, _ := io.ReadFull(f, buf)
	s := oneLine(string(buf[:n]))
	return &s
}

// oneLine folds a script into one line: lines joined by "; ", spaces
// squeezed, a leading #! line left out.
func oneLine(script string) string {
	var parts []string
	for i, l := range strings.Split(script, "\n") {
		if i == 0 && strings.HasPrefix(l, "#!") {
			continue
		}
		if f := strings.Fields(l); len(f) > 0 {
			parts = append(parts, strings.Join(f, " "))
		}
	}
	return strings.ToValidUTF8(strings.Join(parts, "; "), "?")
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func printPS(w io.Writer, rows []psRow, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tEXIT\tMODE\tAGE\tCOMMAND")
	for _, r := range rows {
		exit := "-"
		if r.ExitCode != nil {
			exit = fmt.Sprint(*r.ExitCode)
		}
		mode := r.Mode
		if mode == "" {
			mode = "?"
		}
		cmd := "?"
		if r.Command != nil {
			cmd = clip(*r.Command, commandWidth)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.JobID, r.Status, exit, mode, age(r.CreatedAt, now), cmd)
	}
	tw.Flush()
}

// age is how long ago t (RFC 3339) was, in one unit: 45s, 12m, 5h, 3d.
func age(t string, now time.Time) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return "?"
	}
	d := now.Sub(at)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func inspectCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "inspect JOB_ID...",
		Short:             "Print the full record of jobs as JSON (why it ended, limits, usage, isolation …)",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var failed error
			for _, id := range args {
				raw, err := c.RecordJSON(cmd.Context(), id)
				if err != nil {
					fmt.Fprintf(os.Stderr, "shellctl: %s: %s\n", id, explain(err))
					failed = &jobExit{code: exitClient}
					continue
				}
				var buf bytes.Buffer
				if err := json.Indent(&buf, raw, "", "  "); err != nil {
					return fmt.Errorf("the record of job %s is not JSON: %w", id, err)
				}
				buf.WriteByte('\n')
				if _, err := os.Stdout.Write(buf.Bytes()); err != nil {
					return err
				}
			}
			return failed
		},
	}
}
