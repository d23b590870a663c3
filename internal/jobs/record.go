package jobs

// The extended API's job routes (spec/extended-api.md §2, §3): the full
// record of a job, its stderr, signals and resizing its terminal.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/screen"
	"github.com/shellctl/shellctl/internal/store"
)

// RecordTime is the layout of the record's times: RFC 3339 UTC with
// milliseconds.
const RecordTime = "2006-01-02T15:04:05.000Z"

// Record is the full job record (GET /v1/jobs/{id}/record), in the key
// order of the spec's table.
type Record struct {
	JobID    string  `json:"job_id"`
	Status   string  `json:"status"`
	Done     bool    `json:"done"`
	ExitCode *int    `json:"exit_code"`
	Signal   *string `json:"signal"`
	Reason   *string `json:"reason"`
	Message  *string `json:"message"`
	Mode     string  `json:"mode"`
	// Stdin: "null", "pipe", "closed" or "pty" (extended-api.md §8).
	Stdin          string    `json:"stdin"`
	Cwd            string    `json:"cwd"`
	Home           string    `json:"home"`
	Terminal       *Terminal `json:"terminal"`
	SessionID      *string   `json:"session_id"`
	EnvNames       []string  `json:"env_names"`
	CreatedAt      string    `json:"created_at"`
	StartedAt      *string   `json:"started_at"`
	EndedAt        *string   `json:"ended_at"`
	OutputBytes    int64     `json:"output_bytes"`
	StderrBytes    int64     `json:"stderr_bytes"`
	OutputComplete bool      `json:"output_complete"`
	InputWait      *bool     `json:"input_wait"`
	// ScreenAvailable: GET …/screen answers (a pty job whose terminal
	// is within what is emulated).
	ScreenAvailable bool          `json:"screen_available"`
	PID             *int          `json:"pid"`
	Pgid            *int          `json:"pgid"`
	Isolation       *RecordIsol   `json:"isolation"`
	Limits          RecordLimits  `json:"limits"`
	Usage           *runner.Usage `json:"usage"`
	IdempotencyKey  *string       `json:"idempotency_key"`
	// Egress is the egress proxy as the job got it (egress.go; null:
	// the proxy was off).
	Egress *RecordEgress `json:"egress"`
}

// Terminal is a pty job's terminal size.
type Terminal struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// RecordIsol is what isolation was applied, in the record's shape.
type RecordIsol struct {
	Enabled     bool                    `json:"enabled"`
	LandlockABI int                     `json:"landlock_abi"`
	Rules       []isolation.AppliedRule `json:"rules"`
	Scoped      []string                `json:"scoped"`
	Error       *string                 `json:"error"`
	// Capabilities the job kept ([] none; null: not limited, or the job
	// did not get that far); Seccomp its filter ("default", "off"; null:
	// not that far); IPCNamespace: an IPC namespace of its own.
	Capabilities []string `json:"capabilities"`
	Seccomp      *string  `json:"seccomp"`
	IPCNamespace bool     `json:"ipc_namespace"`
}

// Limits is a set of limits; null where none.
type Limits struct {
	RuntimeMS   *int64 `json:"runtime_ms"`
	OutputBytes *int64 `json:"output_bytes"`
	MemoryBytes *int64 `json:"memory_bytes"`
	Pids        *int64 `json:"pids"`
}

// RecordLimits: what was asked (the server's limits for every job) and
// what applied (as the job's runner applied them; null before it started).
type RecordLimits struct {
	Asked   Limits                `json:"asked"`
	Applied *runner.AppliedLimits `json:"applied"`
}

func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// askedLimits is JSON of the limits every job is run with (the service's
// configuration: made once, in New).
func (s *Service) askedLimits() string { return s.limitsJSON }

func limitsJSON(cfg Config) string {
	b, _ := json.Marshal(Limits{
		RuntimeMS:   positive(cfg.MaxRuntime.Milliseconds()),
		OutputBytes: positive(cfg.MaxOutputBytes),
		MemoryBytes: positive(cfg.MemoryMax),
		Pids:        positive(cfg.PidsMax),
	})
	return string(b)
}

// envNames is a JSON array of the names of env, sorted.
func envNames(env map[string]string) string {
	if len(env) == 0 {
		return "[]"
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	b, _ := json.Marshal(names)
	return string(b)
}

// SignalName names signal n as the record does ("SIGKILL").
func SignalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	if n >= 34 && n <= 64 {
		return fmt.Sprintf("SIGRTMIN+%d", n-34)
	}
	return fmt.Sprintf("signal %d", n)
}

// ReasonLabel is a recorded reason in the record's vocabulary, without
// its detail ("signal" → "signaled", "start_failed: …" → "start_failed"):
// the reason the metrics and the log give, as the record does.
func ReasonLabel(status, reason string) string {
	r, _ := specReason(status, reason, nil, 0, Limits{})
	return r
}

// specReason maps a recorded reason ("kind" or "kind: detail") to the
// record's vocabulary and a message for a person.
func specReason(status, reason string, exitCode *int, signal int, asked Limits) (string, string) {
	kind, detail, _ := strings.Cut(reason, ": ")
	code := -1
	if exitCode != nil {
		code = *exitCode
	}
	limit := func(p *int64, unit string) string {
		if p == nil {
			return "its limit"
		}
		return fmt.Sprintf("its limit of %d %s", *p, unit)
	}
	switch kind {
	case runner.ReasonExited:
		return "exited", fmt.Sprintf("the job exited with code %d", code)
	case runner.ReasonSignal:
		return "signaled", fmt.Sprintf("the job was ended by %s (exit code %d)", SignalName(signal), code)
	case runner.ReasonTerminate:
		return "terminate_requested", "a terminate request ended the job's process tree"
	case runner.ReasonDelete:
		return "delete_requested", "a forced delete ended the job's process tree"
	case runner.ReasonMaxRuntime:
		return "runtime_limit", "the job ran past " + limit(asked.RuntimeMS, "ms") + " (--max-job-runtime) and was ended"
	case runner.ReasonMaxOutput:
		return "output_limit", "the job's output reached " + limit(asked.OutputBytes, "bytes") + " (--max-output-bytes): the rest was dropped and the job ended"
	case runner.ReasonOOM:
		return "memory_limit", "the kernel's OOM killer ended the job at " + limit(asked.MemoryBytes, "bytes") + " (--job-memory-max)"
	case runner.ReasonStartFailed:
		return "start_failed", orDefault(detail, "the job could not be started")
	case runner.ReasonExecFailed:
		return "start_failed", orDefault(detail, "the job's program could not be executed")
	case runner.ReasonStartupLost:
		return "start_failed", "the server stopped before the job's runner started it, and the runner is gone"
	case runner.ReasonSetupFailed:
		return "isolation_failed", orDefault(detail, "the job's confinement could not be set up; it never ran")
	case runner.ReasonRunnerLost:
		return "runner_lost", "the job's runner died: its processes were ended and how the job ended is not known"
	case runner.ReasonOutputFailed:
		return "output_write_failed", orDefault(detail, "the job's output could not be written")
	case "":
		// A row from before reasons were recorded: told by its status.
		switch status {
		case store.StatusExited:
			return "exited", fmt.Sprintf("the job exited with code %d", code)
		case store.StatusTerminated:
			return "terminate_requested", "the job was ended on request"
		case store.StatusFailed:
			return "start_failed", "the job could not be started"
		case store.StatusLost:
			return "runner_lost", "the job's runner died"
		}
		return "", ""
	}
	return kind, reason
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func recordTime(t *time.Time) *string {
	if t == nil || t.IsZero() {
		return nil
	}
	s := t.UTC().Format(RecordTime)
	return &s
}

func lsize(path string) int64 {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// Record returns the full record of job id.
func (s *Service) Record(ctx context.Context, id string) (*Record, error) {
	j := s.lookup(id)
	row, err := s.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(ErrNotFound, "job %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if j != nil {
		// A live job's events are ahead of its row.
		j.mu.Lock()
		if e := j.end; e != nil && !store.IsTerminal(row.Status) {
			// Its end is known, its row does not have it yet (finish).
			row.Reason, row.Signal, row.Usage = e.Reason, e.Signal, e.Usage
		}
		row.Status, row.ExitCode = j.status, j.exitCode
		if !j.started.IsZero() {
			t := j.started
			row.StartedAt = &t
		}
		if !j.ended.IsZero() {
			t := j.ended
			row.EndedAt = &t
		}
		row.PID, row.Pgid = cmp.Or(row.PID, j.pid), cmp.Or(row.Pgid, j.pgid)
		row.LimitsApplied, row.Isolation = cmp.Or(row.LimitsApplied, j.limits), cmp.Or(row.Isolation, j.isolation)
		j.mu.Unlock()
	}
	dir := runner.JobDir(s.cfg.StateDir, id)
	rec := &Record{
		JobID: id, Status: row.Status, Done: store.IsTerminal(row.Status), ExitCode: row.ExitCode,
		Mode: row.Mode, Cwd: row.Cwd, Home: row.Home, EnvNames: []string{},
		CreatedAt: row.CreatedAt.UTC().Format(RecordTime), StartedAt: recordTime(row.StartedAt), EndedAt: recordTime(row.EndedAt),
		OutputBytes: lsize(filepath.Join(dir, runner.OutputFile)), StderrBytes: lsize(filepath.Join(dir, runner.StderrFile)),
		OutputComplete: true,
	}
	rec.Stdin = stdinState(row, j, rec.Done)
	if row.Mode == "pty" && row.Cols > 0 {
		rec.Terminal = &Terminal{Cols: row.Cols, Rows: row.Rows}
		rec.ScreenAvailable = screen.Fits(row.Cols, row.Rows)
	}
	if row.Mode == "pty" {
		// input-wait: looked at now while the job runs, false once it is
		// done; null for stdio jobs, which have no terminal.
		w := false
		if j != nil && !rec.Done {
			w = s.inputWaitNow(ctx, j)
		}
		rec.InputWait = &w
	}
	if row.SessionID != "" {
		rec.SessionID = &row.SessionID
	}
	if row.IdempotencyKey != "" {
		rec.IdempotencyKey = &row.IdempotencyKey
	}
	if row.Egress != "" {
		var e RecordEgress
		if json.Unmarshal([]byte(row.Egress), &e) == nil {
			rec.Egress = &e
		}
	}
	if row.EnvNames != "" {
		_ = json.Unmarshal([]byte(row.EnvNames), &rec.EnvNames)
	}
	if row.Signal != 0 {
		n := SignalName(row.Signal)
		rec.Signal = &n
	}
	if row.Limits != "" {
		_ = json.Unmarshal([]byte(row.Limits), &rec.Limits.Asked)
	}
	if row.LimitsApplied != "" {
		var a runner.AppliedLimits
		if json.Unmarshal([]byte(row.LimitsApplied), &a) == nil {
			rec.Limits.Applied = &a
		}
	}
	if rec.Done {
		kind, msg := specReason(row.Status, row.Reason, row.ExitCode, row.Signal, rec.Limits.Asked)
		rec.Reason, rec.Message = &kind, &msg
		if kind == "output_limit" || kind == "output_write_failed" {
			rec.OutputComplete = false
		}
	}
	if row.PID != 0 {
		rec.PID = &row.PID
	}
	if row.Pgid != 0 {
		rec.Pgid = &row.Pgid
	}
	if row.Isolation != "" {
		var a isolation.Applied
		if json.Unmarshal([]byte(row.Isolation), &a) == nil {
			ri := &RecordIsol{Enabled: a.Enabled, LandlockABI: a.ABI, Rules: a.Rules, Scoped: []string{}}
			if ri.Rules == nil {
				ri.Rules = []isolation.AppliedRule{}
			}
			if a.ScopeSignal {
				ri.Scoped = append(ri.Scoped, "signal")
			}
			if a.ScopeAbstractUnix {
				ri.Scoped = append(ri.Scoped, "abstract_unix")
			}
			if a.Error != "" {
				ri.Error = &a.Error
			}
			ri.Capabilities, ri.IPCNamespace = a.Capabilities, a.IPCNamespace
			if a.Seccomp != "" {
				ri.Seccomp = &a.Seccomp
			}
			rec.Isolation = ri
		}
	}
	if row.Usage != "" {
		var u runner.Usage
		if json.Unmarshal([]byte(row.Usage), &u) == nil {
			rec.Usage = &u
		}
	}
	return rec, nil
}

// liveJob returns the running job id, or why it cannot be steered: not
// found, or not running (its end is recorded, or known).
func (s *Service) liveJob(ctx context.Context, id string) (*job, error) {
	j := s.lookup(id)
	if j == nil {
		row, err := s.st.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(ErrNotFound, "job %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		return nil, errorf(ErrNotRunning, "job %s is %s", id, row.Status)
	}
	if j.done() {
		return nil, errorf(ErrNotRunning, "job %s is no longer running", id)
	}
	return j, nil
}

// Signal targets (spec/extended-api.md §3).
const (
	TargetForeground = runner.TargetForeground
	TargetGroup      = runner.TargetGroup
	TargetTree       = runner.TargetTree
)

// Signal sends signal sig to target of job id ("" is the mode's
// default: the terminal's foreground group for pty jobs, the job's
// process group for stdio jobs).
func (s *Service) Signal(ctx context.Context, id string, sig int, target string) error {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return err
	}
	if target == "" {
		target = TargetGroup
		if j.mode == "pty" {
			target = TargetForeground
		}
	}
	if target == TargetForeground && j.mode != "pty" {
		return errorf(ErrInputUnsupported, "job %s runs in stdio mode: it has no terminal, so no foreground group (use target \"group\" or \"tree\")", id)
	}
	a, err := s.request(ctx, j, &proto.Msg{T: proto.TSignal, Signal: sig, Target: target})
	if err != nil {
		if errors.Is(err, ErrNotRunning) || j.done() {
			return errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return fmt.Errorf("signal job %s: %w", id, err)
	}
	switch {
	case a.Err == "":
		return nil
	case a.Err == "job_not_running", a.Err == "runner gone", strings.HasPrefix(a.Err, "the job"):
		return errorf(ErrNotRunning, "job %s: no %s to signal: %s", id, target, strings.ReplaceAll(a.Err, "job_not_running", "it is no longer running"))
	case a.Err == "input_unsupported":
		return errorf(ErrInputUnsupported, "job %s runs in stdio mode: it has no terminal, so no foreground group", id)
	}
	return fmt.Errorf("signal job %s: %s", id, a.Err)
}

// Resize sets the terminal size of pty job id; the program gets SIGWINCH.
func (s *Service) Resize(ctx context.Context, id string, cols, rows int) error {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return err
	}
	if j.mode != "pty" {
		return errorf(ErrInputUnsupported, "job %s runs in stdio mode: it has no terminal to resize", id)
	}
	a, err := s.request(ctx, j, &proto.Msg{T: proto.TResize, Cols: cols, Rows: rows})
	if err != nil {
		if errors.Is(err, ErrNotRunning) || j.done() {
			return errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return fmt.Errorf("resize job %s: %w", id, err)
	}
	if a.Err != "" {
		if j.done() || a.Err == "runner gone" {
			return errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return fmt.Errorf("resize job %s: %s", id, a.Err)
	}
	if err := s.st.SetTerminal(ctx, id, cols, rows); err != nil && !errors.Is(err, store.ErrNotChanged) {
		return err
	}
	return nil
}

// Stderr pages the stderr.log of job id by the rules of a wait with
// timeout 0. A pty job's stderr is its terminal (output.log): its stderr
// reads as empty.
func (s *Service) Stderr(ctx context.Context, id string, wp WaitParams) (*Result, error) {
	var status, mode string
	var exitCode *int
	j := s.lookup(id)
	if j != nil {
		sn := j.look()
		status, exitCode, mode = sn.status, sn.exitCode, sn.mode
	} else {
		row, err := s.st.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(ErrNotFound, "job %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		status, exitCode, mode = row.Status, row.ExitCode, row.Mode
	}
	done := store.IsTerminal(status)
	size := lsize(filepath.Join(runner.JobDir(s.cfg.StateDir, id), runner.StderrFile))
	if wp.Offset > size {
		return nil, errorf(ErrInvalidOffset, "offset %d is past the end of stderr (%d bytes)", wp.Offset, size)
	}
	res, err := s.windowOf(id, runner.StderrFile, status, exitCode, wp, size, done)
	return s.withInputWait(ctx, res, mode, j), err
}
