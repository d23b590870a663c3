package sanitize

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
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
	p := &pump{s: New(w), idle: idle}
	p.timer = time.AfterFunc(time.Hour, p.onIdle)
	p.timer.Stop()
	if fs != nil {
		fs.SetFlush(p.flushNow)
	}

	buf := make([]byte, readSize)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			_, werr := p.s.Write(buf[:n])
			// The timer is armed when a partial line is first held; while
			// input keeps coming onIdle re-arms itself from lastInput, so
			// the hot path costs one clock read, not a timer reset.
			if p.s.Pending() {
				p.lastInput = time.Now()
				if !p.armed {
					p.armed = true
					p.timer.Reset(idle)
				}
			}
			p.mu.Unlock()
			if werr != nil {
				p.stop()
				return werr
			}
			if ro != nil {
				ro.ObserveRead(n)
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

// FlushSetter is a writer given to Pump that may want the held partial
// line written before idle passes: Pump hands it a function that does so
// at once (a no-op when nothing is held or Pump has returned). The runner
// calls it when the job's program is blocked reading its terminal, so a
// prompt is on disk the moment the program waits for its answer.
type FlushSetter interface {
	SetFlush(flush func())
}

// ReadObserver is a writer given to Pump that wants to know of every read
// of the input, written or held: Pump calls ObserveRead after the sanitizer
// took the bytes. The runner takes it as the event "the job printed",
// which a prompt held as a partial line would otherwise not give.
type ReadObserver interface {
	ObserveRead(n int)
}

// flushNow writes the held partial line now.
func (p *pump) flushNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || !p.s.Pending() {
		return
	}
	p.s.Flush() // an error is kept by the Sanitizer and seen by the next Write
}

// stop disarms the timer for good; after it returns onIdle writes nothing.
func (p *pump) stop() {
	p.timer.Stop()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}
