package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// job is the server's live view of one job whose end is not yet recorded.
// Waiters block on changed, which is closed and replaced on every change.
type job struct {
	id   string
	dir  string
	mode string
	// endKnown: the job's end is known (setEnd), if perhaps not yet
	// written; read without mu (runningLocked, under the service's).
	endKnown atomic.Bool
	// stdin: StdinPipe for a stdio job with a stdin pipe (pipes.go), ""
	// otherwise; stdinClosed (under mu) once eof was sent.
	stdin       string
	stdinClosed bool
	key         string // the runner's control key
	// pid and cgroup: the job's process (it leads its group and session)
	// and cgroup, as its runner reported them: how a lost job is ended.
	pid    int
	cgroup string
	// pgid, limits (JSON of those applied) and isolation (JSON of what
	// was applied), as the runner reported them: the record of a live
	// job reads them here (its row is written off the event path).
	pgid      int
	limits    string
	isolation string

	mu       sync.Mutex
	status   string
	exitCode *int
	created  time.Time
	// requested is when the run request arrived.
	requested time.Time
	started   time.Time
	ended     time.Time
	// end is the end as set (setEnd): what a read of a job whose end is
	// known but not yet recorded takes from it beside the status.
	end      *store.Exit
	size     int64
	lastGrow time.Time
	changed  chan struct{}
	// let is closed once the job is out of the live set (forget): its end,
	// when it had one, is in its row then.
	let chan struct{}

	// stream (issue 14 §1): stderr.log's size as the runner announced it
	// (stdio jobs), so streams of the stderr channel wake on its growth.
	errSize int64
	// attach (attach.go): the terminal's raw bytes read so far, as the
	// runner announced them once an attach started its raw ring.
	rawSize int64
	// rawChunk is the last raw bytes an out event carried (the runner
	// inlines small growth while a client is attached), from raw offset
	// rawChunkAt: AttachRaw answers from it without asking the runner.
	// Replaced, never written into: a copy handed out stays whole.
	rawChunk   []byte
	rawChunkAt int64

	// input-wait (spec/extended-api.md §4; inputwait.go): the runner's
	// last word on whether the job's foreground process is blocked
	// reading its terminal, and how many inputs it had written then;
	// inputSent is the number of the last input it acknowledged.
	inputWait    bool
	inputWaitSeq int64
	inputSent    int64

	conn    *proto.Conn
	inputMu sync.Mutex // one input's pieces at a time
	nextID  int64
	pending map[int64]chan *proto.Msg
}

func newJob(id, dir, mode string) *job {
	return &job{id: id, dir: dir, mode: mode, status: store.StatusCreated, changed: make(chan struct{}), pending: map[int64]chan *proto.Msg{},
		let: make(chan struct{})}
}

// notifyLocked wakes every waiter; j.mu is held.
func (j *job) notifyLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

func (j *job) done() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return store.IsTerminal(j.status)
}

func (j *job) setEnd(e store.Exit) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if store.IsTerminal(j.status) {
		return
	}
	j.status = e.Status
	j.endKnown.Store(true)
	j.exitCode = e.ExitCode
	j.ended = e.EndedAt
	j.end = &e
	if j.started.IsZero() && e.StartedAt != nil {
		j.started = *e.StartedAt
	}
	// The facts of the start travel with the end too (a job whose process
	// failed to become the job has no running event): its record, read
	// before the end is written, has them as its row will.
	j.pid, j.pgid = cmp.Or(j.pid, e.PID), cmp.Or(j.pgid, e.Pgid)
	j.isolation, j.limits = cmp.Or(j.isolation, e.Isolation), cmp.Or(j.limits, e.LimitsApplied)
	j.notifyLocked()
}

// setRecordedEnd makes the job's end the one its row holds, over the one
// set from the runner's event (finish: the recorded one wins).
func (j *job) setRecordedEnd(e store.Exit) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.status == e.Status && j.ended.Equal(e.EndedAt) && eqCode(j.exitCode, e.ExitCode) {
		return
	}
	j.status = e.Status
	j.endKnown.Store(store.IsTerminal(e.Status))
	j.exitCode = e.ExitCode
	j.ended = e.EndedAt
	j.end = &e
	j.notifyLocked()
}

func eqCode(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func (j *job) closeConn() {
	j.mu.Lock()
	c := j.conn
	j.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// attach follows the runner's events on c until the job's end is recorded
// or the channel breaks.
func (s *Service) attach(j *job, c *proto.Conn) {
	j.mu.Lock()
	j.conn = c
	j.mu.Unlock()
	go s.follow(j, c)
}

func (s *Service) follow(j *job, c *proto.Conn) {
	for {
		m, err := c.Recv()
		if err != nil {
			s.lostChannel(j, c, err)
			return
		}
		switch m.T {
		case proto.TRunning, proto.TState, proto.TOutput:
			s.applyProgress(j, m)
			if m.T == proto.TState && m.Done {
				s.applyExit(j, c, m)
				return
			}
		case proto.TExit:
			s.applyExit(j, c, m)
			return
		case proto.TInputWait:
			s.applyInputWait(j, m)
		case proto.TAck:
			j.deliver(m)
		}
	}
}

// deliver hands an ack to the request waiting for it.
func (j *job) deliver(m *proto.Msg) {
	j.mu.Lock()
	ch := j.pending[m.ID]
	delete(j.pending, m.ID)
	j.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

func (s *Service) applyProgress(j *job, m *proto.Msg) {
	j.mu.Lock()
	var grown int64
	if m.Size > j.size {
		grown = m.Size - j.size
		j.size = m.Size
		j.lastGrow = time.Now()
	}
	if m.ErrSize > j.errSize {
		j.errSize = m.ErrSize
	}
	if m.RawSize > j.rawSize {
		j.rawSize = m.RawSize // attach.go
	}
	if m.T == proto.TOutput && len(m.Data) > 0 && m.RawSize >= int64(len(m.Data)) {
		// Data is the raw bytes ending at RawSize (attach.go's AttachRaw).
		j.rawChunk, j.rawChunkAt = m.Data, m.RawSize-int64(len(m.Data))
	}
	becameRunning := false
	if m.PID != 0 {
		j.pid = m.PID
	}
	if m.Cgroup != "" {
		j.cgroup = m.Cgroup
	}
	if m.Pgid != 0 {
		j.pgid = m.Pgid
	}
	if m.Limits != "" {
		j.limits = m.Limits
	}
	if m.Isolation != "" {
		j.isolation = m.Isolation
	}
	if m.T == proto.TState {
		j.inputWait, j.inputWaitSeq = m.Waiting, m.InputSeq // input-wait
	}
	if m.PID != 0 && (j.status == store.StatusCreated || j.status == store.StatusStarting) && (m.Status == store.StatusRunning || m.T == proto.TRunning) {
		j.status = store.StatusRunning
		j.started = time.Unix(0, m.StartedAt)
		becameRunning = true
	}
	requested, started := j.requested, j.started
	j.notifyLocked()
	j.mu.Unlock()
	s.cfg.Metrics.Output(grown)
	if becameRunning {
		s.startOver()
		s.cfg.Metrics.JobRunning(requested, started)
		s.log.Info("job running", "job", j.id, "pid", m.PID, "cgroup", m.Cgroup != "")
		s.recordRunningLater(j, store.Running{PID: m.PID, StartedAt: time.Unix(0, m.StartedAt),
			Isolation: m.Isolation, Cgroup: m.Cgroup, Pgid: m.Pgid, LimitsApplied: m.Limits})
	}
}

// runningRecordDelay is how long a job's "running" waits before it is
// written. Most jobs an agent runs end well within it, and their end's one
// write (Finish) carries every fact of the start too: pid, start time,
// isolation, process group, limits; so a short job costs two database
// transactions (its row, its end), not three.
//
// "running" need not be a transaction of its own for the spec's crash
// safety: what a restarted server needs of a job that has not ended is
// its row (written before its runner got it: the runner's own exit record
// and reconnection need nothing more), and it finds the job's runner by
// its socket and learns the rest from it. The running facts matter after a
// restart only when the job's runner died too, to end its processes; for
// the jobs still running after this delay they are written, and until then
// the server and the runner would both have to die within the same
// fraction of a second of the job's start. The job's reads (status, list,
// record) answer from the live job, not the row, meanwhile.
const runningRecordDelay = 20 * time.Millisecond

// recordRunningLater writes j's running record after runningRecordDelay,
// unless j has ended by then (its end's record carries the same facts).
// A timer, never a sleep: nothing waits for this write.
func (s *Service) recordRunningLater(j *job, r store.Running) {
	time.AfterFunc(s.runningDelay, func() { s.recordRunning(j, r) })
}

// recordRunning writes j's running record unless j has ended (then its
// end's record, written or about to be, carries the same facts); it
// reports whether it wrote.
func (s *Service) recordRunning(j *job, r store.Running) bool {
	if j.done() {
		return false
	}
	select {
	case <-s.stop:
		return false // the store may be closed; the next server learns it from the runner
	default:
	}
	if err := s.st.MarkRunning(context.Background(), j.id, r); err != nil && !errors.Is(err, store.ErrNotChanged) {
		s.log.Warn("mark running", "job", j.id, "err", err)
	}
	return true
}

// applyExit records the end the runner reported, confirms it to the runner,
// and lets the pending requests go.
func (s *Service) applyExit(j *job, c *proto.Conn, m *proto.Msg) {
	j.mu.Lock()
	var grown int64
	if m.Size > j.size {
		grown = m.Size - j.size
		j.size = m.Size
		j.lastGrow = time.Now()
	}
	j.mu.Unlock()
	s.cfg.Metrics.Output(grown)
	e := store.Exit{Status: m.Status, ExitCode: m.ExitCode, Signal: m.Signal, Reason: m.Reason, EndedAt: time.Unix(0, m.EndedAt),
		PID: m.PID, Isolation: m.Isolation, Pgid: m.Pgid, LimitsApplied: m.Limits, Usage: m.Usage}
	if m.StartedAt != 0 {
		t := time.Unix(0, m.StartedAt)
		e.StartedAt = &t
	}
	// Acks that follow the exit (a terminate's, an input-wait look's)
	// still arrive: they are read out from here on, while the end is
	// recorded, which a full disk can hold up for as long as it is full.
	go func() {
		for {
			m, err := c.Recv()
			if err != nil {
				break
			}
			if m.T == proto.TAck {
				j.deliver(m)
			}
		}
		s.releasePending(j)
		c.Close()
	}()
	// The ack tells the runner its exit is recorded: never sent for an
	// end the server stopped before writing (the runner keeps it and
	// records it itself).
	if s.finish(j, e) {
		_ = c.Send(&proto.Msg{T: proto.TExitAck})
	}
}

// releasePending answers every request still waiting on a runner that is
// gone.
func (s *Service) releasePending(j *job) {
	j.mu.Lock()
	p := j.pending
	j.pending = map[int64]chan *proto.Msg{}
	j.conn = nil
	j.mu.Unlock()
	for id, ch := range p {
		ch <- &proto.Msg{T: proto.TAck, ID: id, Err: "runner gone"}
	}
}

// lostChannel handles a control channel that broke before the exit was
// heard: the runner may have been killed, or it may still be there (then we
// reconnect). A job whose runner is gone without a recorded exit is lost.
func (s *Service) lostChannel(j *job, c *proto.Conn, cause error) {
	c.Close()
	select {
	case <-s.stop:
		return // the server is stopping; the runner goes on without us
	default:
	}
	if nc, err := dialControl(j.dir, runner.SocketFile); err == nil {
		if err := nc.Send(&proto.Msg{T: proto.THello, Key: j.key, Frames: true}); err == nil {
			s.attach(j, nc)
			return
		}
		nc.Close()
	}
	s.releasePending(j)
	ctx := context.Background()
	row, err := s.st.Get(ctx, j.id)
	if err == nil && store.IsTerminal(row.Status) {
		e := store.Exit{Status: row.Status, ExitCode: row.ExitCode, Signal: row.Signal, Reason: row.Reason}
		if row.EndedAt != nil {
			e.EndedAt = *row.EndedAt
		}
		j.setEnd(e)
		s.forget(j)
		s.ended(j, e)
		return
	}
	s.log.Warn("runner lost", "job", j.id, "cause", cause)
	j.mu.Lock()
	pid, cg := j.pid, j.cgroup
	j.mu.Unlock()
	// Its processes go before the job is reported lost: nothing of a lost
	// job keeps running.
	s.endLost(j.id, pid, cg)
	s.finish(j, store.Exit{Status: store.StatusLost, Reason: runner.ReasonRunnerLost, EndedAt: time.Now(), PID: pid})
}

// request sends m to j's runner and waits for its ack.
func (s *Service) request(ctx context.Context, j *job, m *proto.Msg) (*proto.Msg, error) {
	return s.call(ctx, j, m, false)
}

// requestUntilEnd is request, given up once the job has ended (its
// answer then no longer matters, and a runner past its exit need not
// give one): ErrNotRunning.
func (s *Service) requestUntilEnd(ctx context.Context, j *job, m *proto.Msg) (*proto.Msg, error) {
	return s.call(ctx, j, m, true)
}

// call sends m to j's runner and waits for its ack, the context's end, or
// (untilEnd) the job's end.
func (s *Service) call(ctx context.Context, j *job, m *proto.Msg, untilEnd bool) (*proto.Msg, error) {
	j.mu.Lock()
	c := j.conn
	if c == nil {
		j.mu.Unlock()
		return nil, fmt.Errorf("job %s: %w", j.id, ErrNotRunning)
	}
	j.nextID++
	m.ID = j.nextID
	ch := make(chan *proto.Msg, 1)
	j.pending[m.ID] = ch
	j.mu.Unlock()
	forget := func() {
		j.mu.Lock()
		delete(j.pending, m.ID)
		j.mu.Unlock()
	}
	if err := c.Send(m); err != nil {
		forget()
		return nil, fmt.Errorf("job %s: %w", j.id, err)
	}
	for {
		var changed <-chan struct{} // nil: the job's changes are not waited on
		if untilEnd {
			j.mu.Lock()
			ended := store.IsTerminal(j.status)
			changed = j.changed
			j.mu.Unlock()
			if ended {
				// An answer that came before the end is still the
				// answer: acks and the exit come in order on one
				// channel, and a runner acks what it did before it
				// publishes the exit (a stdin pipe's eof that ended
				// the job did take its bytes).
				select {
				case a := <-ch:
					return a, nil
				default:
				}
				forget()
				return nil, fmt.Errorf("job %s: %w", j.id, ErrNotRunning)
			}
		}
		select {
		case a := <-ch:
			return a, nil
		case <-ctx.Done():
			forget()
			return nil, ctx.Err()
		case <-changed:
		}
	}
}
