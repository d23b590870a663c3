package runner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// wireTap is a connection that keeps every byte read and written.
type wireTap struct {
	*net.UnixConn
	mu          sync.Mutex
	read, wrote []byte
}

func (w *wireTap) Read(p []byte) (int, error) {
	n, err := w.UnixConn.Read(p)
	w.mu.Lock()
	w.read = append(w.read, p[:n]...)
	w.mu.Unlock()
	return n, err
}

func (w *wireTap) Write(p []byte) (int, error) {
	n, err := w.UnixConn.Write(p)
	w.mu.Lock()
	w.wrote = append(w.wrote, p[:n]...)
	w.mu.Unlock()
	return n, err
}

// messageKinds splits a control stream into its messages and counts the
// frames among them, and the JSON lines that carry "data" (base64).
func messageKinds(t *testing.T, b []byte) (frames, base64Lines int) {
	t.Helper()
	for len(b) > 0 {
		if b[0] == 0 {
			if len(b) < 9 {
				t.Fatalf("a frame cut short: %q", b)
			}
			n := 9 + int(binary.BigEndian.Uint32(b[1:])) + int(binary.BigEndian.Uint32(b[5:]))
			frames++
			b = b[min(n, len(b)):]
			continue
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break // the rest of a line still being read
		}
		if bytes.Contains(b[:i], []byte(`"data":`)) {
			base64Lines++
		}
		b = b[i+1:]
	}
	return frames, base64Lines
}

// rawDriver drives a real runner's terminal as the server's attach does:
// requests answered by acks, the raw bytes read from the runner's ring
// between output events.
type rawDriver struct {
	t    *testing.T
	send func(*proto.Msg) error // how a request goes (default rr.ctl.Send)
	acks chan *proto.Msg
	grew chan int64
	id   int64
	at   int64 // the raw offset read up to
}

func newRawDriver(t *testing.T, rr *realRunner) *rawDriver {
	c := &rawDriver{t: t, send: rr.ctl.Send, acks: make(chan *proto.Msg, 16), grew: make(chan int64, 1024)}
	go func() {
		for {
			m, err := rr.ctl.Recv()
			if err != nil {
				close(c.acks)
				return
			}
			switch m.T {
			case proto.TAck:
				c.acks <- m
			case proto.TOutput, proto.TState, proto.TRunning:
				c.grew <- m.RawSize
			}
		}
	}()
	return c
}

// ask sends m and waits for its ack.
func (c *rawDriver) ask(m *proto.Msg) *proto.Msg {
	c.t.Helper()
	c.id++
	m.ID = c.id
	if err := c.send(m); err != nil {
		c.t.Fatal(err)
	}
	select {
	case a, ok := <-c.acks:
		if !ok || a.ID != c.id {
			c.t.Fatalf("ack of %s: %+v", m.T, a)
		}
		return a
	case <-time.After(20 * time.Second):
		c.t.Fatalf("no ack of %s", m.T)
	}
	return nil
}

// readUntil reads the raw terminal on from where the last read ended
// until what it read holds want.
func (c *rawDriver) readUntil(want []byte) {
	c.t.Helper()
	var got []byte
	for deadline := time.Now().Add(20 * time.Second); !bytes.Contains(got, want); {
		if time.Now().After(deadline) {
			c.t.Fatalf("the job never wrote %q: %q", want, got)
		}
		a := c.ask(&proto.Msg{T: proto.TRaw, RawSize: c.at})
		if a.Err != "" && a.Err != ErrRawGone {
			c.t.Fatalf("raw: %s", a.Err)
		}
		got = append(got, a.Data...)
		c.at = a.RawSize + int64(len(a.Data))
		if len(a.Data) == 0 {
			nextEvent(c.t, c.grew)
		}
	}
}

// nextEvent waits for the runner's next output event.
func nextEvent(t *testing.T, grew <-chan int64) {
	t.Helper()
	select {
	case <-grew:
	case <-time.After(20 * time.Second):
		t.Fatal("no output event in 20 s")
	}
}

// TestFramesOnlyWithAServerThatReadsThem: a runner reads input sent as a
// frame and sends its raw terminal bytes as frames to a server that said
// it reads them (every byte value kept); to a server that did not (one of
// an older build, reconnected to this runner), it writes JSON lines alone,
// the bytes in base64, and still reads what that server sends.
func TestFramesOnlyWithAServerThatReadsThem(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, frames := range []bool{true, false} {
		name := "server reads frames"
		if !frames {
			name = "older server"
		}
		t.Run(name, func(t *testing.T) {
			rr := startRealRunner(t, nil)
			rr.assignAs(frames, "pty", "stty raw -echo; echo ready; exec cat")
			c := newRawDriver(t, rr)
			if !frames {
				// An older server writes JSON lines alone, the bytes in
				// base64 (as encoding/json does).
				c.send = func(m *proto.Msg) error {
					if m.Data == nil {
						return rr.ctl.Send(m)
					}
					line, _ := json.Marshal(m)
					_, err := rr.wire.UnixConn.Write(append(line, '\n'))
					return err
				}
			}
			// The ring starts with the first raw request; "ready" says
			// the terminal is raw.
			c.readUntil([]byte("ready"))
			if a := c.ask(&proto.Msg{T: proto.TInput, Data: all, Block: true}); a.Err != "" {
				t.Fatalf("input: %s", a.Err)
			}
			c.readUntil(all)
			rr.wire.mu.Lock()
			inFrames, inBase64 := messageKinds(t, rr.wire.wrote)
			outFrames, outBase64 := messageKinds(t, rr.wire.read)
			rr.wire.mu.Unlock()
			if !rr.ctl.PeerReadsFrames() {
				t.Error("the runner never said it reads frames")
			}
			if frames && (inFrames == 0 || inBase64 > 0 || outFrames == 0 || outBase64 > 0) {
				t.Errorf("with a server that reads frames: input %d frames and %d base64 lines, output %d frames and %d base64 lines; want frames alone both ways", inFrames, inBase64, outFrames, outBase64)
			}
			if !frames && (outFrames > 0 || outBase64 == 0 || inFrames > 0) {
				t.Errorf("with an older server the runner sent %d frames and %d base64 lines (and was sent %d frames); want base64 lines alone", outFrames, outBase64, inFrames)
			}
		})
	}
}
