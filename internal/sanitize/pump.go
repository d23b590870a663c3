package sanitize

import (
	"errors"
	"io"
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

// Pump copies r through a Sanitizer into w until r ends (EOF, or EIO from a
// pty master), then writes what is held and returns nil. A held partial line
// is written once idle passes with no new input (idle <= 0 means
// DefaultIdle). onWrite, when not nil, is called after every write to w with
// the number of bytes written.
//
// One goroutine reads r (with two buffers, so reading overlaps sanitizing);
// the caller's goroutine sanitizes and waits on a timer, so an idle pump
// costs nothing. If writing to w fails, Pump returns that error at once; the
// reader goroutine then ends when its current Read returns.
func Pump(r io.Reader, w io.Writer, idle time.Duration, onWrite func(n int)) error {
	if idle <= 0 {
		idle = DefaultIdle
	}
	if onWrite != nil {
		w = countingWriter{w: w, fn: onWrite}
	}
	s := New(w)

	type result struct {
		b   []byte
		err error
	}
	results := make(chan result)
	free := make(chan []byte, 2)
	free <- make([]byte, readSize)
	free <- make([]byte, readSize)
	done := make(chan struct{})
	defer close(done)

	go func() {
		for {
			var b []byte
			select {
			case b = <-free:
			case <-done:
				return
			}
			n, err := r.Read(b)
			if n == 0 && err == nil {
				free <- b
				continue
			}
			select {
			case results <- result{b: b[:n], err: err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	timer := time.NewTimer(idle)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case res := <-results:
			if len(res.b) > 0 {
				if _, err := s.Write(res.b); err != nil {
					return err
				}
			}
			free <- res.b[:cap(res.b)]
			if res.err != nil {
				cerr := s.Close()
				if !isEnd(res.err) {
					return res.err
				}
				return cerr
			}
			if s.Pending() {
				timer.Reset(idle)
			} else {
				timer.Stop()
			}
		case <-timer.C:
			if err := s.Flush(); err != nil {
				return err
			}
		}
	}
}
