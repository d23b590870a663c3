package emu

// Fast-forward through floods of plain lines.
//
// The emulator costs a few hundred nanoseconds a character and, worse, a
// copy of the whole screen for every line that scrolls: fed a build log
// as it comes, it would manage a few MB/s where a pty carries sixty. But of
// a flood of lines printed at the bottom of the screen only the last
// screenful is ever on the screen; the rest goes to the scrollback. So when
// the input holds a run of at least a screenful of plain lines (printable
// ASCII and SGR colour sequences, each ended by CR LF), the cursor is at the
// start of the bottom row and nothing is in the way (main screen, the whole
// screen is the scroll region, no left/right margins, autowrap on, the
// ASCII character set), the lines that would scroll off go straight to the
// scrollback as text, and the emulator is given only what leaves it in the
// same state: the colour sequences of the skipped lines (the pen), then
// the last screenful drawn row by row from the top. The screen that
// results is the one feeding every byte would give; TestFastForwardSame
// checks it against the emulator fed byte by byte.

import (
	"encoding/binary"
	"github.com/shellctl/shellctl/internal/screen"
)

// pending is a screen the emulator has not been given yet: the pen
// (SGR sequences) to apply, then these rows drawn from the top, the bottom
// row blank and the cursor at its start. While a flood goes on, rows move
// through it into the scrollback without the emulator doing anything.
// Whatever the emulator's screen holds meanwhile does not matter:
// materialize draws over every row.
type pending struct {
	rows [][]byte // at most rows-1, each a copy of one row's bytes
	pen  []byte
}

// penFlush: a pen longer than this goes to the emulator at once (a pen
// only changes the emulator's pen, never what its screen shows).
const penFlush = 1 << 10

// plain reports whether the fast path may run in the emulator's state.
func (t *Term) plain() bool {
	return t.stOK && t.st.ground() && !t.emu.IsAltScreen() && t.st.fullRegion(0, t.cols, t.rows) && t.st.plainText()
}

// fastForward takes a run of plain lines at the start of p, when there is
// one and the state allows (see the top of this file), and returns how
// many bytes it took (0: none; feed p as usual).
func (t *Term) fastForward(p []byte) int {
	if !t.plain() {
		return 0
	}
	pos := t.emu.CursorPosition()
	if pos.Y != t.rows-1 {
		return 0
	}
	if pos.X != 0 || t.st.atPhantom() {
		return t.wrapForward(p, pos.X)
	}
	t.runs = screen.PlainLines(p, t.cols, t.runs)
	ends := t.runs
	if len(ends) < 2 {
		return t.wrapForward(p, 0)
	}
	// The first line as usual: it is written over whatever the bottom
	// row holds, then scrolls up. The bottom row is blank after it.
	t.feed(p[:ends[0]])
	if pos := t.emu.CursorPosition(); pos.Y != t.rows-1 || pos.X != 0 || !t.plain() {
		return ends[0]
	}
	// From here the screen is pending: its rows above the bottom one, as
	// text (what is drawn again is their characters; their colours are
	// not reported), then the further lines, each scrolling it by a row.
	t.startPending(0)
	t.extend(p[ends[0]:ends[len(ends)-1]], ends[1:], ends[0])
	return ends[len(ends)-1]
}

// extend adds the plain lines of p (ends: where each ends in the input
// p came from, base: where p starts there) to the pending screen.
func (t *Term) extend(p []byte, ends []int, base int) {
	rows := t.spans[:0]
	start := 0
	for _, e := range ends {
		rows = screen.SplitRows(p, start, e-base-2, t.cols, rows)
		start = e - base
	}
	t.spans = rows
	t.scrollRows(p, rows)
}

// scrollRows adds rows (spans of p, each one screen row) at the bottom of
// the pending screen: as many of the oldest rows as they push out go to
// the scrollback.
func (t *Term) scrollRows(p []byte, rows []screen.Span) {
	keep := t.rows - 1
	drop := max(0, len(t.pend.rows)+len(rows)-keep)
	// The oldest rows scroll off: first those pending, then new ones.
	if d := min(drop, len(t.pend.rows)); d > 0 {
		for _, r := range t.pend.rows[:d] {
			t.sb.push(r)
			t.pend.pen = screen.SGRs(r, t.pend.pen)
		}
		t.pend.rows = append(t.pend.rows[:0], t.pend.rows[d:]...)
		drop -= d
	}
	// One copy of the new rows' bytes for all of them: the rows are
	// consecutive, so what the scrollback and the pending screen keep of
	// these copies is their own bytes and at most one partial copy.
	first := max(0, drop-screen.ScrollbackLines)
	if first < len(rows) {
		base := rows[first].A
		buf := append([]byte(nil), p[base:rows[len(rows)-1].B]...)
		row := func(r screen.Span) []byte { return buf[r.A-base : r.B-base : r.B-base] }
		if drop > 0 {
			for _, r := range rows[first:drop] {
				t.sb.push(row(r))
			}
		}
		for _, r := range rows[drop:] {
			t.pend.rows = append(t.pend.rows, row(r))
		}
	}
	if drop > 0 {
		t.pend.pen = screen.SGRs(p[rows[0].A:rows[drop-1].B], t.pend.pen)
	}
	if len(t.pend.pen) > penFlush {
		_, _ = t.emu.Write(t.pend.pen)
		t.pend.pen = t.pend.pen[:0]
	}
}

// Long lines. A run of plain text with no line end (base64 -w 0, a
// minified file, a progress line that never ends) wraps at the margin: a
// row filled, the next character goes to the start of the next row, which
// at the bottom of the screen scrolls the screen up one row. On the
// screen that is the same as a line of cols characters ended by CR LF,
// once the next character is drawn (the emulator does not reflow rows on
// a resize, so nothing remembers which rows were wrapped). So the rows of
// such a run that are full and followed by more text join the pending
// screen like lines; what is left of the run (at most a row) is held or
// fed as usual.

// wrapRun scans the run of plain text at the start of p (printable ASCII
// and SGR colour sequences: no erase, no line end) written from a row with
// room for first characters, the rows after it cols wide. fill is where
// the character that starts the second row is (the first row is full and
// more follows), cut where the first character of the run's last row is
// (every row before it is full and followed by more); -1 when the run does
// not get that far.
func wrapRun(p []byte, first, cols int) (fill, cut int) {
	fill, cut = -1, -1
	n, next := 0, first // characters so far; the count at the current row's end
	for i := 0; i < len(p); {
		b := p[i]
		if b == 0x1b {
			k := screen.SGREnd(p, i)
			if k < 0 || p[k-1] != 'm' {
				break
			}
			i = k
			continue
		}
		if !screen.Printable[b] {
			break
		}
		if n == next {
			// p[i] starts a row: the one before it is full.
			if fill < 0 {
				fill = i
			}
			cut = i
			next += cols
		}
		if next-n > 8 && i+8 <= len(p) && screen.Printable8(binary.LittleEndian.Uint64(p[i:])) {
			i += 8
			n += 8
			continue
		}
		i++
		n++
	}
	return fill, cut
}

// wrapForward starts the pending screen in the middle of a long line: the
// cursor is on the bottom row at column x (or past the last one, a wrap
// pending). The emulator fills that row; the rows of the run that follow,
// full and followed by more, scroll it off without the emulator. It
// returns how many bytes of p it took; with a wrap pending that can be
// none while the screen is pending all the same (t.pend set): the rest of
// p goes to it.
func (t *Term) wrapForward(p []byte, x int) int {
	first := t.cols - x
	if t.st.atPhantom() {
		first = 0
	}
	fill, cut := wrapRun(p, first, t.cols)
	if fill < 0 {
		return 0 // the row being filled is not full yet
	}
	t.feed(p[:fill])
	if pos := t.emu.CursorPosition(); pos.Y != t.rows-1 || !t.st.atPhantom() || !t.plain() {
		return fill
	}
	// The next character wraps: the top row scrolls off, the others move
	// up a row, and the bottom row is blank with the cursor at its start.
	t.sb.push([]byte(t.row(0)))
	t.startPending(1)
	if cut > fill {
		t.wrapRows(p, fill, cut)
	}
	return cut
}

// wrapRows adds the full rows of the run p[a:b] to the pending screen.
func (t *Term) wrapRows(p []byte, a, b int) {
	t.spans = screen.SplitRows(p, a, b, t.cols, t.spans[:0])
	t.scrollRows(p, t.spans)
}

// startPending makes the screen pending: its rows from the emulator's row
// from on, rows-1 of them, as text.
func (t *Term) startPending(from int) {
	t.pend = &pending{rows: make([][]byte, 0, t.rows)}
	for y := from; y < from+t.rows-1; y++ {
		t.pend.rows = append(t.pend.rows, []byte(t.row(y)))
	}
}

// materialize gives the emulator the pending screen.
func (t *Term) materialize() {
	if t.pend == nil {
		return
	}
	out := append([]byte(nil), t.pend.pen...)
	out = append(out, "\x1b[H"...)
	for _, r := range t.pend.rows {
		out = append(out, "\x1b[2K"...)
		out = append(out, r...)
		out = append(out, '\r', '\n')
	}
	out = append(out, "\x1b[2K"...)
	t.pend = nil
	_, _ = t.emu.Write(out)
	t.drain()
}
