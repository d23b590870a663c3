package runner

// The control channel: who may steer the runner (the inherited channel,
// and one connection at a time through the socket file once it proved the
// job's key), and what it may ask (input, resize, terminate, state).

import (
	"strconv"
	"time"

	"github.com/shellctl/shellctl/internal/jobstate"
	"github.com/shellctl/shellctl/internal/runner/proto"
)

// accept admits connections through the socket file one at a time: a
// flood of connections costs the runner one small read buffer and one
// admitTimeout at a time, never memory that grows with their number.
func (r *Runner) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.admit(c)
	}
}

// sameKey compares two keys in time that depends only on their length.
func sameKey(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := 0; i < len(a); i++ {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// admitTimeout bounds how long an accepted connection may take to say
// hello (a server's hello is one write away when it connects).
const admitTimeout = 2 * time.Second

// admit lets a connection through the socket file in once its first message
// is a hello with the job's control key; anything else is closed unanswered.
//
// At most proto.MaxHello bytes are read before the key is proven. One
// admitted connection through the socket file is kept at a time (a
// restarted server's): a newer one replaces it.
func (r *Runner) admit(c *proto.Conn) {
	c.SetMaxLine(proto.MaxHello)
	c.SetDeadline(time.Now().Add(admitTimeout))
	m, err := c.Recv()
	c.SetDeadline(time.Time{})
	if err != nil || m.T != proto.THello || r.spec.ControlKey == "" ||
		!sameKey(m.Key, r.spec.ControlKey) {
		c.Close()
		return
	}
	c.SetMaxLine(1 << 62)
	if err := c.Send(r.state()); err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	old := r.sockConn
	r.sockConn = c
	r.mu.Unlock()
	if old != nil {
		r.dropConn(old)
	}
	r.addConn(c)
}

func (r *Runner) addConn(c *proto.Conn) {
	r.mu.Lock()
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	go r.serve(c)
}

func (r *Runner) dropConn(c *proto.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	if r.sockConn == c {
		r.sockConn = nil
	}
	r.mu.Unlock()
	c.Close()
}

func (r *Runner) broadcast(m *proto.Msg) {
	r.mu.Lock()
	conns := make([]*proto.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		if err := c.Send(m); err != nil {
			r.dropConn(c)
		}
	}
}

func (r *Runner) state() *proto.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exit != nil {
		m := *r.exit
		m.T, m.Frames = proto.TState, true
		m.PID = r.pid
		m.StartedAt = unixNano(r.startedAt)
		m.Isolation = r.isolation
		m.Size = r.size.Load()
		m.ErrSize = r.errSize.Load()
		m.RawSize = r.rawSize.Load()
		m.Pgid, m.Limits = r.pgid, r.limits
		return &m
	}
	st := jobstate.StatusStarting
	if r.pid != 0 {
		st = jobstate.StatusRunning
	}
	m := &proto.Msg{T: proto.TState, Frames: true, Status: st, PID: r.pid, StartedAt: unixNano(r.startedAt), Isolation: r.isolation, Size: r.size.Load(), Cgroup: r.cgroupPath,
		Pgid: r.pgid, Limits: r.limits, ErrSize: r.errSize.Load(), RawSize: r.rawSize.Load()}
	r.iw.fill(m) // input-wait, for a server that connects later
	return m
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// serve answers one server connection.
func (r *Runner) serve(c *proto.Conn) {
	defer r.dropConn(c)
	for {
		m, err := c.Recv()
		if err != nil {
			return
		}
		switch m.T {
		case proto.THello:
			if err := c.Send(r.state()); err != nil {
				return
			}
		case proto.TInput:
			if r.spec.Mode != "pty" && r.stdinCh != nil {
				// stdin.go: the writer acks once the pipe took the bytes.
				if why, ok := r.queueStdin(c, m); !ok {
					m.Release()
					c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: why})
				}
				continue
			}
			if m.EOF && r.spec.Mode == "pty" {
				// A terminal's end of file is its EOF character (^D),
				// which ends a read at the start of a line.
				m.Data = append(m.Data, 0x04)
			}
			if m.Block { // attach (raw.go): held until queued
				go func() {
					errText, seq := r.inputBlocking(termInput{m.Data, m})
					c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: errText, InputSeq: seq})
				}()
				continue
			}
			errText, seq := r.input(termInput{m.Data, m})
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: errText, InputSeq: seq})
		case proto.TResize:
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: r.resize(m.Cols, m.Rows)})
			r.iw.event()
		case proto.TSignal:
			select {
			case <-r.startDone:
				c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: r.signal(m.Signal, m.Target)})
				r.iw.event()
			default:
				// A signal that comes while the job starts is for the
				// job: it waits for its process (a client that was
				// answered "running" soon after the start, as a run's
				// short timeout does, may signal before it exists).
				go func(m *proto.Msg) {
					<-r.startDone
					c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: r.signal(m.Signal, m.Target)})
					r.iw.event()
				}(m)
			}
		case proto.TInputWaitQuery:
			w, seq := r.iw.query()
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Waiting: w, InputSeq: seq})
		case proto.TTerminate:
			id := m.ID
			grace := time.Duration(m.Grace * float64(time.Second))
			// A forced delete says so: the record tells the two apart.
			reason := ReasonTerminate
			if m.Reason == ReasonDelete {
				reason = ReasonDelete
			}
			go func() {
				r.terminate(reason, grace)
				<-r.done
				c.Send(&proto.Msg{T: proto.TAck, ID: id})
			}()
		case proto.TScreen: // screen.go
			go func() {
				b, why := r.screenOf(m.Scrollback)
				c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Screen: b, Err: why})
			}()
		case proto.TRaw: // raw.go
			go func() { c.Send(r.rawRequest(m)) }()
		case proto.TKeys:
			go func() { c.Send(r.keys(m)) }()
		case proto.TExitAck:
			r.ackOnce.Do(func() { close(r.exitAck) })
		default:
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: "unknown message " + strconv.Quote(m.T)})
		}
	}
}

// input queues text for the terminal. Writing happens on its own goroutine
// so a job that does not read its terminal cannot block the control channel.
// The input's number (input-wait) goes back with the ack.
func (r *Runner) input(in termInput) (string, int64) {
	if r.spec.Mode != "pty" {
		in.release()
		return "input_unsupported", 0
	}
	r.mu.Lock()
	done := r.exit != nil
	r.mu.Unlock()
	if done {
		in.release()
		return "job_not_running", 0
	}
	seq, ok := r.iw.queue(r.inputCh, in)
	if !ok {
		in.release()
		return "input queue full: the job is not reading its terminal", 0
	}
	return "", seq
}

// termInput is input for the terminal: its bytes, and the message they
// came in, whose buffer is given back once they are written (nil: bytes
// of the runner's own, such as typed keys).
type termInput struct {
	b   []byte
	msg *proto.Msg
}

func (in termInput) release() {
	if in.msg != nil {
		in.msg.Release()
	}
}
