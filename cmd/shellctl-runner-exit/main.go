// Command shellctl-runner-exit records a job's end in the database from the
// command line, through the same compare-and-set as the server: a job that
// already has a terminal state keeps it. The runner uses it when no server is
// there to hear the exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/shellctl/shellctl/internal/store"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("shellctl-runner-exit", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "shellctl state dir (required)")
	id := fs.String("job-id", "", "job id (required)")
	code := fs.Int("exit-code", -1, "the job's exit code (omit for failed and lost)")
	endedAt := fs.String("ended-at", "", "when the job ended, RFC 3339 (default now)")
	status := fs.String("status", "", "terminal status (default exited when --exit-code is given)")
	reason := fs.String("reason", "", "why the job ended")
	sig := fs.Int("signal", 0, "the signal that killed the job, if any")
	pgid := fs.Int("pgid", 0, "the job's process group")
	usage := fs.String("usage", "", "JSON of the job's tree's resource usage")
	limits := fs.String("limits-applied", "", "JSON of the limits the runner applied")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *stateDir == "" || *id == "" {
		fmt.Fprintln(os.Stderr, "shellctl-runner-exit: --state-dir and --job-id are required")
		return 2
	}
	e := store.Exit{Status: *status, Reason: *reason, Signal: *sig, EndedAt: time.Now(), Pgid: *pgid, Usage: *usage, LimitsApplied: *limits}
	if *endedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, *endedAt)
		if err != nil {
			fmt.Fprintf(os.Stderr, "shellctl-runner-exit: --ended-at %q is not an RFC 3339 time\n", *endedAt)
			return 2
		}
		e.EndedAt = t
	}
	if *code >= 0 {
		c := *code
		e.ExitCode = &c
		if e.Status == "" {
			e.Status = store.StatusExited
		}
	}
	if e.Status == "" {
		fmt.Fprintln(os.Stderr, "shellctl-runner-exit: --exit-code or --status is required")
		return 2
	}
	if !store.IsTerminal(e.Status) {
		fmt.Fprintf(os.Stderr, "shellctl-runner-exit: --status %q is not a terminal state\n", e.Status)
		return 2
	}
	ctx := context.Background()
	st, err := store.Open(ctx, *stateDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shellctl-runner-exit:", err)
		return 1
	}
	defer st.Close()
	err = st.Finish(ctx, *id, e)
	switch {
	case errors.Is(err, store.ErrNotChanged):
		// Already terminal (or unknown): nothing to do, and not an error —
		// the server may have recorded it first.
		return 0
	case err != nil:
		fmt.Fprintln(os.Stderr, "shellctl-runner-exit:", err)
		return 1
	}
	return 0
}
