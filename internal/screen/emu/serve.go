package emu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/shellctl/shellctl/internal/screen"
)

// Serve is the screen process (cmd/shellctl-screen): it reads the frames
// of internal/screen/wire.go from in, feeds a Term, and answers on out.
// It returns nil at end of file between frames, and an error (written to
// out as FrameError first, when out still works) on anything else.
func Serve(in io.Reader, out io.Writer) error {
	br := bufio.NewReaderSize(in, 256<<10)
	fail := func(err error) error {
		_, _ = out.Write(screen.AppendFrame(nil, screen.FrameError, []byte(err.Error())))
		return err
	}
	k, p, buf, err := screen.ReadFrame(br, nil, screen.MaxFrame)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return fail(fmt.Errorf("read the start frame: %w", err))
	}
	if k != screen.FrameStart || len(p) < 4 {
		return fail(fmt.Errorf("the first frame is %q of %d bytes, want the start frame %q", k, len(p), screen.FrameStart))
	}
	if v, _ := screen.Ints(k, p[:4], 1); v[0] != screen.Protocol {
		return fail(fmt.Errorf("this shellctl-screen speaks screen protocol %d and its runner %d: install the shellctl-screen built with the runner", screen.Protocol, v[0]))
	}
	v, err := screen.Ints(k, p, 3)
	if err != nil {
		return fail(err)
	}
	cols, rows := v[1], v[2]
	if !screen.Fits(cols, rows) {
		return fail(screen.ErrTooLarge(cols, rows))
	}
	t := New(cols, rows)
	defer t.Close()
	var ans []byte
	for {
		k, p, buf, err = screen.ReadFrame(br, buf, screen.MaxFrame)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fail(fmt.Errorf("read a frame: %w", err))
		}
		switch k {
		case screen.FrameWrite:
			_, _ = t.Write(p)
			continue
		case screen.FrameResize:
			v, err := screen.Ints(k, p, 2)
			if err != nil {
				return fail(err)
			}
			if !screen.Fits(v[0], v[1]) {
				return fail(screen.ErrTooLarge(v[0], v[1]))
			}
			t.Resize(v[0], v[1])
			continue
		case screen.FrameSnapshot:
			v, err := screen.Ints(k, p, 1)
			if err != nil {
				return fail(err)
			}
			js, err := json.Marshal(t.Snapshot(v[0]))
			if err != nil {
				return fail(fmt.Errorf("encode the screen: %w", err))
			}
			ans = screen.AppendFrame(ans[:0], screen.FrameSnapshot, js)
		case screen.FrameRedraw:
			ans = screen.AppendFrame(ans[:0], screen.FrameRedraw, t.Redraw())
		case screen.FrameCursor:
			c := byte(0)
			if t.AppCursor() {
				c = 1
			}
			ans = screen.AppendFrame(ans[:0], screen.FrameCursor, []byte{c})
		default:
			return fail(fmt.Errorf("unknown screen frame %q", k))
		}
		if _, err := out.Write(ans); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
	}
}
