package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// byteStream is a Stream over fixed bytes (reads) and a buffer (writes).
type byteStream struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (s *byteStream) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *byteStream) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s *byteStream) Close() error                { return nil }
func (s *byteStream) SetDeadline(time.Time) error { return nil }

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// heapAllocs is the total of bytes allocated on the heap so far.
func heapAllocs() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// FuzzRecv feeds arbitrary bytes to the control protocol's message reader:
// it never panics; every message it returns survives a Send/Recv round trip
// unchanged; it ends with io.EOF exactly when the input ends on a message
// boundary (io.ErrUnexpectedEOF otherwise); and what one Recv allocates is
// bounded by the bytes it consumed, never by anything the input claims.
func FuzzRecv(f *testing.F) {
	f.Add([]byte(`{"t":"state","status":"running","pid":42,"size":7}` + "\n"))
	f.Add([]byte(`{"t":"input","id":3,"data":"aGVsbG8K"}` + "\n" + `{"t":"exit","exit_code":0}` + "\n"))
	f.Add([]byte(`{"t":"assign","spec":{"id":"x","env":["A=1"]}}` + "\n" + `{"t":"out"`))
	f.Add([]byte("\n\n{}\nnot json\n"))
	// The first decode builds encoding/json's caches for Msg: not the cost
	// of a message.
	warm := NewConn(&byteStream{r: bytes.NewReader([]byte(`{"t":"exit","exit_code":1,"data":"eA==","spec":{}}` + "\n"))})
	if _, err := warm.Recv(); err != nil {
		f.Fatal(err)
	}
	f.Add(frameBytes(`{"t":"input","id":3}`+"\n", "\x00\xffhello"))
	f.Add(append(frameBytes(`{"t":"out","size":9}`+"\n", "abc"), `{"t":"exit"}`+"\n"...))
	f.Add(frameBytes(`{"t":"input"}`+"\n", strings.Repeat("z", 70000))[:5000])
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		c := NewConn(&byteStream{r: r})
		// pos is how much of data the messages returned so far took.
		pos := func() int { return len(data) - r.Len() - (c.rend - c.rpos) }
		for {
			start := pos()
			before := heapAllocs()
			m, err := c.Recv()
			allocated := heapAllocs() - before
			rest := data[start:]
			took := pos() - start
			// A message may be read whole, decoded into every field (data
			// and spec copied), plus a fixed slack (the fuzzing engine's
			// own allocations are counted too). What a frame's header
			// claims is not allocated ahead of its bytes.
			if limit := uint64(16*(took+bytes.IndexByte(rest, '\n')+1) + 1<<20); allocated > limit {
				t.Fatalf("Recv of %d bytes allocated %d bytes (limit %d)", took, allocated, limit)
			}
			frame := len(rest) > 0 && rest[0] == frameMark
			switch {
			case err == nil:
				if !frame && rest[took-1] != '\n' {
					t.Fatalf("a message was returned from an unterminated line %q", rest[:took])
				}
				roundTrip(t, m)
				continue
			case errors.Is(err, io.EOF):
				if len(rest) != 0 {
					t.Fatalf("io.EOF with %d bytes left: %q", len(rest), rest)
				}
			case errors.Is(err, io.ErrUnexpectedEOF):
				if len(rest) == 0 || !frame && bytes.IndexByte(rest, '\n') >= 0 {
					t.Fatalf("io.ErrUnexpectedEOF on %q", rest)
				}
			case !frame && strings.HasPrefix(err.Error(), "decode control message"):
				// A line that is not a message: consumed, the next can be read.
				continue
			case frame && strings.Contains(err.Error(), "control frame"):
				// A frame that is not one ends the connection.
			default:
				t.Fatalf("unexpected error %v on %q", err, rest[:min(len(rest), 200)])
			}
			return
		}
	})
}

// frameBytes is a frame of header (a JSON line) and data.
func frameBytes(header, data string) []byte {
	b := []byte{frameMark, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(header)))
	binary.BigEndian.PutUint32(b[5:], uint32(len(data)))
	return append(append(b, header...), data...)
}

// roundTrip: sending m and reading it back gives the same message.
func roundTrip(t *testing.T, m *Msg) {
	t.Helper()
	s := &byteStream{r: bytes.NewReader(nil)}
	if err := NewConn(s).Send(m); err != nil {
		t.Fatalf("Send of a received message: %v", err)
	}
	want := s.w.String()
	back, err := NewConn(&byteStream{r: bytes.NewReader(s.w.Bytes())}).Recv()
	if err != nil {
		t.Fatalf("Recv of a sent message %q: %v", want, err)
	}
	// Compared through encoding/json on both sides: a raw spec or screen
	// is sent as it came, and encoding/json escapes it its own way.
	got, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(orig) {
		t.Fatalf("round trip changed the message:\n sent %s got  %s", want, got)
	}
}

// endless reads as an endless line of x without a newline.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += int64(len(p))
	return len(p), nil
}
func (e *endless) Write(p []byte) (int, error) { return len(p), nil }
func (e *endless) Close() error                { return nil }
func (e *endless) SetDeadline(time.Time) error { return nil }

// A line that never ends is refused once it passes the cap: Recv reads
// little more than the cap, and never holds a buffer larger than it (a
// doubling buffer allocates at most twice the cap in all).
func TestRecvEndlessLineStopsAtTheCap(t *testing.T) {
	src := &endless{}
	c := NewConn(src)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err := c.Recv()
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc - before
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("Recv of an endless line: %v, want the over-cap error", err)
	}
	if src.n > maxLine+readBuffer {
		t.Errorf("read %d bytes of an endless line; the cap is %d", src.n, maxLine)
	}
	if allocated > 2*maxLine+1<<20 {
		t.Errorf("allocated %d MiB for a line refused at the cap of %d MiB", allocated>>20, maxLine>>20)
	}
	t.Logf("read %d bytes, allocated %d bytes", src.n, allocated)
}

// A message of exactly the cap is still read.
func TestRecvMessageAtTheCap(t *testing.T) {
	head := `{"t":"out","reason":"`
	tail := "\"}\n"
	line := head + strings.Repeat("r", maxLine-len(head)-len(tail)) + tail
	c := NewConn(&byteStream{r: bytes.NewReader([]byte(line))})
	m, err := c.Recv()
	if err != nil || len(m.Reason) != maxLine-len(head)-len(tail) {
		t.Fatalf("message of %d bytes (the cap): %v", len(line), err)
	}
	c = NewConn(&byteStream{r: bytes.NewReader([]byte(head + "r" + line[len(head):]))})
	if _, err := c.Recv(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("message one byte over the cap: %v", err)
	}
}
