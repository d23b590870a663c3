package runner

// Input-wait (spec/extended-api.md §4): whether the program in the
// foreground of a pty job's terminal is blocked reading it, told by the
// kernel (inputwait_proc.go), not guessed from silence.
//
// When it is looked at. There is no polling: a check runs on the runner's
// own events — the job's start, output (the coalesced size events), each
// input written, a resize, a signal, a child reaped — and then on a short
// series that decays (1, 2, 4 … 1024 ms after the last check) and stops,
// because a program usually blocks microseconds after it printed its
// prompt, or a little later after it started. While output keeps coming
// the checks back off (at most one per 16 ms), until a check finds the job
// waiting (iwSchedule: at most once per input). A job quiet for longer costs
// nothing; a server that answers for a running job asks for a check then
// (TInputWaitQuery), so what it answers is exact at that moment.
//
// What counts. A task of the terminal's foreground group asleep in a read
// of the terminal, and:
//   - it is a new sleep since the last input was written: a reader that
//     was already blocked when the input went in has not answered it yet
//     (each task's sleep is told from the next by its schedstat, which
//     changes whenever the task runs);
//   - no input is queued in the runner or pending in the terminal (a poll
//     of the terminal's slave side, opened for that look only and closed at
//     once, never kept: a held slave would keep the terminal from its end);
//   - no output of the job is still in the terminal on its way to
//     output.log; and the line the sanitizer holds (the prompt) is written
//     before the state is published, so an answer that comes because the
//     job waits carries its prompt.

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// inputWaitSeries are the delays of the checks that follow an event.
var inputWaitSeries = []time.Duration{
	1 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
	16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 128 * time.Millisecond,
	256 * time.Millisecond, 512 * time.Millisecond, 1024 * time.Millisecond,
}

// inputWaitMaxGap bounds how far checks back off while events keep coming.
const inputWaitMaxGap = 16 * time.Millisecond

// inputWait is the runner's input-wait state. Its zero value is ready:
// counting inputs works before the terminal is known (watchInputWait).
type inputWait struct {
	on     atomic.Bool // watchInputWait ran: the fields it sets are final
	r      *Runner
	proc   procFS
	master *os.File
	tty    ttyID
	kick   chan struct{}
	// pending: an event came that the loop has not counted yet. covered:
	// the loop's timer is armed no later than any event would ask for
	// (lastCheck + gap), so an event only needs to be counted when it
	// fires, not to wake the loop: a job printing without pause reads its
	// terminal thousands of times a second, and each kick was a wake-up.
	pending atomic.Bool
	covered atomic.Bool

	// queued counts inputs accepted for the terminal, written those
	// whose write has begun: both number inputs in order.
	queued  atomic.Int64
	written atomic.Int64

	mu    sync.Mutex  // one check at a time; guards the rest
	flush func() bool // writes the sanitizer's held line (sanitize.FlushSetter)
	stale map[int]string
	// reused by every check, so a check allocates (almost) nothing
	buf      []byte
	procsBuf []byte
	pidBuf   []int
	// procsFD is the job's cgroup.procs, kept open from the first look
	// (read again from offset 0, it lists the processes anew): a look on
	// every input's way pays no path walk for it. procsPath "": not open
	// (yet, or any more once procsDone).
	procsFD   int
	procsPath string
	procsDone bool
	// the ends of the foreground group's processes, as events (watchExit)
	exitEp  *os.File
	exitFDs map[int]int // pid → pidfd
	exitOff bool
	// published is the state as last published: written<<1 | waiting.
	// Set under mu, read without it (a state message is made under r.mu,
	// which a check, broadcasting under mu, takes after it).
	published atomic.Int64
	// untimed: the last look found a reader waiting with no timeout
	// (under mu); idle is what was last published of it. changed is
	// closed and replaced at each change of either state (waitingSince).
	untimed bool
	idle    atomic.Bool
	chMu    sync.Mutex
	changed chan struct{}
}

// waitingSince reports whether the job waits for input with every input
// up to seq written (the published state), and a channel closed at the
// next change of that state.
//
// With untimed, it must also wait with no timeout: a program waiting
// with one (vim telling an Escape key from an escape sequence, for some
// tens of ms, before it redraws) has not settled yet.
func (iw *inputWait) waitingSince(seq int64, untimed bool) (bool, <-chan struct{}) {
	iw.chMu.Lock()
	if iw.changed == nil {
		iw.changed = make(chan struct{})
	}
	ch := iw.changed
	iw.chMu.Unlock()
	p := iw.published.Load()
	return p&1 == 1 && p>>1 >= seq && (!untimed || iw.idle.Load()), ch
}

// watchInputWait starts following the terminal of a pty job, once it is
// launched: slave is still open (the runner closes it next), and its
// identity is what a reader's descriptor is compared with.
func (r *Runner) watchInputWait(master, slave *os.File) {
	var st unix.Stat_t
	if err := unix.Fstat(int(slave.Fd()), &st); err != nil {
		r.log.Warn("input-wait: the job's terminal cannot be identified: input-wait stays false", "err", err)
		return
	}
	iw := &r.iw
	iw.r, iw.proc, iw.master = r, newProcFS(), master
	iw.tty = ttyID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
	iw.kick = make(chan struct{}, 1)
	iw.on.Store(true)
	go iw.loop()
	iw.event() // the job's start
}

// SetFlush takes the sanitizer's on-demand flush (sanitize.FlushSetter).
func (w *outWriter) SetFlush(flush func() bool) {
	w.r.iw.mu.Lock()
	w.r.iw.flush = flush
	w.r.iw.mu.Unlock()
}

// ObserveRead takes each read of the terminal (sanitize.ReadObserver): the
// job printed, perhaps a prompt that the sanitizer holds, which no size
// event announces; and the raw bytes go to the job's screen (screen.go).
func (w *outWriter) ObserveRead(p []byte) {
	if w.screen != nil {
		w.screen.put(p)
	}
	w.r.iw.event()
}

// event asks for a check soon (non-blocking; coalesced).
func (iw *inputWait) event() {
	if !iw.on.Load() {
		return
	}
	// Noted first, then looked at: a loop that stops covering after this
	// load still finds pending set when it takes it (loop).
	iw.pending.Store(true)
	if iw.covered.Load() {
		return
	}
	select {
	case iw.kick <- struct{}{}:
	default:
	}
}

// queue puts input b on ch for the terminal and numbers it; 0, false when
// the queue is full.
func (iw *inputWait) queue(ch chan termInput, b termInput) (int64, bool) {
	// Counted before it can be written: written never passes queued.
	n := iw.queued.Add(1)
	select {
	case ch <- b:
		return n, true
	default:
		iw.queued.Add(-1)
		return 0, false
	}
}

// queueWait is queue, waiting for room until done is closed (false then).
func (iw *inputWait) queueWait(ch chan termInput, b termInput, done <-chan struct{}) (int64, bool) {
	n := iw.queued.Add(1)
	select {
	case ch <- b:
		return n, true
	case <-done:
		iw.queued.Add(-1)
		return 0, false
	}
}

// beforeWrite is called just before an input is written to the terminal:
// every reader blocked now has not read it yet, and must block anew before
// the job counts as waiting again.
func (iw *inputWait) beforeWrite() {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.on.Load() {
		iw.stale = iw.sleepsLocked()
	}
	iw.written.Add(1)
	if iw.on.Load() {
		iw.publishLocked(false)
	}
}

// check looks now and publishes a change; it returns the state and the
// inputs written when it was seen.
func (iw *inputWait) check() (bool, int64) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	w := iw.lookLocked()
	iw.publishLocked(w)
	return w, iw.published.Load() >> 1
}

// query is a check for the server; it answers with the state and the
// inputs written when it was seen.
func (iw *inputWait) query() (bool, int64) {
	if !iw.on.Load() {
		return false, iw.written.Load()
	}
	iw.mu.Lock()
	defer iw.mu.Unlock()
	w := iw.lookLocked()
	iw.publishLocked(w)
	return w, iw.published.Load() >> 1
}

// fill sets the input-wait fields of a state message.
func (iw *inputWait) fill(m *proto.Msg) {
	p := iw.published.Load()
	m.Waiting, m.InputSeq = p&1 == 1, p>>1
}

// readersLocked lists the tasks asleep reading the terminal, in its
// foreground group.
func (iw *inputWait) readersLocked() map[int]string {
	fg := iw.jobForegroundLocked()
	if fg == 0 {
		return nil
	}
	return iw.proc.blockedReaders(iw.pids(), fg, iw.tty, iw.buf, iw.watchExit)
}

// sleepsLocked is the schedstat of each task of the terminal's foreground
// group (procFS.sleeps), the keys its blocked readers have now.
func (iw *inputWait) sleepsLocked() map[int]string {
	fg := iw.jobForegroundLocked()
	if fg == 0 {
		return nil
	}
	return iw.proc.sleeps(iw.pids(), fg, iw.buf)
}

// jobForegroundLocked is the terminal's foreground group when it is the
// job's (0 when the job left the terminal, or gave it back to us), with
// the buffer of the looks at /proc made; mu is held.
func (iw *inputWait) jobForegroundLocked() int {
	fg := iw.foreground()
	if fg <= 0 || fg == unix.Getpgrp() {
		return 0
	}
	if iw.buf == nil {
		iw.buf = make([]byte, 4096)
	}
	return fg
}

// maxExitWatch bounds the processes whose end is watched at once.
const maxExitWatch = 64

// watchExit makes the end of process pid of the foreground group an event
// (a pidfd in an epoll set the runtime's poller waits on): a shell that
// ran a silent command (sleep 3; read x) reads once that command ended,
// which is no event of the runner's otherwise (the command is the shell's
// child, not ours). mu is held.
func (iw *inputWait) watchExit(pid int) {
	if _, ok := iw.exitFDs[pid]; ok || len(iw.exitFDs) >= maxExitWatch || iw.exitOff {
		return
	}
	if iw.exitEp == nil {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err == nil {
			err = unix.SetNonblock(ep, true)
		}
		if err != nil {
			iw.exitOff = true // an old kernel: the other events remain
			return
		}
		iw.exitEp = os.NewFile(uintptr(ep), "input-wait exits")
		iw.exitFDs = map[int]int{}
		go iw.waitExits(iw.exitEp)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if err == unix.ENOSYS {
			iw.exitOff = true
		}
		return
	}
	rc, err := iw.exitEp.SyscallConn()
	if err != nil {
		unix.Close(fd)
		return
	}
	var cerr error
	_ = rc.Control(func(ep uintptr) {
		cerr = unix.EpollCtl(int(ep), unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd), Pad: int32(pid)})
	})
	if cerr != nil {
		unix.Close(fd)
		return
	}
	iw.exitFDs[pid] = fd
}

// waitExits turns the ends of watched processes into events until the
// epoll set is closed (the job's end).
func (iw *inputWait) waitExits(ep *os.File) {
	rc, err := ep.SyscallConn()
	if err != nil {
		return
	}
	evs := make([]unix.EpollEvent, 16)
	for {
		n := 0
		if err := rc.Read(func(fd uintptr) bool {
			n, _ = unix.EpollWait(int(fd), evs, 0)
			return n > 0
		}); err != nil {
			return
		}
		iw.mu.Lock()
		if iw.exitEp != ep {
			iw.mu.Unlock() // closed meanwhile, with every pidfd
			return
		}
		for _, ev := range evs[:n] {
			if fd, ok := iw.exitFDs[int(ev.Pad)]; ok && fd == int(ev.Fd) {
				_ = rc.Control(func(efd uintptr) { _ = unix.EpollCtl(int(efd), unix.EPOLL_CTL_DEL, fd, nil) })
				unix.Close(fd)
				delete(iw.exitFDs, int(ev.Pad))
			}
		}
		iw.mu.Unlock()
		iw.event()
	}
}

// closeExits ends the watch of process ends.
func (iw *inputWait) closeExits() {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.exitEp == nil {
		return
	}
	for _, fd := range iw.exitFDs {
		unix.Close(fd)
	}
	iw.exitFDs = nil
	iw.exitEp.Close()
	iw.exitEp = nil
	iw.exitOff = true
}

// closeProcs closes the kept cgroup.procs (at the job's end).
func (iw *inputWait) closeProcs() {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.procsPath != "" {
		unix.Close(iw.procsFD)
	}
	iw.procsPath, iw.procsDone = "", true
}

// readProcs reads the job's cgroup.procs at path into iw's growing buffer
// (it may hold more than one read's worth), through the descriptor kept
// open for it; mu is held.
func (iw *inputWait) readProcs(path string) ([]byte, error) {
	if iw.procsDone {
		return nil, os.ErrClosed
	}
	if iw.procsPath != path {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		if iw.procsPath != "" {
			unix.Close(iw.procsFD)
		}
		iw.procsFD, iw.procsPath = fd, path
	}
	if iw.procsBuf == nil {
		iw.procsBuf = make([]byte, 0, 4096)
	}
	b := iw.procsBuf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Pread(iw.procsFD, b[len(b):cap(b)], int64(len(b)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			iw.procsBuf = b
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// pids are the job's processes: its cgroup's cgroup.procs when it has one
// (one read; a sub-group the job made itself is not looked into), else the
// tracker's list.
func (iw *inputWait) pids() []int {
	iw.r.rmu.Lock()
	tr, path := iw.r.tracker, iw.r.cgroupPath
	iw.r.rmu.Unlock()
	if path != "" {
		if b, err := iw.readProcs(path + "/cgroup.procs"); err == nil {
			pids := iw.pidBuf[:0]
			for f := range bytes.FieldsSeq(b) {
				if pid, ok := atoi(f); ok {
					pids = append(pids, pid)
				}
			}
			iw.pidBuf = pids
			return pids
		}
	}
	if tr == nil {
		return nil
	}
	pids, _ := tr.Pids()
	return pids
}

func (iw *inputWait) foreground() int {
	rc, err := iw.master.SyscallConn()
	if err != nil {
		return 0
	}
	pgrp := 0
	_ = rc.Control(func(fd uintptr) {
		if n, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
			pgrp = n
		}
	})
	return pgrp
}

// lookLocked is one check (see the top of the file).
func (iw *inputWait) lookLocked() bool {
	select {
	case <-iw.r.done:
		return false
	default:
	}
	if iw.written.Load() != iw.queued.Load() {
		return false // input waits in the runner's queue
	}
	// Output not yet read: the job is printing, not waiting. One poll,
	// before the readers' look at /proc (several files a task): a job
	// printing without pause is checked every inputWaitMaxGap, and each
	// check stops here.
	if iw.outputPending() {
		iw.untimed = false
		return false
	}
	fresh, untimed := false, false
	for tid, key := range iw.readersLocked() {
		if iw.stale[tid] != strings.TrimSuffix(key, timedKey) {
			fresh = true
			untimed = untimed || !strings.HasSuffix(key, timedKey)
		}
	}
	iw.untimed = false
	if !fresh {
		return false
	}
	if iw.inputPending() || iw.outputPending() {
		return false // each ends in an event or in the series' next check
	}
	iw.untimed = untimed
	// flush writes the held prompt only when nothing the job wrote is
	// left between the terminal and the sanitizer: none unread (a poll of
	// the master, which moves what is in the terminal's buffers first),
	// and none read but not yet sanitized (the pump's thread is asleep in
	// its read of the master: sanitize.FlushSetter).
	return iw.flush != nil && iw.flush()
}

// outputPending reports whether output of the job is still in the
// terminal, not yet read by the pump. A poll of the master moves what
// the job wrote through the terminal's buffers first (n_tty_poll), so
// nothing in flight is missed.
func (iw *inputWait) outputPending() bool {
	rc, err := iw.master.SyscallConn()
	if err != nil {
		return false
	}
	pending := false
	_ = rc.Control(func(fd uintptr) { pending = readable(int(fd)) })
	return pending
}

// inputPending reports whether input written to the terminal waits there
// for the job to read it (in canonical mode: a whole line). The slave side
// is opened from the master (TIOCGPTPEER: no path to resolve) for this
// look only.
func (iw *inputWait) inputPending() bool {
	rc, err := iw.master.SyscallConn()
	if err != nil {
		return false
	}
	pending := false
	_ = rc.Control(func(fd uintptr) {
		peer, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER,
			uintptr(unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC))
		if errno != 0 {
			return
		}
		pending = readable(int(peer))
		unix.Close(int(peer))
	})
	return pending
}

// readable polls fd for input without waiting.
func readable(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(p, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && p[0].Revents&unix.POLLIN != 0
	}
}

// publishLocked tells the server(s) a change of state. The message carries
// the output size once the prompt is on disk, and the inputs written when
// the state was seen (a server counts a job waiting only once the state
// accounts for every input it sent).
func (iw *inputWait) publishLocked(w bool) {
	seq := iw.written.Load()
	p := seq << 1
	if w {
		p |= 1
	}
	idleChanged := iw.idle.Swap(w && iw.untimed) != (w && iw.untimed)
	same := iw.published.Swap(p) == p
	if idleChanged || !same {
		iw.chMu.Lock()
		if iw.changed != nil {
			close(iw.changed)
			iw.changed = nil
		}
		iw.chMu.Unlock()
	}
	if same {
		return
	}
	iw.r.broadcast(&proto.Msg{T: proto.TInputWait, Waiting: w, InputSeq: seq, Size: iw.r.size.Load()})
}

// loop runs the checks when schedule says.
func (iw *inputWait) loop() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	armed := false
	var armedAt time.Time // when the armed timer fires
	// armAt arms the timer for at (at once when at has passed). Times are
	// the schedule's own (lastCheck + a gap), so an event whose due time
	// is the armed one finds it armed already (covered).
	armAt := func(at time.Time) {
		if armed && !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(max(0, time.Until(at)))
		armed, armedAt = true, at
	}
	var s iwSchedule
	// cover says whether the armed timer comes no later than an event
	// would ask (see inputWait.covered).
	cover := func() {
		iw.covered.Store(armed && !armedAt.After(s.lastCheck.Add(s.gap)))
	}
	for {
		select {
		case <-iw.r.done:
			t.Stop()
			iw.closeExits()
			iw.closeProcs()
			return
		case <-iw.kick:
			iw.pending.Store(false)
			due := s.event()
			if !armed || armedAt.After(due) {
				armAt(due)
			}
			cover()
		case <-t.C:
			armed = false
			iw.covered.Store(false)
			if iw.pending.Swap(false) {
				s.event() // events that came while it was covered
			}
			// The read that kicked this check readied the size event's
			// sender too: let it go first (the runner has one P, and
			// the timer's goroutine would run before it), so the
			// answer to an input is not held behind the check's reads
			// of /proc.
			runtime.Gosched()
			w, seq := iw.check()
			now := time.Now()
			if d, ok := s.looked(now, w, seq); ok {
				armAt(now.Add(d))
			}
			cover()
		}
	}
}

// iwSchedule decides when the checks run: one at an event (at once when
// the job was quiet), then the decaying series, backing off while events
// keep coming (each check that follows events doubles the gap to the next,
// up to inputWaitMaxGap), so that a program printing continuously is
// looked at at most once per inputWaitMaxGap.
//
// A check that finds the job waiting for input, the first since the
// input it last answered, ends the back-off: the program stopped printing
// to read, so the events that come next are its answer to the next input.
// The next inputWaitQuick checks run right at those events (the read of
// the prompt among them), the ones after 1, 2, 4 … ms apart, rather than
// up to inputWaitMaxGap after the last check (the prompt→answer latency
// of a program driven input by input). That is at most once per input
// written, so a program that prints continuously while asleep in a timed
// read of the terminal is still looked at no more often than the back-off
// allows, and an input costs at most inputWaitQuick checks more.
type iwSchedule struct {
	events     bool // an event came since the last check
	lastEvents bool // the last check followed an event
	gap        time.Duration
	step       int
	lastCheck  time.Time
	restarted  int64 // 1 + the inputs written when a check last ended the back-off (0: none)
	quick      int   // checks left that follow events at once (no gap)
}

// inputWaitQuick is how many checks after the back-off ended run at the
// events that come (the input written, its echo, the answer and prompt
// read) with no gap, before the gap grows again from 1 ms.
const inputWaitQuick = 4

// event is an event: it returns when the next check is due at the
// earliest.
func (s *iwSchedule) event() time.Time {
	s.events = true
	return s.lastCheck.Add(s.gap)
}

// looked is a check at now that found the job waiting (w) with seq inputs
// written: it returns the delay to the next check (false: none until an
// event).
func (s *iwSchedule) looked(now time.Time, w bool, seq int64) (time.Duration, bool) {
	s.lastCheck = now
	switch {
	case w && s.restarted != seq+1:
		s.restarted = seq + 1
		s.gap, s.step, s.events = 0, 0, false
		s.quick = inputWaitQuick
	case s.events && s.quick > 0:
		s.quick--
		s.gap, s.step = 0, 0
	case s.events:
		if s.lastEvents {
			s.gap = min(max(2*s.gap, time.Millisecond), inputWaitMaxGap)
		} else {
			s.gap = time.Millisecond
		}
		s.step = 0
	default:
		s.gap = 0
		s.step++
	}
	s.lastEvents, s.events = s.events, false
	if s.step >= len(inputWaitSeries) {
		return 0, false
	}
	return max(inputWaitSeries[s.step], s.gap), true
}
