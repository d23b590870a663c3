// Package proto is the control protocol between shellctl serve and one
// shellctl-runner: newline-delimited JSON messages over a Unix stream socket.
// The server gets one end of a socketpair when it starts the runner, and a
// restarted server reconnects through the job directory's control socket.
//
// A message with Data (input, raw terminal output) goes as a frame to a
// peer that reads frames: its bytes as they are, not base64 in the JSON
// (frames.go).
package proto

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Message types.
const (
	// runner → server
	TState   = "state"   // full state: answer to hello, and first message on the inherited channel
	TRunning = "running" // the job's process runs (pid, started, isolation)
	TOutput  = "out"     // output.log grew to Size
	TExit    = "exit"    // the job ended and its output is drained
	TAck     = "ack"     // answer to a request with the same ID

	// server → runner
	THello     = "hello"
	TInput     = "input"
	TTerminate = "terminate"
	TResize    = "resize"
	TSignal    = "signal"   // send Signal to Target ("foreground", "group", "tree")
	TExitAck   = "exit_ack" // the server recorded the exit: the runner may leave
	TAssign    = "assign"   // to a pooled runner: run the job of Spec

	// screen (pty jobs): the ack carries Screen, the JSON of the screen.
	TScreen = "screen" // the screen now, with Scrollback rows of scrollback
	TKeys   = "keys"   // type Keys, then the screen once the terminal is quiet

	// input-wait (spec/extended-api.md §4)
	// runner → server: the job's foreground started or stopped waiting
	// to read its terminal (Waiting, InputSeq; Size: output on disk then).
	TInputWait = "input_wait"
	// server → runner: look now; the ack carries Waiting and InputSeq.
	TInputWaitQuery = "input_wait_query"

	// attach (spec/extended-api.md §8), pty jobs. server → runner: the
	// terminal's raw bytes from RawSize (the ack's Data, at most 64 KiB,
	// and RawSize where they start; Err "raw_gone" once the ring no longer
	// holds them), or with Redraw the bytes that redraw the screen now
	// (the ack's RawSize: the raw offset the screen stands at). The first
	// raw request starts the runner's raw ring; from then on out and state
	// carry RawSize, the terminal's raw bytes read so far. While raw
	// requests come (an attach), an out whose raw growth is small carries
	// it in Data: exactly the raw bytes from RawSize-len(Data) to RawSize.
	TRaw = "raw"
)

// Msg is every message; only the fields of its type are set.
type Msg struct {
	T  string `json:"t"`
	ID int64  `json:"id,omitempty"`

	// state / running / out / exit
	Status    string `json:"status,omitempty"`
	PID       int    `json:"pid,omitempty"`
	StartedAt int64  `json:"started_at,omitempty"` // unix ns
	Isolation string `json:"isolation,omitempty"`  // JSON of what was applied
	Cgroup    string `json:"cgroup,omitempty"`     // the job's cgroup directory, when it has one
	Size      int64  `json:"size,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Signal    int    `json:"signal,omitempty"`
	Reason    string `json:"reason,omitempty"`
	EndedAt   int64  `json:"ended_at,omitempty"` // unix ns
	Done      bool   `json:"done,omitempty"`
	Pgid      int    `json:"pgid,omitempty"`   // the job's process group
	Limits    string `json:"limits,omitempty"` // JSON of the limits the runner applied
	Usage     string `json:"usage,omitempty"`  // exit: JSON of the job's tree's resource usage

	// stream (issue 14 §1): stderr.log grew to ErrSize (stdio jobs; on
	// out and state), so a stream of the stderr channel is woken too.
	ErrSize int64 `json:"err_size,omitempty"`

	// input / terminate / resize; out: raw bytes inlined (see TRaw)
	Data  []byte  `json:"data,omitempty"`
	Grace float64 `json:"grace,omitempty"` // seconds
	Cols  int     `json:"cols,omitempty"`
	Rows  int     `json:"rows,omitempty"`
	// signal: which processes get Signal.
	Target string `json:"target,omitempty"`

	// assign: the job's spec (runner.Spec as JSON).
	Spec RawJSON `json:"spec,omitempty"`

	// hello: the job's control key. A connection through the socket file
	// must prove it may steer the runner: the key is in the job's spec,
	// which only the server can read (the job's Landlock domain denies the
	// state dir). The inherited socketpair needs no key.
	Key string `json:"key,omitempty"`

	// ack
	Err string `json:"err,omitempty"`

	// screen: Keys (names or text) to type; Scrollback rows asked for;
	// QuietMS and TimeoutMS of a keys request's settling (0: defaults);
	// Screen in the ack.
	Keys       []string `json:"keys,omitempty"`
	Scrollback int      `json:"scrollback,omitempty"`
	QuietMS    int      `json:"quiet_ms,omitempty"`
	TimeoutMS  int      `json:"timeout_ms,omitempty"`
	Screen     RawJSON  `json:"screen,omitempty"`

	// input-wait (state, input_wait, the ack of input_wait_query):
	// whether the terminal's foreground process is blocked reading it, and
	// InputSeq, how many inputs the runner had written to the terminal
	// when that was seen. The ack of an input carries the input's own
	// number in InputSeq: a job counts as waiting once a state with at
	// least that number says so.
	Waiting  bool  `json:"waiting,omitempty"`
	InputSeq int64 `json:"input_seq,omitempty"`

	// input to a stdin pipe (spec/extended-api.md §8): EOF closes the
	// job's stdin after Data; TimeoutMS bounds the wait for a job that
	// does not read; the ack carries Taken, the bytes the pipe took.
	EOF   bool  `json:"eof,omitempty"`
	Taken int64 `json:"taken,omitempty"`
	// attach (raw): see TRaw.
	RawSize int64 `json:"raw_size,omitempty"`
	Redraw  bool  `json:"redraw,omitempty"`
	// Block (input, attach): wait for room in the terminal's input
	// queue, acknowledging once queued, rather than refuse a full queue:
	// the attached client is held back instead of losing bytes.
	Block bool `json:"block,omitempty"`

	// Frames, in any message: its sender reads frames (frames.go), so
	// messages with Data may go to it as frames from then on. The server
	// says so in hello and assign, the runner in state.
	Frames bool `json:"frames,omitempty"`

	// buf is the pooled buffer Data was read into (a frame's), given
	// back by Release.
	buf *[]byte
}

// Stream is a connected socket: a *net.UnixConn on the server's side, an
// *os.File over the descriptor on the runner's (which keeps the net
// package, and its start-up cost, out of every runner).
type Stream interface {
	io.ReadWriteCloser
	SetDeadline(time.Time) error
}

// Conn reads and writes messages; Send is safe for concurrent use.
type Conn struct {
	c Stream
	// rbuf[rpos:rend] was read and not yet taken. rbuf is the
	// connection's own small buffer, or while a long message is read
	// one of longBufs (rlong), given back once no more than a small one
	// is left in it.
	rbuf       []byte
	rpos, rend int
	rsmall     []byte
	rlong      *[]byte
	wmu        sync.Mutex
	wbuf       []byte // Send's buffer (fastjson.go), under wmu
	max        int    // the longest message Recv takes (SetMaxLine)
	// peerFrames: the peer said it reads frames (Msg.Frames in a
	// message Recv took); messages with Data go to it as frames.
	peerFrames atomic.Bool
}

// maxLine bounds one message. The longest are an assign, whose spec holds
// the job's environment (a run request is at most 2 MiB, and JSON escaping
// can grow a string up to six times), and an input of at most 1 MiB, which
// base64 grows by a third.
const maxLine = 16 << 20

// readBuffer holds a typical message whole; the rare long one (input)
// is assembled past it. Small, since every runner holds one per connection.
const readBuffer = 4 << 10

// NewConn wraps a connected socket.
func NewConn(c Stream) *Conn {
	b := make([]byte, readBuffer)
	return &Conn{c: c, rbuf: b, rsmall: b, max: maxLine}
}

// MaxHello is the most a runner reads from a connection through its
// socket file before the connection has proven it holds the job's key: a
// hello is well under it, and anything that may connect to the socket
// (a job, were it ever to reach it) can make the runner hold no more.
const MaxHello = 4 << 10

// SetMaxLine sets the longest message Recv takes (at most the protocol's
// own bound); a longer one is an error before more of it is held.
func (c *Conn) SetMaxLine(n int) { c.max = min(n, maxLine) }

// Send writes one message.
func (c *Conn) Send(m *Msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.write(m)
}

// write writes m, under wmu. A long message (input, raw output, a
// screen) is made in a buffer of longBufs, not kept by the connection.
func (c *Conn) write(m *Msg) error {
	buf := c.wbuf[:0]
	var long *[]byte
	frame := len(m.Data) > 0 && c.peerFrames.Load()
	n := sizeHint(m)
	if frame {
		n = framePrefix + len(m.Data) + len(m.Spec) + len(m.Screen) + 1024
	}
	if n > readBuffer {
		long = getLong(n)
		buf = *long
	}
	var b []byte
	var err error
	if frame {
		b, err = appendFrame(buf, m)
	} else {
		b, err = appendMsg(buf, m)
	}
	if err == nil {
		_, err = c.c.Write(b)
	}
	if long != nil {
		putLong(long, b)
	} else if cap(b) <= readBuffer {
		c.wbuf = b // one that grew past the hint is not kept
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", m.T, err)
	}
	return nil
}

// sizeHint is about how long m is written: its long fields, and room
// for the rest.
func sizeHint(m *Msg) int {
	return base64.StdEncoding.EncodedLen(len(m.Data)) + len(m.Spec) + len(m.Screen) + 1024
}

// longBufs holds the buffers of long messages between uses, written and
// read alike: a stream of input or raw output (hundreds of MB/s through
// attach) would otherwise allocate, clear and let go of about three
// times its size per message on each side, and the memory given back to
// the system and faulted in again was most of what the stream cost. A
// sync.Pool lets the buffers go when the stream stops (at a collection).
var longBufs sync.Pool

// maxLongKept: a buffer longer than this is not kept for reuse.
const maxLongKept = 8 << 20

// getLong is an empty buffer of longBufs with room for n bytes.
func getLong(n int) *[]byte {
	if p, ok := longBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, 0, n)
	return &b
}

// putLong gives p back for reuse, as b (what was made in it, perhaps
// grown past it).
func putLong(p *[]byte, b []byte) {
	if cap(b) <= maxLongKept {
		*p = b[:0]
		longBufs.Put(p)
	}
}

// Recv reads one message; io.EOF when the peer closed between messages,
// io.ErrUnexpectedEOF when it closed inside one.
func (c *Conn) Recv() (*Msg, error) {
	if err := c.fill(1); err != nil {
		return nil, err
	}
	if c.rbuf[c.rpos] == frameMark {
		return c.recvFrame()
	}
	line, err := c.readLine()
	if err != nil {
		return nil, err
	}
	m := new(Msg)
	ok := decodeMsg(line, m) // copies out what it takes
	c.shrink()
	if !ok {
		return nil, fmt.Errorf("decode control message (%d bytes): not a JSON object with the protocol's fields", len(line))
	}
	if m.Frames {
		c.peerFrames.Store(true)
	}
	return m, nil
}

// fill reads until rbuf holds at least n (at most len(rsmall)) bytes
// not yet taken: io.EOF when the peer closed with none held,
// io.ErrUnexpectedEOF when it closed with some.
func (c *Conn) fill(n int) error {
	for c.rend-c.rpos < n {
		if len(c.rbuf)-c.rpos < n {
			c.rend = copy(c.rbuf, c.rbuf[c.rpos:c.rend])
			c.rpos = 0
		}
		k, err := c.c.Read(c.rbuf[c.rend:])
		c.rend += k
		if k > 0 {
			continue
		}
		if err == io.EOF && c.rend > c.rpos {
			return io.ErrUnexpectedEOF
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	return nil
}

// readLine is the next line, newline included, in rbuf (until the next
// read). A line longer than the reader's buffer is read into a longer
// one in reads as long as it (a 64 KiB input took twenty reads of 4 KiB),
// which doubles, never past the cap: a long line costs at most twice its
// length in all.
func (c *Conn) readLine() ([]byte, error) {
	scanned := 0 // rbuf[rpos:rpos+scanned] holds no newline
	for {
		if i := bytes.IndexByte(c.rbuf[c.rpos+scanned:c.rend], '\n'); i >= 0 {
			end := c.rpos + scanned + i + 1
			if end-c.rpos > c.max {
				return nil, fmt.Errorf("control message longer than %d bytes", c.max)
			}
			line := c.rbuf[c.rpos:end]
			c.rpos = end
			return line, nil
		}
		scanned = c.rend - c.rpos
		if scanned >= c.max { // and its newline still to come
			return nil, fmt.Errorf("control message longer than %d bytes", c.max)
		}
		if c.rend == len(c.rbuf) {
			if c.rpos > 0 {
				c.rend = copy(c.rbuf, c.rbuf[c.rpos:c.rend])
				c.rpos = 0
			} else {
				c.grow(min(2*len(c.rbuf), c.max))
			}
		}
		n, err := c.c.Read(c.rbuf[c.rend:])
		c.rend += n
		if n > 0 {
			continue // an error comes again with the next read
		}
		if err == io.EOF && c.rend > c.rpos {
			return nil, io.ErrUnexpectedEOF
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, err
	}
}

// grow makes rbuf n long (a buffer of longBufs), keeping what it holds.
func (c *Conn) grow(n int) {
	p := getLong(n)
	b := (*p)[:cap(*p)]
	c.rend = copy(b, c.rbuf[c.rpos:c.rend])
	c.rpos = 0
	if c.rlong != nil {
		putLong(c.rlong, c.rbuf)
	}
	c.rbuf, c.rlong = b, p
}

// shrink gives a long buffer back once what is left in it fits the
// connection's own.
func (c *Conn) shrink() {
	if c.rlong == nil || c.rend-c.rpos > len(c.rsmall) {
		return
	}
	c.rend = copy(c.rsmall, c.rbuf[c.rpos:c.rend])
	c.rpos = 0
	putLong(c.rlong, c.rbuf)
	c.rbuf, c.rlong = c.rsmall, nil
}

// SetDeadline sets the socket's read and write deadline.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }
