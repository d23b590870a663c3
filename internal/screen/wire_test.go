package screen

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Frames read back as written; one over the bound, or cut short, is an
// error that says so, not a huge allocation or a silent end.
func TestFrames(t *testing.T) {
	var b []byte
	b = AppendFrame(b, FrameWrite, []byte("hello"))
	b = AppendInts(b, FrameResize, 80, 24)
	r := bytes.NewReader(b)
	k, p, _, err := ReadFrame(r, nil, MaxAnswer)
	if err != nil || k != FrameWrite || string(p) != "hello" {
		t.Fatalf("first frame: %q %q %v", k, p, err)
	}
	k, p, _, err = ReadFrame(r, nil, MaxAnswer)
	if v, verr := Ints(k, p, 2); err != nil || k != FrameResize || verr != nil || v[0] != 80 || v[1] != 24 {
		t.Fatalf("second frame: %q %v %v %v", k, v, err, verr)
	}
	if _, _, _, err := ReadFrame(r, nil, MaxAnswer); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	big := AppendFrame(nil, FrameSnapshot, make([]byte, 100))
	if _, _, _, err := ReadFrame(bytes.NewReader(big), nil, 99); err == nil || !strings.Contains(err.Error(), "over the bound") {
		t.Fatalf("a frame over the bound: %v", err)
	}
	if _, _, _, err := ReadFrame(bytes.NewReader(big[:50]), nil, MaxAnswer); err != io.ErrUnexpectedEOF {
		t.Fatalf("a frame cut short: %v", err)
	}
	if _, err := Ints(FrameResize, []byte{1, 2, 3}, 2); err == nil {
		t.Fatal("a resize of 3 bytes taken")
	}
}
