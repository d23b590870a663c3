package jobs

// Input-wait (spec/extended-api.md §4), the server's side: the state the
// runner publishes (TInputWait), the early answer of a wait that asked for
// it (WaitParams.ReturnOnInputWait), and the look at answer time that the
// header X-Shellctl-Input-Wait shows (Result.InputWait).

import (
	"context"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// applyInputWait takes the runner's input-wait state. Its size is what was
// on disk when it was seen (the prompt included): a waiter woken by it
// answers with that output.
func (s *Service) applyInputWait(j *job, m *proto.Msg) {
	j.mu.Lock()
	var grown int64
	if m.Size > j.size {
		grown = m.Size - j.size
		j.size = m.Size
		j.lastGrow = time.Now()
	}
	j.inputWait, j.inputWaitSeq = m.Waiting, m.InputSeq
	j.notifyLocked()
	j.mu.Unlock()
	s.cfg.Metrics.Output(grown)
}

// waitingLocked: the job waits for input as far as this server knows —
// the runner says so in a state that accounts for every input the server
// sent (a reader still blocked where it was when an input went in has not
// read it yet: the runner does not count it, and an older state does not
// count here). j.mu is held.
func (j *job) waitingLocked() bool {
	return j.mode == "pty" && !store.IsTerminal(j.status) && j.inputWait && j.inputWaitSeq >= j.inputSent
}

// inputAcked records the number the runner gave an input.
func (j *job) inputAcked(seq int64) {
	j.mu.Lock()
	if seq > j.inputSent {
		j.inputSent = seq
		j.notifyLocked()
	}
	j.mu.Unlock()
}

// inputWaitNow asks j's runner to look now: exact at the answer, where
// the published state could be a series step old. A runner that cannot
// answer (gone, or one from before input-wait) leaves what was published.
func (s *Service) inputWaitNow(ctx context.Context, j *job) bool {
	if j.mode != "pty" || j.done() {
		return false
	}
	// Given up at the job's end: a runner past its exit may not answer,
	// and a server still recording that end (a full disk) must not keep
	// the request waiting on it.
	a, err := s.requestUntilEnd(ctx, j, &proto.Msg{T: proto.TInputWaitQuery})
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil || a.Err != "" {
		return j.waitingLocked()
	}
	return a.Waiting && a.InputSeq >= j.inputSent && !store.IsTerminal(j.status)
}

// withInputWait sets r's input-wait for the header: pty jobs only, false
// once the job is done, else looked at now.
func (s *Service) withInputWait(ctx context.Context, r *Result, mode string, j *job) *Result {
	if r == nil || mode != "pty" {
		return r
	}
	w := false
	if j != nil && !r.Done {
		w = s.inputWaitNow(ctx, j)
	}
	r.InputWait = &w
	return r
}
