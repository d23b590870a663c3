package runner

// The screen of a pty job (GET /v1/jobs/{id}/screen, POST …/keys): a
// terminal emulator fed the raw bytes read from the terminal, off the
// output path; cold in the runner, then in a screen process
// (screenproc.go).
//
// The pump that writes output.log copies each read into a bounded queue
// and goes on (plain lines that the runner follows itself, screen.Lines,
// go to the screen at once when nothing is queued); the emulator's own
// goroutine takes everything queued at once and feeds it, woken when
// screenBatch is queued, when the screen is asked for, and when the
// output is drained. The pump never waits on the emulator while it is
// less than screenQueue bytes behind; past that the pump waits for it (bytes are
// never dropped: a screen fed with a gap would be wrong until the program
// redraws all of it). The emulator fast-forwards through floods of plain
// lines (internal/screen), so a flood of output never gets that far behind;
// a flood of escape sequences other than colours can, and is then slowed
// to the emulator's pace.
//
// The screen starts cold (screen.Cold): the emulator itself (the screen
// process) is started only once the program writes something beyond plain
// lines, the terminal is resized, or more than a few KiB were written, so
// a job that prints a few lines and ends never pays for one; its screen
// and screen.json come from the cold rows.
//
// When the job's output is drained, the emulator finishes the queue and
// the last screen is written to screen.json in the job's directory; the
// runner answers from memory until it leaves, the server from the file
// after that.

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/screen"
)

// ScreenFile holds a pty job's last screen once its output is drained.
const ScreenFile = "screen.json"

// screenQueue is how far (bytes) the emulator may be behind the output
// before the pump waits for it.
const screenQueue = 4 << 20

// screenBatch: the emulator is woken by the output once this much is
// queued; sooner only when the screen is asked for (a screen or keys
// request) or the output is drained. The screen is needed only when
// looked at, and a wake-up for every read of the terminal would cost more
// than the emulator's work.
const screenBatch = 256 << 10

// Settling after keys: an answer comes once the terminal has been quiet
// this long (no output since the keys or since the last output), and the
// emulator has caught up, at the latest after the timeout.
const (
	DefaultKeysQuiet   = 100 * time.Millisecond
	DefaultKeysTimeout = 3 * time.Second
)

// screenErrTooLarge starts the error of a screen request on a terminal
// larger than what is emulated.
const screenErrTooLarge = "screen_too_large: "

type screenFeed struct {
	mu      sync.Mutex
	buf     []byte     // queued bytes
	spare   []byte     // the other buffer
	resizes []resizeAt // resizes queued, at their place in buf
	closed  bool
	wake    chan struct{} // the emulator has work
	room    chan struct{} // the queue was taken
	queued  int64         // bytes and resizes queued, ever
	fed     int64         // of them, fed
	fedMore chan struct{} // closed and replaced each time fed grows
	done    chan struct{} // the emulator's goroutine ended

	lastRead atomic.Int64 // unix ns of the last read from the terminal

	// attach (raw.go): raw counts every byte put; ring (nil until the
	// first raw request) keeps the last of them, and rawGrew announces
	// each read once it exists. termRaw (under tmu) is how many of them
	// the term was fed: the raw offset its screen stands at.
	raw     int64
	ring    *rawRing
	rawGrew func(int64)
	termRaw int64

	tmu   sync.Mutex // the term
	term  *liveTerm
	cols  int // the terminal's size (term nil: too large to emulate)
	rows  int
	start screenStarter
}

type resizeAt struct{ off, cols, rows int }

func newScreenFeed(cols, rows int, start screenStarter) *screenFeed {
	f := &screenFeed{
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		fedMore: make(chan struct{}), done: make(chan struct{}),
		cols: cols, rows: rows, start: start,
	}
	if screen.Fits(cols, rows) {
		f.term = newLiveTerm(cols, rows, start)
	}
	go f.run()
	return f
}

// put queues p, waiting only while the queue is full.
func (f *screenFeed) put(p []byte) {
	f.lastRead.Store(time.Now().UnixNano())
	f.mu.Lock()
	for len(f.buf) > 0 && len(f.buf)+len(p) > screenQueue && !f.closed {
		f.mu.Unlock()
		<-f.room
		f.mu.Lock()
	}
	f.buf = append(f.buf, p...)
	f.queued += int64(len(p))
	f.raw += int64(len(p))
	if f.ring != nil {
		f.ring.keep(p, f.raw)
		f.rawGrew(f.raw)
	}
	if len(f.buf) == 0 && len(f.resizes) == 0 && f.fed == f.queued && f.takeLines(p) {
		// Nothing queued and everything fed: plain lines go to the
		// runner's own screen here, not through the queue. (A waiter for
		// the feed wants at most what was queued before: fed already.)
		f.queued += int64(len(p))
		f.fed += int64(len(p))
		f.mu.Unlock()
		return
	}
	full := len(f.buf) >= screenBatch
	f.mu.Unlock()
	if full {
		f.kick()
	}
}

// takeLines follows p on the term when it is plain lines the runner
// follows itself (screen.Lines takes p whole or not at all): a few
// nanoseconds a byte, which the queue's copy and the wake-ups of its
// goroutine would cost more than. f.mu is held (then tmu, as everywhere).
func (f *screenFeed) takeLines(p []byte) bool {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if t := f.term; t != nil && t.lines != nil && t.lines.Write(p) {
		f.termRaw += int64(len(p))
		return true
	}
	return false
}

// kick wakes the emulator.
func (f *screenFeed) kick() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// resize queues a change of size, in order with the bytes.
func (f *screenFeed) resize(cols, rows int) {
	f.mu.Lock()
	f.resizes = append(f.resizes, resizeAt{off: len(f.buf), cols: cols, rows: rows})
	f.queued++
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run feeds the emulator until the queue is closed and empty.
func (f *screenFeed) run() {
	defer close(f.done)
	for {
		f.mu.Lock()
		for len(f.buf) == 0 && len(f.resizes) == 0 {
			if f.closed {
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			<-f.wake
			f.mu.Lock()
		}
		buf, resizes := f.buf, f.resizes
		f.buf, f.spare, f.resizes = f.spare[:0], nil, nil
		f.mu.Unlock()
		select {
		case f.room <- struct{}{}:
		default:
		}
		f.apply(buf, resizes)
		f.mu.Lock()
		f.fed += int64(len(buf) + len(resizes))
		close(f.fedMore)
		f.fedMore = make(chan struct{})
		if f.spare == nil && cap(buf) <= 2*screenQueue {
			f.spare = buf[:0]
		}
		f.mu.Unlock()
	}
}

// feedPiece bounds how long a screen request waits for the emulator
// busy with a long queue.
const feedPiece = 64 << 10

func (f *screenFeed) apply(buf []byte, resizes []resizeAt) {
	off := 0
	write := func(end int) {
		for off < end {
			n := min(end-off, feedPiece)
			f.tmu.Lock()
			if f.term != nil {
				f.term.Write(buf[off : off+n])
			}
			f.termRaw += int64(n)
			f.tmu.Unlock()
			off += n
		}
	}
	for _, rz := range resizes {
		write(rz.off)
		f.tmu.Lock()
		f.cols, f.rows = rz.cols, rz.rows
		switch {
		case !screen.Fits(rz.cols, rz.rows):
			if f.term != nil {
				f.term.Close()
				f.term = nil
			}
		case f.term == nil:
			// Emulated again: blank until the program redraws (it got
			// SIGWINCH).
			f.term = newLiveTerm(rz.cols, rz.rows, f.start)
		default:
			f.term.Resize(rz.cols, rz.rows)
		}
		f.tmu.Unlock()
	}
	write(len(buf))
}

// close ends the queue once the output is drained, and waits for the
// emulator to take the rest.
func (f *screenFeed) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	select {
	case f.room <- struct{}{}:
	default:
	}
	<-f.done
}

// snapshot is the screen now as JSON, or why there is none.
func (f *screenFeed) snapshot(scrollback int) ([]byte, string) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if f.term == nil {
		return nil, screenErrTooLarge + screen.ErrTooLarge(f.cols, f.rows).Error()
	}
	return f.term.Snapshot(scrollback)
}

// end ends the screen process, if one was started.
func (f *screenFeed) end() {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if f.term != nil {
		f.term.Close()
	}
}

func (f *screenFeed) appCursor() bool {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return f.term != nil && f.term.AppCursor()
}

// settle waits until the terminal has been quiet for quiet since since
// (or since its last output after that), then until the emulator has fed
// what was read by then; at most until deadline, or until done is closed
// (the emulator fed everything: the job's output is drained).
//
// ready, when not nil, ends the quiet wait early: it reports whether the
// program is settled by another sign (it waits for input), and a channel
// closed when that may have changed.
func (f *screenFeed) settle(since time.Time, quiet time.Duration, deadline time.Time, done <-chan struct{}, ready func() (bool, <-chan struct{})) {
	sleep := func(d time.Duration, ch <-chan struct{}) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ch:
			return true
		case <-done:
			return false
		}
	}
	for {
		var changed <-chan struct{}
		if ready != nil {
			var ok bool
			if ok, changed = ready(); ok {
				break
			}
		}
		last := time.Unix(0, f.lastRead.Load())
		if last.Before(since) {
			last = since
		}
		now := time.Now()
		wait := last.Add(quiet).Sub(now)
		if wait <= 0 || !now.Before(deadline) {
			break
		}
		if !sleep(min(wait, deadline.Sub(now)), changed) {
			return
		}
	}
	f.mu.Lock()
	target := f.queued
	f.mu.Unlock()
	f.kick()
	for {
		f.mu.Lock()
		fed, more := f.fed, f.fedMore
		f.mu.Unlock()
		now := time.Now()
		if fed >= target || !now.Before(deadline) {
			return
		}
		if !sleep(deadline.Sub(now), more) {
			return
		}
	}
}

// saveScreen writes the last screen to the job's directory once the
// output is drained.
func (r *Runner) saveScreen() {
	r.mu.Lock()
	f := r.screen
	r.mu.Unlock()
	if f == nil {
		return
	}
	f.close()
	b, why := f.snapshot(screen.ScrollbackLines)
	if why != "" {
		r.log.Info("no last screen to keep", "why", why)
		return
	}
	// Made ahead with the job's directory, empty (or made here).
	out, err := r.jobDir.OpenFresh(ScreenFile, 0o600)
	if err != nil {
		r.log.Warn("keep the last screen", "err", err)
		return
	}
	defer out.Close()
	if _, err := out.Write(b); err != nil {
		r.log.Warn("keep the last screen", "err", err)
	}
}

// screenFeed is the job's screen (nil: not a pty job), made on first use:
// a job still starting has a blank screen of its size.
func (r *Runner) screenFeed() (*screenFeed, string) {
	if r.spec.Mode != "pty" {
		return nil, "input_unsupported"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.screen == nil {
		start := r.screenStart
		if start == nil {
			start = r.startScreenProc
		}
		r.screen = newScreenFeed(r.spec.Cols, r.spec.Rows, start)
	}
	return r.screen, ""
}

// screenCatchUp bounds how long a screen request waits for the emulator
// to take what was read before it.
const screenCatchUp = 2 * time.Second

// screenOf answers a screen request: once the emulator has fed what was
// read from the terminal so far (every byte in output.log when the request
// came), at most after screenCatchUp.
func (r *Runner) screenOf(scrollback int) ([]byte, string) {
	f, why := r.screenFeed()
	if f == nil {
		return nil, why
	}
	now := time.Now()
	f.settle(now, 0, now.Add(screenCatchUp), f.done, nil)
	return f.snapshot(scrollback)
}

// keys types keys on the terminal and answers the screen once settled.
func (r *Runner) keys(m *proto.Msg) *proto.Msg {
	ack := &proto.Msg{T: proto.TAck, ID: m.ID}
	f, why := r.screenFeed()
	if f == nil {
		ack.Err = why
		return ack
	}
	// The cursor keys follow the mode the program set by now.
	now := time.Now()
	f.settle(now, 0, now.Add(screenCatchUp), f.done, nil)
	f.tmu.Lock()
	tooLarge, cols, rows := f.term == nil, f.cols, f.rows
	broken := ""
	if f.term != nil {
		broken = f.term.Broken()
	}
	f.tmu.Unlock()
	if tooLarge {
		// Not typed: the answer could not show what they did.
		ack.Err = screenErrTooLarge + screen.ErrTooLarge(cols, rows).Error()
		return ack
	}
	if broken != "" {
		// Not typed either: a client that retries must not type twice.
		ack.Err = screenUnavailable + broken
		return ack
	}
	b, err := screen.Keys(m.Keys, f.appCursor())
	if err != nil {
		var ke *screen.KeyError
		if errors.As(err, &ke) {
			ack.Err = "bad_key: " + err.Error()
		} else {
			ack.Err = err.Error()
		}
		return ack
	}
	sent := time.Now()
	e, seq := r.input(termInput{b: b})
	if e != "" {
		ack.Err = e
		return ack
	}
	quiet := time.Duration(m.QuietMS) * time.Millisecond
	if quiet <= 0 {
		quiet = DefaultKeysQuiet
	}
	timeout := time.Duration(m.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = DefaultKeysTimeout
	}
	// A job that ends meanwhile ends the wait: its last screen is whole
	// once its output is drained.
	// Settled: quiet for quiet, or the program waits for input again,
	// with no timeout, after reading the keys (input-wait, inputwait.go).
	f.settle(sent, quiet, sent.Add(timeout), f.done, func() (bool, <-chan struct{}) { return r.iw.waitingSince(seq, true) })
	ack.Screen, ack.Err = r.screenOf(m.Scrollback)
	return ack
}

// startScreen is the feed the terminal's raw reads go to (nil when the
// job has no screen).
func (r *Runner) startScreen() *screenFeed {
	f, _ := r.screenFeed()
	return f
}

// endScreen ends the job's screen process, if it has one: the runner
// answers screens until it leaves.
func (r *Runner) endScreen() {
	r.mu.Lock()
	f := r.screen
	r.mu.Unlock()
	if f != nil {
		f.end()
	}
}

// resizeScreen follows a resize of the terminal.
func (r *Runner) resizeScreen(cols, rows int) {
	if f, _ := r.screenFeed(); f != nil {
		f.resize(cols, rows)
	}
}
