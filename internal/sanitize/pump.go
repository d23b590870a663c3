package sanitize

import (
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultIdle is how long Pump waits without new input before it writes a
// held partial line (a prompt such as "Password: "). It is well under the
// API's default idle_flush_seconds (0.5 s), so by the time a waiter decides
// that output went idle the prompt is already in output.log, and it is long
// enough that a line arriving in several quick reads is normally written
// once, whole.
const DefaultIdle = 50 * time.Millisecond

// readSize is the buffer size of one read in Pump. A pty master returns at
// most a few KiB per read; pipes and files can return more.
const readSize = 32 << 10

type countingWriter struct {
	w  io.Writer
	fn func(n int)
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		c.fn(n)
	}
	return n, err
}

// isEnd reports whether a read error means the normal end of the input: EOF,
// or EIO, which a pty master returns once the terminal's last holder closed it.
func isEnd(err error) bool {
	return err == io.EOF || errors.Is(err, syscall.EIO)
}

// pump is the state Pump shares with its idle timer.
type pump struct {
	mu        sync.Mutex
	s         *Sanitizer
	idle      time.Duration
	lastInput time.Time
	stopped   bool
	armed     bool // the timer is set (or onIdle is about to run)
	timer     *time.Timer
	rc        syscall.RawConn // the input's descriptor (FlushSetter)
	tid       int             // the thread that reads rc, when it blocks (FlushSetter)
	ro        ReadObserver    // told of every read, before it is sanitized
}

// onIdle runs on the timer: it writes the held partial line once idle has
// passed since the last input, or re-arms itself for the rest of the wait.
func (p *pump) onIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if wait := p.idle - time.Since(p.lastInput); wait > 0 && p.s.Pending() {
		p.timer.Reset(wait)
		return
	}
	p.armed = false
	p.s.Flush() // an error is kept by the Sanitizer and seen by the next Write
}

// Pump copies r through a Sanitizer into w until r ends (EOF, or EIO from a
// pty master), then writes what is held and returns nil. A held partial line
// is written once idle passes with no new input (idle <= 0 means
// DefaultIdle). onWrite, when not nil, is called after every write to w with
// the number of bytes written.
//
// Pump reads r in the calling goroutine and sanitizes each read at once; a
// timer (no goroutine, no polling while idle) writes the held partial line.
// Writes to w and calls of onWrite come from either, never at the same time,
// and never after Pump returned. A failed write to w ends Pump with that
// error; another read error is returned after what is held was written.
func Pump(r io.Reader, w io.Writer, idle time.Duration, onWrite func(n int)) error {
	if idle <= 0 {
		idle = DefaultIdle
	}
	fs, _ := w.(FlushSetter)
	ro, _ := w.(ReadObserver)
	if onWrite != nil {
		w = countingWriter{w: w, fn: onWrite}
	}
	p := &pump{s: New(w), idle: idle, ro: ro}
	p.timer = time.AfterFunc(time.Hour, p.onIdle)
	p.timer.Stop()
	buf := make([]byte, readSize)
	read := func() (int, error, error) {
		n, rerr := r.Read(buf)
		if n <= 0 {
			return n, rerr, nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return n, rerr, p.take(buf[:n])
	}
	if fs != nil {
		if sc, ok := r.(syscall.Conn); ok {
			if rc, err := sc.SyscallConn(); err == nil {
				p.rc = rc
				if nonBlocking(rc) {
					// Read and sanitize under p.mu, so an on-demand
					// flush never runs while bytes are out of r but
					// not yet in the sanitizer. (Only a non-blocking
					// descriptor: the lock is never held while waiting
					// for input.)
					read = func() (int, error, error) { return p.rawRead(buf) }
				} else {
					// A blocking descriptor (a pty master that went
					// through Fd()) is read on this thread, always:
					// the flush then asks the kernel whether the thread
					// is blocked in that read, which means nothing is
					// between r and the sanitizer.
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					p.tid = unix.Gettid()
				}
			}
		}
		fs.SetFlush(p.flushNow)
	}

	for {
		n, rerr, werr := read()
		if n > 0 {
			if werr != nil {
				p.stop()
				return werr
			}
		}
		if rerr != nil {
			p.stop()
			p.mu.Lock()
			cerr := p.s.Close()
			p.mu.Unlock()
			if !isEnd(rerr) {
				return rerr
			}
			return cerr
		}
	}
}

// nonBlocking reports whether rc's descriptor is in non-blocking mode (an
// *os.File the runtime polls).
func nonBlocking(rc syscall.RawConn) bool {
	nb := false
	_ = rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nb = err == nil && fl&unix.O_NONBLOCK != 0
	})
	return nb
}

// blockedInRead reports whether the pump's thread is asleep in read(2) of
// the input, from /proc/self/task/<tid>/syscall ("nr fd …"; "running"
// while it runs). Anything else — running towards its next read, or back
// from one with bytes and waiting for p.mu, which the caller holds — is a
// no.
func (p *pump) blockedInRead() bool {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(p.tid) + "/syscall")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 || f[0] != strconv.Itoa(unix.SYS_READ) {
		return false
	}
	fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 32)
	if err != nil {
		return false
	}
	same := false
	_ = p.rc.Control(func(cur uintptr) { same = uintptr(fd) == cur })
	return same
}

// take sanitizes one read; p.mu is held.
func (p *pump) take(b []byte) error {
	if p.ro != nil {
		p.ro.ObserveRead(b)
	}
	_, werr := p.s.Write(b)
	// The timer is armed when a partial line is first held; while input
	// keeps coming onIdle re-arms itself from lastInput, so the hot path
	// costs one clock read, not a timer reset.
	if p.s.Pending() {
		p.lastInput = time.Now()
		if !p.armed {
			p.armed = true
			p.timer.Reset(p.idle)
		}
	}
	return werr
}

// rawRead reads r's descriptor and sanitizes what it got in one hold of
// p.mu (waiting for input outside it).
func (p *pump) rawRead(buf []byte) (n int, rerr, werr error) {
	err := p.rc.Read(func(fd uintptr) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for {
			n, rerr = syscall.Read(int(fd), buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			return false // wait for input, outside the lock
		}
		if n > 0 {
			werr = p.take(buf[:n])
		}
		return true
	})
	if n < 0 {
		n = 0
	}
	switch {
	case err != nil:
		rerr = err
	case rerr == nil && n == 0:
		rerr = io.EOF
	}
	return n, rerr, werr
}

// FlushSetter is a writer given to Pump that may want the held partial
// line written before idle passes: Pump hands it a function that does so
// at once (a no-op when nothing is held or Pump has returned). The runner
// calls it when the job's program is blocked reading its terminal, so a
// prompt is on disk the moment the program waits for its answer.
//
// The function reports whether everything the input had to give is
// written: false when bytes still wait in it (then it writes nothing). It
// can tell only when the input is a descriptor (an *os.File, such as a
// pty master), which Pump then reads in the same hold of its lock as it
// sanitizes: for any other reader it reports true.
type FlushSetter interface {
	SetFlush(flush func() bool)
}

// ReadObserver is a writer given to Pump that wants every read of the
// input, written or held, as the raw bytes read: Pump calls ObserveRead
// just before the sanitizer takes them, in the same hold of Pump's lock
// (so an on-demand flush never comes between the two), from Pump's
// goroutine; p is reused by the next read: copy what is kept. The runner takes it as the event "the job
// printed", which a prompt held as a partial line would otherwise not
// give, and feeds the bytes to the job's screen.
type ReadObserver interface {
	ObserveRead(p []byte)
}

// flushNow writes the held partial line now, unless input still waits in
// the descriptor (see FlushSetter).
func (p *pump) flushNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return true
	}
	if p.rc != nil {
		waiting := false
		_ = p.rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				n, err := unix.Poll(pfd, 0)
				if err == unix.EINTR {
					continue
				}
				waiting = err == nil && n > 0 && pfd[0].Revents&unix.POLLIN != 0
				return
			}
		})
		if waiting {
			return false
		}
		if p.tid != 0 && !p.blockedInRead() {
			return false
		}
	}
	if p.s.Pending() {
		p.s.Flush() // an error is kept by the Sanitizer and seen by the next Write
	}
	return true
}

// stop disarms the timer for good; after it returns onIdle writes nothing.
func (p *pump) stop() {
	p.timer.Stop()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}
