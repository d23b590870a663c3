package jobs

// Input to a job, whatever its mode (spec/extended-api.md §8): a pty job's
// terminal, or the stdin pipe of a stdio job run with "stdin":"pipe". The
// runner holds the pipe and writes to it (runner/stdin.go); the server
// only asks, with a deadline, and hears how many bytes were taken, so a
// job that does not read never blocks the server.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// StdinPipe is RunRequest.Stdin for a stdin pipe.
const StdinPipe = runner.StdinPipe

// Record values of a job's stdin.
const (
	StdinNull   = "null"   // a stdio job's /dev/null
	StdinOpen   = "pipe"   // a pipe that takes input
	StdinClosed = "closed" // a pipe closed by eof, by the job, or by its end
	StdinPTY    = "pty"    // the terminal
)

// maxSendWait bounds a Send whose context has no deadline: the runner
// gives up on a job that does not read after as long (runner/stdin.go).
const maxSendWait = 600 * time.Second

// BackpressureError: the job did not read all of an input before the
// deadline. Taken bytes of it were written to the pipe (they are the
// input's first Taken bytes); the rest were not, and eof was not applied.
type BackpressureError struct {
	JobID string
	Taken int64
	Total int64
	Wait  time.Duration
}

func (e *BackpressureError) Error() string {
	return fmt.Sprintf("job %s did not read its stdin within %s: %d of the input's %d bytes were taken, the rest were not sent (and eof, if asked, not applied); send the rest once the job reads (its output shows), or with a longer timeout",
		e.JobID, e.Wait.Round(time.Millisecond), e.Taken, e.Total)
}

func (e *BackpressureError) Unwrap() error { return ErrInputBackpressure }

// Send writes data to job id's input and, when eof is set and all of data
// was taken, closes it: for a stdio job run with a stdin pipe the pipe is
// closed (the job reads end of file); for a pty job eof is the terminal's
// EOF character (^D). It waits for a job that does not read until ctx's
// deadline (at most maxSendWait), then answers a *BackpressureError
// (errors.Is ErrInputBackpressure) carrying the bytes taken.
//
// taken is the number of bytes of data written (all of it for a pty job
// once queued). Errors: ErrNotFound, ErrNotRunning (the job ended),
// ErrInputUnsupported (a stdio job without a pipe), ErrStdinClosed (eof
// was sent before, or the job closed its stdin), ErrInputBackpressure.
//
// This is the one way input reaches a job: /input (Input) and the
// WebSocket attach both come through it.
func (s *Service) Send(ctx context.Context, id string, data []byte, eof bool) (taken int64, err error) {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return 0, err
	}
	if err := j.takesInput(); err != nil {
		return 0, err
	}
	wait := maxSendWait
	if d, ok := ctx.Deadline(); ok {
		wait = min(max(time.Until(d), 0), maxSendWait)
	}
	return s.sendInput(ctx, j, data, eof, wait)
}

// takesInput says whether j takes input at all: a stdio job without a
// stdin pipe does not (the original's answer, message unchanged).
func (j *job) takesInput() error {
	if j.mode == "stdio" && j.stdin != StdinPipe {
		return errorf(ErrInputUnsupported, "job %s runs in stdio mode, which takes no input", j.id)
	}
	return nil
}

// stdinState is the record's stdin of a job as run (row) and, when
// live, as it is now.
func stdinState(row *store.Job, j *job, done bool) string {
	switch {
	case row.Mode == "pty":
		return StdinPTY
	case row.Stdin != StdinPipe:
		return StdinNull
	case done:
		return StdinClosed
	}
	if j != nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.stdinClosed {
			return StdinClosed
		}
	}
	return StdinOpen
}

// sendPipe sends data to j's stdin pipe in pieces that each fit a
// control message, each allowed what is left of wait; eof goes with the
// last. One input's pieces are never interleaved with another's (the
// caller holds j.inputMu).
func (s *Service) sendPipe(ctx context.Context, j *job, data []byte, eof bool, wait time.Duration) (int64, error) {
	j.mu.Lock()
	closed := j.stdinClosed
	j.mu.Unlock()
	if closed {
		return 0, errorf(ErrStdinClosed, "job %s: its stdin is closed (eof was sent): it takes no more input", j.id)
	}
	deadline := time.Now().Add(wait)
	total := int64(len(data))
	var taken int64
	for first := true; first || len(data) > 0; first = false {
		piece := data[:min(len(data), inputPiece)]
		data = data[len(piece):]
		left := time.Until(deadline)
		ms := int(left / time.Millisecond)
		if left > 0 && ms == 0 {
			ms = 1
		}
		a, err := s.requestUntilEnd(ctx, j, &proto.Msg{T: proto.TInput, Data: piece, EOF: eof && len(data) == 0, TimeoutMS: ms})
		if err != nil {
			if j.done() || errors.Is(err, ErrNotRunning) {
				return taken, errorf(ErrNotRunning, "job %s is no longer running", j.id)
			}
			return taken, fmt.Errorf("send input to job %s: %w", j.id, err)
		}
		taken += a.Taken
		switch a.Err {
		case "":
		case runner.InputBackpressure:
			return taken, &BackpressureError{JobID: j.id, Taken: taken, Total: total, Wait: wait}
		case runner.InputStdinClosed:
			j.mu.Lock()
			j.stdinClosed = true
			j.mu.Unlock()
			return taken, errorf(ErrStdinClosed, "job %s closed its stdin (%d of the input's %d bytes were taken): it takes no more input", j.id, taken, total)
		case runner.InputNotRunning:
			return taken, errorf(ErrNotRunning, "job %s is no longer running", j.id)
		default:
			return taken, fmt.Errorf("send input to job %s: %s", j.id, a.Err)
		}
	}
	if eof {
		j.mu.Lock()
		j.stdinClosed = true
		j.mu.Unlock()
	}
	return taken, nil
}
