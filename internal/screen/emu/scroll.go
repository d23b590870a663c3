package emu

// Scrolling without copying the screen.
//
// The emulator scrolls by copying every cell of the scroll region up one
// row (some 10 000 cells of 112 bytes at 200×50, for every line feed at the
// bottom): a program whose output is anything but plain lines (cat of a
// binary file, colour and cursor sequences) would be drawn at a few hundred
// KB/s. A line feed at the bottom of a whole-screen scroll region moves the
// rows instead: the top row goes to the scrollback (main screen) and
// becomes the blank bottom one, then the emulator is given a cursor up and
// down, which leaves the cursor where it was and ends a pending wrap as the
// line feed would. The emulator's row buffer is not exported, hence
// reflect; TestScrollSame checks the result against the emulator's own
// line feeds, and if the buffer cannot be reached the emulator scrolls.

import (
	"bytes"
	"strings"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

// feed hands p to the emulator, scrolling at line feeds itself where it
// can.
func (t *Term) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\n\v\f")
		if i < 0 {
			_, _ = t.emu.Write(p)
			break
		}
		if i > 0 {
			_, _ = t.emu.Write(p[:i])
		}
		if !t.scrollUp() {
			_, _ = t.emu.Write(p[i : i+1])
		}
		p = p[i+1:]
	}
	t.drain()
}

// scrollUp does a line feed at the bottom of a whole-screen scroll region
// by moving rows; false when the line feed is not that (or the rows cannot
// be reached), for the emulator to do.
func (t *Term) scrollUp() bool {
	alt := 0
	if t.emu.IsAltScreen() {
		alt = 1
	}
	if !t.stOK || !t.st.ground() || !t.st.fullRegion(alt, t.cols, t.rows) || t.emu.CursorPosition().Y != t.rows-1 {
		return false
	}
	buf := t.st.bufs[alt]
	if buf == nil || buf.Buffer == nil || len(buf.Lines) != t.rows {
		return false
	}
	t.drain() // what the emulator scrolled off before goes first
	lines := buf.Lines
	top := lines[0]
	if alt == 0 {
		t.sb.push([]byte(strings.TrimRight(top.String(), " ")))
	}
	copy(lines, lines[1:])
	for x := range top {
		top[x] = uv.EmptyCell
	}
	lines[len(lines)-1] = top
	for y := range buf.Touched {
		buf.Touched[y] = nil
	}
	seq := "\x1b[A\x1b[B"
	if t.st.mode(ansi.ModeLineFeedNewLine) {
		seq += "\r"
	}
	_, _ = t.emu.Write([]byte(seq))
	return true
}
