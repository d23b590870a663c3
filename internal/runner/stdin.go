package runner

// A stdio job's stdin as a pipe the runner holds (spec Stdin "pipe",
// spec/extended-api.md §8). The server never writes to the pipe itself:
// it asks the runner, which writes on a goroutine of its own with a
// deadline and answers how many bytes the pipe took. A job that does not
// read therefore costs the runner one bounded queue of requests, the
// server one pending request until that deadline, and never blocks
// either's control channel.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// StdinPipe is Spec.Stdin for a stdio job whose stdin is a pipe the
// runner holds ("" or anything else: /dev/null).
const StdinPipe = "pipe"

// Input errors a runner answers in an ack's Err, which the server turns
// into its own error kinds.
const (
	InputBackpressure = "input_backpressure" // the deadline passed before all bytes were taken
	InputStdinClosed  = "stdin_closed"       // eof was sent before, or the job closed its end
	InputNotRunning   = "job_not_running"
)

const (
	// stdinQueue bounds the input requests waiting for the writer. The
	// server sends one input's pieces one after another and waits for
	// each ack, so more than a few queued means a server that stopped
	// waiting; the rest are refused, never held.
	stdinQueue = 16
	// maxStdinWait caps how long the writer waits for a job to read, so
	// a request whose server went away does not hold the queue longer
	// (the server's own waits are capped at 600 s too).
	maxStdinWait = 600 * time.Second
)

// stdinReq is one input for the pipe: data, then the pipe closed when eof.
type stdinReq struct {
	c       *proto.Conn
	id      int64
	data    []byte
	msg     *proto.Msg // data's message: its buffer is given back once written
	eof     bool
	timeout time.Duration
}

// openStdinPipe makes the stdin pipe of a stdio job: the read end is the
// job's fd 0, the write end stays with the runner (non-blocking, in Go's
// poller: writes wait with a deadline, and Close wakes a waiting one).
func (r *Runner) openStdinPipe() (jobEnd *os.File, err error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make stdin pipe: %w", err)
	}
	r.mu.Lock()
	r.stdinW = wr
	r.mu.Unlock()
	return rd, nil
}

// prepareStdin readies the input queue of a job that will have a stdin
// pipe, as soon as the job is assigned: input may come while the job is
// still starting, and waits in the queue until the pipe is there.
func (r *Runner) prepareStdin() {
	if r.spec.Mode == "stdio" && r.spec.Stdin == StdinPipe {
		r.stdinCh = make(chan stdinReq, stdinQueue)
		r.stdinReady = make(chan struct{})
		go r.writeStdin()
	}
}

// startStdinWriter lets the writer at the pipe, once the job runs.
func (r *Runner) startStdinWriter() {
	if r.stdinReady != nil {
		close(r.stdinReady)
	}
}

// queueStdin queues one input request; the ack goes back from the writer.
// ok false: refused at once with why (nothing was written).
func (r *Runner) queueStdin(c *proto.Conn, m *proto.Msg) (why string, ok bool) {
	r.mu.Lock()
	done := r.exit != nil || r.stdinEnded
	r.mu.Unlock()
	if done {
		return InputNotRunning, false
	}
	t := time.Duration(m.TimeoutMS) * time.Millisecond
	t = min(max(t, 0), maxStdinWait)
	select {
	case r.stdinCh <- stdinReq{c: c, id: m.ID, data: m.Data, msg: m, eof: m.EOF, timeout: t}:
		return "", true
	default:
		return "input queue full: the job is not reading its stdin", false
	}
}

// writeStdin answers queued input requests in order until the job ends;
// those left then are answered job_not_running.
func (r *Runner) writeStdin() {
	select {
	case <-r.stdinReady:
	case <-r.done: // the job never started
	}
	for {
		select {
		case q := <-r.stdinCh:
			r.stdinBusy.Lock()
			n, why := r.stdinWrite(q)
			q.msg.Release()
			q.c.Send(&proto.Msg{T: proto.TAck, ID: q.id, Err: why, Taken: int64(n)})
			r.stdinBusy.Unlock()
		case <-r.done:
			for {
				select {
				case q := <-r.stdinCh:
					q.msg.Release()
					q.c.Send(&proto.Msg{T: proto.TAck, ID: q.id, Err: InputNotRunning})
				default:
					return
				}
			}
		}
	}
}

// stdinWrite writes q's bytes to the pipe, waiting at most q.timeout for
// a job that does not read, then closes the pipe if q asks and every byte
// was taken. It answers the bytes taken and, when not all, why.
func (r *Runner) stdinWrite(q stdinReq) (int, string) {
	r.mu.Lock()
	w, ended := r.stdinW, r.stdinEnded || r.exit != nil
	r.mu.Unlock()
	if ended {
		return 0, InputNotRunning
	}
	if w == nil {
		return 0, InputStdinClosed
	}
	n, err := writeNow(w, q.data)
	if err == nil && n < len(q.data) && q.timeout > 0 {
		// The pipe is full: wait for the job to read, until the deadline.
		_ = w.SetWriteDeadline(time.Now().Add(q.timeout))
		var m int
		m, err = w.Write(q.data[n:])
		n += m
		_ = w.SetWriteDeadline(time.Time{})
	}
	switch {
	case errors.Is(err, syscall.EPIPE):
		// Every reader closed its end: nothing more can be written.
		r.closeStdin(false)
		return n, InputStdinClosed
	case errors.Is(err, os.ErrClosed):
		// Closed under the write: the job's main process ended.
		return n, InputNotRunning
	case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
		return n, fmt.Sprintf("write the job's stdin: %v", err)
	case n < len(q.data):
		return n, InputBackpressure
	}
	if q.eof {
		r.closeStdin(false)
	}
	return n, ""
}

// writeNow writes what the pipe takes now without waiting (a deadline
// already passed would refuse even a pipe with room).
func writeNow(w *os.File, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	rc, err := w.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		for n < len(b) {
			m, err := unix.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return
			}
			if err != nil {
				werr = err
				return
			}
		}
	})
	if cerr != nil {
		return n, cerr
	}
	return n, werr
}

// endStdin is closeStdin at the end of the job's main process, and
// waits until an input being written is answered: its ack goes out before
// the exit does, so the server hears what the pipe took (an eof that
// ended the job, say) rather than only that the job ended.
func (r *Runner) endStdin() {
	r.closeStdin(true)
	r.stdinBusy.Lock()
	r.stdinBusy.Unlock()
}

// closeStdin closes the runner's end of the pipe: the job reads end of
// file. ended: the job's main process is gone, and input is refused as
// to a job that is not running from now on.
func (r *Runner) closeStdin(ended bool) {
	r.mu.Lock()
	w := r.stdinW
	r.stdinW = nil
	if ended {
		r.stdinEnded = true
	}
	r.mu.Unlock()
	if w != nil {
		w.Close()
	}
}
