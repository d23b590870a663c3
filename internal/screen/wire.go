package screen

// The frames between a runner and its screen process (cmd/shellctl-screen).
//
// The runner writes requests to the process's stdin, the process answers
// on its stdout, one request at a time in order, so an answer always
// follows every byte written before its request. A frame is one kind
// byte, a 4-byte little-endian length, and that many bytes:
//
//	runner → screen
//	  FrameStart    once, first: protocol (4 bytes), cols, rows (4 each)
//	  FrameWrite    bytes the program wrote to its terminal
//	  FrameResize   cols, rows (4 bytes each)
//	  FrameSnapshot scrollback rows asked for (4 bytes): answered
//	  FrameCursor   nothing: answered with one byte, 1 when the program
//	                asked for application cursor keys
//	  FrameRedraw   nothing: answered with the bytes that redraw the
//	                screen now on a terminal of its size (attach)
//	screen → runner
//	  FrameSnapshot the screen as JSON (Snapshot)
//	  FrameCursor   one byte
//	  FrameRedraw   the redraw's bytes
//	  FrameError    why the process cannot go on (it then exits)
//
// End of file on stdin ends the process.

import (
	"encoding/binary"
	"fmt"
	"io"
)

// ProcessArg is the one argument a screen process is started with.
const ProcessArg = "__screen"

// Frame kinds.
const (
	FrameStart    = 'n'
	FrameWrite    = 'w'
	FrameResize   = 'r'
	FrameSnapshot = 's'
	FrameCursor   = 'c'
	FrameRedraw   = 'd'
	FrameError    = 'e'
)

// Protocol is the version of these frames: a runner and a screen process
// from builds that speak different ones refuse each other (FrameError).
const Protocol = 2

// MaxFrame bounds a frame's length: a write is at most what the runner
// feeds at once (64 KiB), an answer at most a screen and its scrollback in
// JSON (MaxAnswer).
const MaxFrame = 64 << 20

// MaxAnswer bounds an answer the runner takes: the largest screen
// (MaxCells cells of up to 4 bytes, each escaped up to 6 times over) and
// its scrollback (ScrollbackBytes, the same) are well under it, and it
// leaves the control message that carries the answer under the
// protocol's 16 MiB line.
const MaxAnswer = 15 << 20

// frameHeader is the size of a frame's kind and length.
const frameHeader = 5

// AppendFrame appends a frame of kind k holding p to b.
func AppendFrame(b []byte, k byte, p []byte) []byte {
	b = append(b, k, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(len(p)))
	return append(b, p...)
}

// AppendInts appends a frame of kind k holding the 4-byte values vs.
func AppendInts(b []byte, k byte, vs ...int) []byte {
	b = append(b, k, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(4*len(vs)))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// ReadFrame reads one frame of at most max bytes from r into buf (grown
// as needed) and returns its kind and payload (which aliases buf). io.EOF: r ended
// between frames; a frame cut short is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte, max uint32) (byte, []byte, []byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.LittleEndian.Uint32(h[1:])
	if n > max {
		return 0, nil, buf, fmt.Errorf("screen frame %q of %d bytes is over the bound of %d: the other side is broken", h[0], n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	p := buf[:n]
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	return h[0], p, buf, nil
}

// Ints reads want 4-byte values from the payload p of a frame of kind k.
func Ints(k byte, p []byte, want int) ([]int, error) {
	if len(p) != 4*want {
		return nil, fmt.Errorf("screen frame %q holds %d bytes, want %d", k, len(p), 4*want)
	}
	vs := make([]int, want)
	for i := range vs {
		vs[i] = int(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return vs, nil
}
