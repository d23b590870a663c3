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

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

// feed hands p to the emulator, scrolling at line feeds and indexes itself
// where it can.
func (t *Term) feed(p []byte) {
	for len(p) > 0 {
		i := indexScroll(p)
		if i < 0 {
			_, _ = t.emu.Write(p)
			break
		}
		if i > 0 {
			_, _ = t.emu.Write(p[:i])
		}
		if !t.scrollUp(p[i] != ind) {
			_, _ = t.emu.Write(p[i : i+1])
		}
		p = p[i+1:]
	}
	t.drain()
}

// ind is IND, the 8-bit index control: a line feed that never returns
// the carriage. The parser takes it as a control only between sequences
// and characters (not inside a UTF-8 character, where it is a
// continuation byte), which scrollUp checks. In binary output it is as
// frequent as any one byte: a cat of random bytes scrolled at it as often
// as at line feeds, the slow way.
const ind = 0x84

// indexScroll is the index of the first byte of p that may scroll: LF, VT,
// FF or IND; -1 when there is none.
func indexScroll(p []byte) int {
	for i, b := range p {
		if b <= '\f' && b >= '\n' || b == ind {
			return i
		}
	}
	return -1
}

// scrollUp does a line feed (newLine: LF, VT, FF; else IND) at the bottom
// of a whole-screen scroll region by moving rows; false when it is not
// that (or the rows cannot be reached), for the emulator to do.
func (t *Term) scrollUp(newLine bool) bool {
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
		t.lineBuf = appendText(t.lineBuf[:0], top)
		t.sb.push(bytes.Clone(t.lineBuf))
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
	if newLine && t.st.mode(ansi.ModeLineFeedNewLine) {
		seq += "\r"
	}
	_, _ = t.emu.Write([]byte(seq))
	t.moved++
	return true
}

// appendText appends what the row shows as text to b, as the row's
// String, trailing spaces trimmed, would give, without String's builders
// (a quarter of the time a binary flood took went to them): the
// continuation cells of wide characters give nothing, blank cells a space
// (kept only when something follows), the rest their content.
func appendText(b []byte, l uv.Line) []byte {
	start, blanks := len(b), 0
	for i := range l {
		c := &l[i]
		switch {
		case c.IsZero():
		case c.Content == uv.EmptyCell.Content && c.Equal(&uv.EmptyCell): // Content first: Equal compares styles
			blanks++
		default:
			for ; blanks > 0; blanks-- {
				b = append(b, ' ')
			}
			b = append(b, c.Content...)
		}
	}
	for len(b) > start && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}
