package proto

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// saidFrames is a Conn writing to w that has read a message of a peer
// that reads frames.
func saidFrames(t *testing.T, w *byteStream) *Conn {
	t.Helper()
	w.r = bytes.NewReader([]byte(`{"t":"running","frames":true}` + "\n"))
	c := NewConn(w)
	if m, err := c.Recv(); err != nil || !m.Frames {
		t.Fatalf("recv: %+v %v", m, err)
	}
	return c
}

// TestDataGoesAsAFrameOnceThePeerSaysItReadsThem: before the peer said
// it reads frames, a message with Data is a JSON line (base64); after,
// a frame, read back byte for byte with every other field, next to JSON
// lines; Release gives its buffer back and empties Data.
func TestDataGoesAsAFrameOnceThePeerSaysItReadsThem(t *testing.T) {
	data := make([]byte, 300<<10) // past dataStep: the buffer grows
	for i := range data {
		data[i] = byte(i * 7)
	}
	code := 3
	m := &Msg{T: TInput, ID: 9, Data: data, EOF: true, Block: true, ExitCode: &code, Spec: RawJSON(`{"a":1}`)}

	before := &byteStream{r: bytes.NewReader(nil)}
	if err := NewConn(before).Send(m); err != nil {
		t.Fatal(err)
	}
	if b := before.w.Bytes(); b[0] != '{' || !bytes.Contains(b, []byte(`"data":"`)) {
		t.Fatalf("to a peer that did not say it reads frames: %.40q, want a JSON line with base64 data", b)
	}

	w := &byteStream{}
	c := saidFrames(t, w)
	if !c.PeerReadsFrames() {
		t.Fatal("PeerReadsFrames is false after the peer said so")
	}
	for _, msg := range []*Msg{m, {T: TExit, Status: "exited"}, {T: TAck, ID: 2, Data: []byte{0}}} {
		if err := c.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	wire := w.w.Bytes()
	if wire[0] != frameMark || bytes.Contains(wire[:1<<10], []byte(`"data"`)) {
		t.Fatalf("to a peer that reads frames: %.60q, want a frame", wire)
	}
	r := NewConn(&byteStream{r: bytes.NewReader(wire)})
	got, err := r.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, data) || got.ID != 9 || !got.EOF || !got.Block || got.ExitCode == nil || *got.ExitCode != 3 || string(got.Spec) != `{"a":1}` {
		t.Fatalf("frame read back as %+v (%d data bytes)", got, len(got.Data))
	}
	if got.buf == nil {
		t.Fatal("a long Data was not read into a pooled buffer")
	}
	got.Release()
	if got.Data != nil || got.buf != nil {
		t.Fatal("Release left Data or its buffer")
	}
	if m2, err := r.Recv(); err != nil || m2.T != TExit || m2.Status != "exited" {
		t.Fatalf("the JSON line after the frame: %+v %v", m2, err)
	}
	if m3, err := r.Recv(); err != nil || !bytes.Equal(m3.Data, []byte{0}) {
		t.Fatalf("a one-byte frame: %+v %v", m3, err)
	}
	if _, err := r.Recv(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// TestBadFramesAreRefused: a frame whose lengths pass the cap (the
// hello's, before a connection proved its key, too), whose header is not
// the line it says or carries data of its own, or that ends early.
func TestBadFramesAreRefused(t *testing.T) {
	hdr := `{"t":"input"}` + "\n"
	cases := []struct {
		name string
		wire []byte
		max  int
		want string
	}{
		{"longer than the cap", frameBytes(hdr, strings.Repeat("x", 100)), 64, "longer than 64 bytes"},
		{"past a hello's cap", frameBytes(`{"t":"hello","key":"k"}`+"\n", strings.Repeat("x", MaxHello)), MaxHello, "longer than"},
		{"claims past the cap", append(frameBytes(hdr, "")[:5], 0xff, 0xff, 0xff, 0xff), 0, "longer than"},
		{"no header", frameBytes("", "abc"), 0, "no header"},
		{"header length wrong", append(frameBytes(hdr, "abc")[:1], append([]byte{0, 0, 0, 5, 0, 0, 0, 3}, hdr+"abc"...)...), 0, "its header says 5 bytes"},
		{"data in the header", frameBytes(`{"t":"input","data":"eA=="}`+"\n", "abc"), 0, "no data"},
		{"not JSON", frameBytes("nope\n", "abc"), 0, "decode control frame"},
		{"data cut short", frameBytes(hdr, strings.Repeat("x", 100))[:9+len(hdr)+50], 0, io.ErrUnexpectedEOF.Error()},
		{"prefix cut short", frameBytes(hdr, "abc")[:4], 0, io.ErrUnexpectedEOF.Error()},
		{"header cut short", frameBytes(hdr, "abc")[:12], 0, io.ErrUnexpectedEOF.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConn(&byteStream{r: bytes.NewReader(tc.wire)})
			if tc.max > 0 {
				c.SetMaxLine(tc.max)
			}
			m, err := c.Recv()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Recv = %+v, %v; want an error saying %q", m, err, tc.want)
			}
		})
	}
}

// TestFrameDataFollowsTheBytes: a frame that claims the most Data there
// may be but ends after a few bytes costs memory for what came, not for
// the claim.
func TestFrameDataFollowsTheBytes(t *testing.T) {
	wire := frameBytes(`{"t":"input"}`+"\n", strings.Repeat("x", maxLine-100))[:9+14+1000]
	c := NewConn(&byteStream{r: bytes.NewReader(wire)})
	before := heapAllocs()
	_, err := c.Recv()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Recv = %v, want io.ErrUnexpectedEOF", err)
	}
	if a := heapAllocs() - before; a > 1<<20 {
		t.Fatalf("a frame claiming %d bytes that sent 1000 allocated %d bytes", maxLine-100, a)
	}
}

// TestDataBuffersFitTheirClasses: every length gets a buffer at least as
// long, pooled in the class of its capacity, from the smallest pooled
// length to the largest; shorter and longer ones are made apart.
func TestDataBuffersFitTheirClasses(t *testing.T) {
	for _, n := range []int{1, minPooledData / 2, minPooledData/2 + 1, minPooledData, minPooledData + 1, 64 << 10, 1<<20 - 1, 1 << 20, maxPooledData, maxPooledData + 1} {
		d, p := getData(n)
		if len(d) != n {
			t.Fatalf("getData(%d) is %d long", n, len(d))
		}
		pooled := n > minPooledData/2 && n <= maxPooledData
		if pooled != (p != nil) {
			t.Fatalf("getData(%d): pooled %v", n, p != nil)
		}
		if p != nil {
			if cl := dataClass(cap(*p)); cl < 0 || cl >= len(dataPools) || cap(*p) != minPooledData<<cl || cap(*p) < n {
				t.Fatalf("getData(%d): a buffer of %d bytes, class %d of %d", n, cap(*p), cl, len(dataPools))
			}
			putData(p)
		}
	}
}
