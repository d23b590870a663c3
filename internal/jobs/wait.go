package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/shellctl/shellctl/internal/outputlog"
	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// WaitParams bound one wait. The api package fills every default.
type WaitParams struct {
	Offset  int64
	Timeout time.Duration // 0: look once
	Limit   int
	Idle    time.Duration
	// ReturnOnInputWait: answer as soon as the job waits for input
	// (input-wait, pty jobs), not only after Idle of silence.
	ReturnOnInputWait bool
	// WriteTimeout (input to a stdin pipe, pipes.go), when set: how long
	// the write waits for a job that does not read, apart from Timeout,
	// which then bounds the wait for output alone. Unset: the write has
	// Timeout, and the wait what is left of it.
	WriteTimeout *time.Duration
}

// Result is a JobResult.
type Result struct {
	JobID      string
	Done       bool
	Status     string
	ExitCode   *int
	OutputPath string
	Output     string
	Offset     int64
	Truncated  bool
	// InputWait is input-wait at answer time, for pty jobs (nil: stdio,
	// and the answer carries no X-Shellctl-Input-Wait).
	InputWait *bool

	// view holds the buffer Output was read into, when Output shares it.
	view outputlog.View
}

// Release lets the buffer of Output be reused: the caller is done with the
// result (its answer is written), and Output is empty from then on. A
// result never released only leaves its buffer to the collector.
func (r *Result) Release() {
	r.Output = ""
	r.view.Release()
}

// StatusView is a JobStatusView.
type StatusView struct {
	JobID     string
	Status    string
	Done      bool
	ExitCode  *int
	CreatedAt time.Time
	StartedAt *time.Time
	EndedAt   *time.Time
	Offset    int64
	// InputWait: the job's foreground process is blocked reading its
	// terminal, as its runner last said (pty jobs; input-wait). The job's
	// change notification fires when it changes.
	InputWait bool
}

// view is the job's status as its events tell it.
func (j *job) view() *StatusView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := &StatusView{JobID: j.id, Status: j.status, Done: store.IsTerminal(j.status), ExitCode: j.exitCode, CreatedAt: j.created,
		InputWait: j.waitingLocked()}
	if !j.started.IsZero() {
		t := j.started.UTC()
		v.StartedAt = &t
	}
	if !j.ended.IsZero() {
		t := j.ended.UTC()
		v.EndedAt = &t
	}
	return v
}

// snapshot is one consistent look at a job.
type snapshot struct {
	status   string
	exitCode *int
	size     int64
	lastGrow time.Time
	changed  chan struct{}
	mode     string
	// inputWait: the job waits for input (input-wait)
	inputWait bool
}

func (j *job) look() snapshot {
	j.mu.Lock()
	defer j.mu.Unlock()
	return snapshot{status: j.status, exitCode: j.exitCode, size: j.size, lastGrow: j.lastGrow, changed: j.changed, mode: j.mode,
		inputWait: j.waitingLocked()}
}

func (s *Service) outputPath(id string) string {
	return filepath.Join(runner.JobDir(s.cfg.StateDir, id), runner.OutputFile)
}

// openOutput opens the job's output.log for reading through the state
// dir's handle: a link there is refused, never followed.
func (s *Service) openOutput(id string) (*os.File, error) {
	return s.sd.Open(jobRel(id)+"/"+runner.OutputFile, os.O_RDONLY, 0)
}

// jobRel is the job's directory relative to the state dir.
func jobRel(id string) string { return "jobs/" + id }

// fileSize is the size of the job's output.log (0 when it is gone, and
// a link's own size were one there: it is never followed).
func (s *Service) fileSize(id string) int64 {
	fi, err := os.Lstat(s.outputPath(id))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Wait answers per the wait rules of the API.
func (s *Service) Wait(ctx context.Context, id string, wp WaitParams) (*Result, error) {
	if j := s.lookup(id); j != nil {
		return s.wait(ctx, j, wp)
	}
	return s.finished(ctx, id, wp)
}

// finished answers a wait on a job whose end is recorded.
func (s *Service) finished(ctx context.Context, id string, wp WaitParams) (*Result, error) {
	row, err := s.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// It may have ended between lookup and now: recorded before it left
		// the live set, so the row exists unless it was deleted.
		return nil, errorf(ErrNotFound, "job %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if !store.IsTerminal(row.Status) {
		// Only possible in the instant between the row's end and the job
		// leaving the live set; look again.
		if j := s.lookup(id); j != nil {
			return s.wait(ctx, j, wp)
		}
	}
	size := s.fileSize(id)
	if wp.Offset > size {
		return nil, errorf(ErrInvalidOffset, "offset %d is past the end of the output (%d bytes)", wp.Offset, size)
	}
	res, err := s.window(id, row.Status, row.ExitCode, wp, size, true)
	return s.withInputWait(ctx, res, row.Mode, nil), err
}

func (s *Service) window(id, status string, exitCode *int, wp WaitParams, size int64, final bool) (*Result, error) {
	return s.windowOf(id, runner.OutputFile, status, exitCode, wp, size, final)
}

// windowOf is window over the job's file name (output.log, stderr.log).
func (s *Service) windowOf(id, name, status string, exitCode *int, wp WaitParams, size int64, final bool) (*Result, error) {
	r := &Result{JobID: id, Done: store.IsTerminal(status), Status: status, ExitCode: exitCode,
		OutputPath: filepath.Join(runner.JobDir(s.cfg.StateDir, id), name), Offset: wp.Offset}
	if wp.Offset >= size {
		return r, nil
	}
	f, err := s.sd.Open(jobRel(id)+"/"+name, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open output of job %s: %w", id, err)
	}
	defer f.Close()
	// The text stays in the buffer it was read into until the answer is
	// written (Release): a window is up to 512 KiB.
	v, err := outputlog.ReadWindow(f, wp.Offset, size, wp.Limit, final)
	if err != nil {
		return nil, fmt.Errorf("read output of job %s: %w", id, err)
	}
	r.view = v
	r.Output, r.Offset, r.Truncated = v.String(), v.Next, v.Truncated
	return r, nil
}

// wait blocks on j's events until a wait rule holds.
func (s *Service) wait(ctx context.Context, j *job, wp WaitParams) (*Result, error) {
	deadline := time.Now().Add(wp.Timeout)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	first := true
	if wp.ReturnOnInputWait && j.mode == "pty" {
		// A look at the start: the job may have blocked after the
		// runner's last check (it publishes what it sees).
		s.inputWaitNow(ctx, j)
	}
	for {
		sn := j.look()
		done := store.IsTerminal(sn.status)
		size := sn.size
		if done {
			// Everything is on disk once the end is recorded.
			size = s.fileSize(j.id)
		}
		if first && wp.Offset > size {
			// The runner's events may lag the file by a write.
			if fs := s.fileSize(j.id); wp.Offset > fs {
				return nil, errorf(ErrInvalidOffset, "offset %d is past the end of the output (%d bytes)", wp.Offset, fs)
			}
		}
		first = false
		avail := size - wp.Offset
		now := time.Now()
		switch {
		case done,
			avail > int64(wp.Limit),
			avail > 0 && now.Sub(sn.lastGrow) >= wp.Idle,
			wp.ReturnOnInputWait && sn.inputWait,
			!now.Before(deadline):
			res, err := s.window(j.id, sn.status, sn.exitCode, wp, size, done)
			return s.withInputWait(ctx, res, j.mode, j), err
		}
		wake := deadline
		if avail > 0 {
			if t := sn.lastGrow.Add(wp.Idle); t.Before(wake) {
				wake = t
			}
		}
		d := time.Until(wake)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-sn.changed:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Input writes text to a job's input (Send: a pty job's terminal, or a
// stdio job's stdin pipe), closing a pipe after it when eof, then waits.
// For a pipe the write may take up to wp.Timeout (a job that does not
// read: a *BackpressureError); the wait has what is left of it. sent,
// when not nil, is called once, when the text is no longer needed (sent,
// or refused): before the wait, which may be long.
func (s *Service) Input(ctx context.Context, id string, text []byte, eof bool, wp WaitParams, sent func()) (*Result, error) {
	return s.input(ctx, id, text, eof, wp, inputHooks{sent: sent})
}

// inputHooks: sent as for Input; mark, when set, is called just before the
// text is sent (its error is the answer), and unmark when none of it was.
type inputHooks struct {
	sent   func()
	mark   func() error
	unmark func()
}

func (s *Service) input(ctx context.Context, id string, text []byte, eof bool, wp WaitParams, h inputHooks) (*Result, error) {
	sent := h.sent
	finish := func() {
		if sent != nil {
			sent()
			sent = nil
		}
	}
	defer finish() // on the paths that return before sending
	// A finished job is not running whatever its mode: the terminal
	// state is checked first, as the original does.
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := j.takesInput(); err != nil {
		return nil, err
	}
	if sn := j.look(); wp.Offset > sn.size {
		if fs := s.fileSize(id); wp.Offset > fs {
			return nil, errorf(ErrInvalidOffset, "offset %d is past the end of the output (%d bytes)", wp.Offset, fs)
		}
	}
	if h.mark != nil {
		if err := h.mark(); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	write := wp.Timeout
	if wp.WriteTimeout != nil {
		write = *wp.WriteTimeout
	}
	if taken, err := s.sendInput(ctx, j, text, eof, write); err != nil {
		// An input of which some bytes were taken cannot be sent again
		// whole: its key stays, and a repeat is answered as sent.
		if h.unmark != nil && taken == 0 {
			h.unmark()
		}
		return nil, err
	}
	finish()
	if j.stdin == StdinPipe && wp.WriteTimeout == nil {
		wp.Timeout = max(wp.Timeout-time.Since(began), 0)
	}
	return s.wait(ctx, j, wp)
}

// sendInput sends text to j's input: its stdin pipe (sendPipe, waiting
// at most wait for a job that does not read), or its terminal. Large
// input goes in pieces that each fit a control message; one input's
// pieces are never interleaved with another's. It answers the bytes
// taken.
func (s *Service) sendInput(ctx context.Context, j *job, text []byte, eof bool, wait time.Duration) (int64, error) {
	j.inputMu.Lock()
	defer j.inputMu.Unlock()
	if j.stdin == StdinPipe {
		return s.sendPipe(ctx, j, text, eof, wait)
	}
	var taken int64
	for first := true; first || len(text) > 0; first = false {
		piece := text[:min(len(text), inputPiece)]
		text = text[len(piece):]
		a, err := s.request(ctx, j, &proto.Msg{T: proto.TInput, Data: piece, EOF: eof && len(text) == 0})
		if err == nil && a.Err == "" {
			j.inputAcked(a.InputSeq) // input-wait
		}
		if err != nil || a.Err != "" {
			if j.done() || errors.Is(err, ErrNotRunning) || (a != nil && a.Err == "job_not_running") {
				return taken, errorf(ErrNotRunning, "job %s is no longer running", j.id)
			}
			if err == nil {
				err = errors.New(a.Err)
			}
			return taken, fmt.Errorf("send input to job %s: %w", j.id, err)
		}
		taken += int64(len(piece))
	}
	return taken, nil
}

// inputPiece is the most input one control message carries: base64 makes
// it 5.4 MiB, within the protocol's 16 MiB line.
const inputPiece = 4 << 20

// Tail returns the last limit bytes of the output.
func (s *Service) Tail(ctx context.Context, id string, limit int) (*Result, error) {
	j := s.lookup(id)
	var status, mode string
	var exitCode *int
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
	size := s.fileSize(id)
	r := &Result{JobID: id, Done: store.IsTerminal(status), Status: status, ExitCode: exitCode, OutputPath: s.outputPath(id), Offset: size}
	s.withInputWait(ctx, r, mode, j)
	if size == 0 {
		return r, nil
	}
	f, err := s.openOutput(id)
	if err != nil {
		return nil, fmt.Errorf("open output of job %s: %w", id, err)
	}
	defer f.Close()
	v, err := outputlog.ReadTail(f, size, limit)
	if err != nil {
		return nil, fmt.Errorf("read output of job %s: %w", id, err)
	}
	r.view = v // shared until Release, as a window's
	r.Output = v.String()
	return r, nil
}

// Status returns a job's status view.
func (s *Service) Status(ctx context.Context, id string) (*StatusView, error) {
	if j := s.lookup(id); j != nil {
		// A live job's own events are ahead of its row (the running
		// record is written off the event path): answer as waits do.
		v := j.view()
		v.Offset = s.fileSize(id)
		return v, nil
	}
	row, err := s.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(ErrNotFound, "job %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	return &StatusView{JobID: id, Status: row.Status, Done: store.IsTerminal(row.Status), ExitCode: row.ExitCode,
		CreatedAt: row.CreatedAt, StartedAt: row.StartedAt, EndedAt: row.EndedAt, Offset: s.fileSize(id)}, nil
}

// List returns jobs newest first. Rows of live jobs show what their events
// said last, as Status does; asked for one status, it also finds the live
// jobs whose events say so before their rows do (running is written a
// moment after it is heard, an end just after it is answered).
func (s *Service) List(ctx context.Context, status string, limit int) ([]*store.Job, error) {
	return s.list(ctx, s.st, status, limit)
}

// listStore is what List reads: the store (an interface so that a test
// counts the reads).
type listStore interface {
	List(ctx context.Context, status string, limit int) ([]*store.Job, error)
	GetMany(ctx context.Context, ids []string) ([]*store.Job, error)
}

// list is List reading st: one query for the rows of the status, and one
// more, only when some live job is ahead of its row, for all such rows at
// once (a query per job made the request's cost grow with the number of
// jobs ahead: BenchmarkListStatusAhead, 20 of 50 live jobs ahead, read 21
// times and allocated 2 124 times; now 2 and 810).
func (s *Service) list(ctx context.Context, st listStore, status string, limit int) ([]*store.Job, error) {
	// The live jobs whose events say status are taken before the rows are
	// read: a job whose end was answered before this request, and whose row
	// is written (and the job let go of) while the rows are read, is then
	// either among the rows or here. Taken after the read, it could be in
	// neither (TestFaultFiftyParallelRuns listed 47 of 50).
	type aheadJob struct {
		id string
		v  *StatusView
	}
	var live []aheadJob
	if status != "" {
		for _, j := range s.liveJobs() {
			if v := j.view(); v.Status == status {
				live = append(live, aheadJob{j.id, v})
			}
		}
	}
	rows, err := st.List(ctx, status, limit)
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	seen := map[string]bool{}
	for _, r := range rows {
		if j := s.lookup(r.ID); j != nil {
			v := j.view()
			r.Status, r.StartedAt = v.Status, v.StartedAt
		}
		if status == "" || r.Status == status {
			out = append(out, r)
			seen[r.ID] = true
		}
	}
	if status == "" {
		return out, nil
	}
	var ahead map[string]*StatusView
	var ids []string
	for _, j := range live {
		if seen[j.id] {
			continue
		}
		if ahead == nil {
			ahead = map[string]*StatusView{}
		}
		ahead[j.id] = j.v
		ids = append(ids, j.id)
	}
	if len(ids) == 0 {
		return out, nil
	}
	more, err := st.GetMany(ctx, ids) // without those deleted meanwhile
	if err != nil {
		return nil, err
	}
	if len(more) == 0 {
		return out, nil
	}
	for _, r := range more {
		if store.IsTerminal(r.Status) && r.Status != status {
			continue // its end was written since its events were looked at
		}
		v := ahead[r.ID]
		r.Status, r.StartedAt = v.Status, v.StartedAt
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *store.Job) int { return cmp.Compare(b.Seq, a.Seq) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// liveJobs returns the live jobs.
func (s *Service) liveJobs() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*job, 0, len(s.live))
	for _, j := range s.live {
		out = append(out, j)
	}
	return out
}

// Terminate ends a job's whole process tree and answers its view once
// nothing of it is left. A finished job answers unchanged.
func (s *Service) Terminate(ctx context.Context, id string, grace time.Duration) (*StatusView, error) {
	return s.terminate(ctx, id, grace, "")
}

// terminate is Terminate; reason is runner.ReasonDelete for a forced
// delete ("" for a terminate request).
func (s *Service) terminate(ctx context.Context, id string, grace time.Duration, reason string) (*StatusView, error) {
	// A job whose end is known (if perhaps not yet recorded: a full disk)
	// has nothing left for its runner to end.
	if j := s.lookup(id); j != nil && !j.done() {
		a, err := s.request(ctx, j, &proto.Msg{T: proto.TTerminate, Grace: grace.Seconds(), Reason: reason})
		if err != nil && !errors.Is(err, ErrNotRunning) {
			return nil, fmt.Errorf("terminate job %s: %w", id, err)
		}
		if a != nil && a.Err != "" && !j.done() {
			return nil, fmt.Errorf("terminate job %s: %s", id, a.Err)
		}
		// The exit precedes the ack on the channel, so it is recorded; wait
		// for the live view to say so in case the channel broke instead.
		for !j.done() {
			ch := j.look().changed
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	// A lost job may have left processes its runner can no longer end:
	// they are killed before the answer, which comes once none is left.
	if err := s.endLostRow(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("terminate lost job %s: %w", id, err)
	}
	return s.Status(ctx, id)
}

// Delete removes a finished job, or with force terminates it first.
func (s *Service) Delete(ctx context.Context, id string, force bool, grace time.Duration) error {
	j := s.lookup(id)
	if j != nil && !j.done() {
		if !force {
			return errorf(ErrJobRunning, "job %s is still running: terminate it first or delete with force=true", id)
		}
		if _, err := s.terminate(ctx, id, grace, runner.ReasonDelete); err != nil {
			return err
		}
	} else if force && j == nil {
		if err := s.endLostRow(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("delete lost job %s: %w", id, err)
		}
	}
	if j != nil {
		// Its end is answered before its row is written: the row goes once
		// the end is in it and the job is no longer live, or a status right
		// after the delete would still find it, and the end's write would
		// find no row.
		select {
		case <-j.let:
		case <-ctx.Done():
			return fmt.Errorf("delete job %s: its end is not recorded yet: %w", id, ctx.Err())
		}
	}
	if err := s.st.Delete(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(ErrNotFound, "job %s not found", id)
		}
		return err
	}
	if err := os.RemoveAll(runner.JobDir(s.cfg.StateDir, id)); err != nil {
		return fmt.Errorf("remove dir of job %s: %w", id, err)
	}
	s.log.Info("job deleted", "job", id)
	return nil
}
