package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"text/template"
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

// commandWidth bounds the COMMAND column (--no-trunc lifts it).
const commandWidth = 48

// commandRead is how much of a script ps reads for its COMMAND column and
// --json: more than the column shows, little enough for a list of 200.
const commandRead = 512

// maxCommandRead bounds what ps --no-trunc reads of one script: a script
// may be as large as a request (64 MiB); a line of ps need not be.
const maxCommandRead = 64 << 10

func psCmd(cf *clientFlags) *cobra.Command {
	var status, format string
	var limit int
	var quiet, all, noTrunc bool
	c := &cobra.Command{
		Use:     "ps",
		Aliases: []string{"jobs"},
		Short:   "List running jobs (-a: all), newest first (ID, STATUS, EXIT, MODE, AGE, COMMAND)",
		Long: `List the jobs that have not ended (created, starting, running), newest first;
-a lists all of them, --status S those in one state. Columns: ID, STATUS, EXIT (the
exit code, - while running or when the job has none), MODE, AGE (since it was
created) and COMMAND (the start of its script; --no-trunc: all of it). -q prints
the ids only. --json prints the same as JSON; --format prints each job by a Go
template over its row ({{.JobID}} {{.Status}} {{.ExitCode}} {{.Mode}} {{.Age}}
{{.Command}} {{.CreatedAt}} {{.StartedAt}} {{.EndedAt}}; {{json .}} the row as
JSON), or "json" for one JSON object per line.

Finished jobs are kept for the server's --gc-retention (5m by default) after they
end, then collected: ps -a no longer lists them and logs no longer has them.

COMMAND is read from the job's script file in the server's state dir, so it shows
only where this client runs on the server's machine as its user; elsewhere it is
"?" (the API does not send scripts back).`,
		Example: `  shellctl ps -a
  shellctl ps --format '{{.JobID}} {{.Status}}'
  shellctl ps -a --format json | jq -r .command`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var tmpl *template.Template
			switch {
			case format != "" && (quiet || cf.json):
				return &usageError{"--format and -q or --json are given together: pass one of them"}
			case format != "" && format != "json":
				var err error
				if tmpl, err = parseRowFormat(format); err != nil {
					return err
				}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var list []client.JobInfo
			if status != "" || all {
				list, err = c.List(ctx, status, limit)
			} else {
				list, err = listNotEnded(ctx, c, limit)
			}
			if err != nil {
				return err
			}
			if quiet {
				for _, j := range list {
					fmt.Println(j.JobID)
				}
				return nil
			}
			width := commandWidth
			if noTrunc {
				width = 0
			}
			rows := psRows(ctx, c, list, noTrunc)
			switch {
			case cf.json:
				cf.print(map[string]any{"jobs": rows}, nil)
				return nil
			case format == "json":
				enc := json.NewEncoder(os.Stdout)
				enc.SetEscapeHTML(false)
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			case tmpl != nil:
				return printRows(os.Stdout, tmpl, rows, time.Now(), width)
			}
			printPS(os.Stdout, rows, time.Now(), width)
			return nil
		},
	}
	c.Flags().BoolVarP(&all, "all", "a", false, "all jobs, ended ones too (default: those not ended)")
	c.Flags().StringVar(&status, "status", "", "only jobs in this state (created, starting, running, exited, terminated, failed, lost)")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many jobs (the server's default is 50, at most 200)")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print the job ids only")
	c.Flags().StringVar(&format, "format", "", `print each job by a Go template ('{{.JobID}} {{.Status}}'), or "json" for one object per line`)
	c.Flags().BoolVar(&noTrunc, "no-trunc", false, "the whole COMMAND, not its first 48 characters")
	return c
}

// notEnded are the states of a job that has not ended, in the order a job
// goes through them.
var notEnded = []string{"created", "starting", "running"}

// listNotEnded lists the jobs that have not ended, newest first, at most
// limit (≤ 0: the server's default, 50). The list route takes one state,
// so it is asked once per state, in the order a job goes through them: a
// job that moves on between two answers is then listed twice (kept once)
// rather than missed, unless it ended meanwhile.
func listNotEnded(ctx context.Context, c *client.Client, limit int) ([]client.JobInfo, error) {
	seen := map[string]bool{}
	var all []client.JobInfo
	for _, st := range notEnded {
		list, err := c.List(ctx, st, limit)
		if err != nil {
			return nil, err
		}
		for _, j := range list {
			if !seen[j.JobID] {
				seen[j.JobID] = true
				all = append(all, j)
			}
		}
	}
	sortNewestFirst(all)
	if limit <= 0 {
		limit = defaultListLimit
	}
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// defaultListLimit is the list route's default limit (http-api.md).
const defaultListLimit = 50

// sortNewestFirst orders jobs by creation time, newest first; the sort is
// stable, so jobs created at the same instant keep the server's order.
func sortNewestFirst(list []client.JobInfo) {
	at := func(j client.JobInfo) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, j.CreatedAt)
		return t
	}
	sort.SliceStable(list, func(a, b int) bool { return at(list[a]).After(at(list[b])) })
}

// formatRow is a job as ps --format's template sees it: the table's
// values as text (ExitCode "-" while there is none, Command "?" where it
// is unknown), StartedAt and EndedAt "" while unset. ID is JobID under
// docker's name.
type formatRow struct {
	ID, JobID, Status, ExitCode, Mode, Age, Command string
	CreatedAt, StartedAt, EndedAt                   string
	row                                             psRow
}

const formatFields = "ID, JobID, Status, ExitCode, Mode, Age, Command, CreatedAt, StartedAt, EndedAt"

// parseRowFormat reads ps --format's template. {{json .}} prints the row
// as --format json does.
func parseRowFormat(text string) (*template.Template, error) {
	t, err := template.New("format").Option("missingkey=error").Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			if r, ok := v.(formatRow); ok {
				v = r.row
			}
			b, err := json.Marshal(v)
			return string(b), err
		},
	}).Parse(text)
	if err != nil {
		return nil, &usageError{fmt.Sprintf("--format %q is not a Go template: %v", text, err)}
	}
	// A field that does not exist fails on a row of blanks as on a job:
	// said before anything is asked of the server, even when no job is
	// listed.
	if err := t.Execute(io.Discard, formatRow{}); err != nil {
		return nil, &usageError{fmt.Sprintf("--format %q: %v (the fields: %s)", text, err, formatFields)}
	}
	return t, nil
}

// printRows prints each row by tmpl, one line each (a newline is added
// unless the template ends with one). width clips Command (0: whole).
func printRows(w io.Writer, tmpl *template.Template, rows []psRow, now time.Time, width int) error {
	var buf bytes.Buffer
	for _, r := range rows {
		buf.Reset()
		if err := tmpl.Execute(&buf, toFormatRow(r, now, width)); err != nil {
			return &usageError{fmt.Sprintf("--format: %v (the fields: %s)", err, formatFields)}
		}
		if !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
			buf.WriteByte('\n')
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func toFormatRow(r psRow, now time.Time, width int) formatRow {
	f := formatRow{ID: r.JobID, JobID: r.JobID, Status: r.Status, ExitCode: "-", Mode: r.Mode, Age: age(r.CreatedAt, now),
		Command: "?", CreatedAt: r.CreatedAt, row: r}
	if r.ExitCode != nil {
		f.ExitCode = strconv.Itoa(*r.ExitCode)
	}
	if f.Mode == "" {
		f.Mode = "?"
	}
	if r.Command != nil {
		f.Command = clip(*r.Command, width)
	}
	if r.StartedAt != nil {
		f.StartedAt = *r.StartedAt
	}
	if r.EndedAt != nil {
		f.EndedAt = *r.EndedAt
	}
	return f
}

// psRows fills in each job's record (a few at a time) and command.
// whole: the script's command whole (up to maxCommandRead), else its start.
func psRows(ctx context.Context, c *client.Client, list []client.JobInfo, whole bool) []psRow {
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
			read := commandRead
			if whole {
				read = maxCommandRead
			}
			rows[i].Command = commandOf(sd, j.JobID, read)
		}()
	}
	wg.Wait()
	return rows
}

// commandOf is the start of job id's script, read from its file in the
// server's state dir (jobs/<id>/script), or nil where this client cannot
// read it (another machine or user). The API has no route that gives a
// script back, and the record's keys are fixed by the spec.
func commandOf(sd *statedir.Dir, id string, read int) *string {
	if sd == nil || !jobs.ValidID(id) {
		return nil
	}
	f, err := sd.Open(filepath.Join("jobs", id, "script"), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, read+1)
	n, _ := io.ReadFull(f, buf)
	more := n > read
	s := oneLine(string(buf[:min(n, read)]))
	if more {
		// There is more: say so rather than show a cut as the whole.
		s += "…"
	}
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

// clip cuts s to n characters, the last one "…" (n ≤ 0: s whole).
func clip(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// printPS prints the table; width clips COMMAND (0: whole).
func printPS(w io.Writer, rows []psRow, now time.Time, width int) {
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
			cmd = clip(*r.Command, width)
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
