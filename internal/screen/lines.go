package screen

import (
	"bytes"
	"strconv"
)

// Lines: a screen that has seen nothing but plain lines, followed without
// an emulator.
//
// Most of what a pty job prints past its first screenful is lines: a build
// log, a test run, `yes`. On a terminal they scroll through to the
// scrollback, and only the last screenful and the scrollback's last rows
// can ever be shown. So while everything written since the start is plain
// lines (PlainLines: printable ASCII, SGR sequences and erases to the end
// of the row, each line ended by CR LF) and at most the start of one more
// (PlainPrefix, up to MaxFrag bytes), a Lines keeps only the last lines,
// enough for the screen, the scrollback and a screenful more, and the pen
// (SGR sequences) the lines it dropped left; its Snapshot is computed from
// them, and so is its Redraw. Its owner makes the emulator when anything
// else is written or on a resize, and feeds it Seed: the pen, the kept lines and
// the start of a line held, which leave the emulator's screen and
// scrollback as all the bytes would have (TestLinesSame in
// internal/screen/emu checks the snapshot and the seed against an emulator
// fed every byte).
//
// The cursor starts at the top left of a blank main screen, and nothing in
// plain lines sets a mode, the title or the alternate screen: a Lines'
// are the initial ones.

// linesPenMax bounds the pen kept for the lines dropped: SGR sequences
// since the last one that reset it. Lines that set a colour and never
// reset it grow it by a few bytes a line; past this bound Write takes no
// more and the owner makes the emulator, which applies a pen as it comes.
const linesPenMax = 4 << 10

// linesLineMax bounds one line kept: a longer one (a minified file, a
// megabyte of base64 on one line) goes to the emulator, whose memory is
// bounded by its screen's rows, not by the longest line.
const linesLineMax = 64 << 10

// Lines is the screen of plain lines. Not safe for concurrent use.
type Lines struct {
	cols, rows int
	buf        []byte   // the kept lines' bytes, and perhaps dropped ones before them
	base       int64    // the offset of buf[0] in everything written
	start      int64    // where the first kept line starts
	lines      []lineAt // the kept lines from lines[lhead]
	lhead      int
	kept       int    // rows of the kept lines
	drawn      int64  // rows of every line ended so far
	pen        []byte // SGR sequences of the lines dropped
	frag       []byte // the start of the next line
	join       []byte // scratch: frag and the rest of its line
	ends       []int  // scratch: line ends
}

// lineAt is a kept line: where it ends (just past its CR LF) in everything
// written, and how many screen rows it takes.
type lineAt struct {
	end  int64
	rows int
}

// NewLines is a blank cols × rows screen of plain lines.
func NewLines(cols, rows int) *Lines {
	return &Lines{cols: cols, rows: rows}
}

// keepRows is how many rows of lines are kept: the scrollback, the
// screen, and a screenful more. An emulator fed the seed draws its first
// screenful itself, row by row, before it follows a flood; those rows are
// past the scrollback's count by then, so the rows it keeps are those a
// flood brought in, as they did when every byte was fed.
func (l *Lines) keepRows() int { return ScrollbackLines + 2*l.rows }

// Write follows p on the screen: false when p would take it beyond plain
// lines (a byte outside them, a line longer than linesLineMax, a line's
// start longer than MaxFrag, or a pen past its bound). Then nothing of p
// is taken and the screen is as it was: its owner makes the emulator,
// feeds it Seed, then p.
func (l *Lines) Write(p []byte) bool {
	if len(l.pen) > linesPenMax {
		return false
	}
	q := p
	var joined []byte // the held start of a line with its rest, when p ends it
	if len(l.frag) > 0 {
		i := bytes.IndexByte(q, '\n')
		if i < 0 {
			l.join = append(append(l.join[:0], l.frag...), q...)
			if len(l.join) > MaxFrag || !PlainPrefix(l.join) {
				return false
			}
			l.frag, l.join = l.join, l.frag
			return true
		}
		joined = append(append(l.join[:0], l.frag...), q[:i+1]...)
		l.join = joined
		if e := PlainLines(joined, l.cols, l.ends); len(e) != 1 || e[0] != len(joined) || len(joined) > linesLineMax {
			l.ends = e
			return false
		}
		q = q[i+1:]
	}
	l.ends = PlainLines(q, l.cols, l.ends)
	last := 0
	if n := len(l.ends); n > 0 {
		last = l.ends[n-1]
	}
	rest := q[last:]
	if len(rest) > MaxFrag || !PlainPrefix(rest) {
		return false
	}
	for i, prev := 0, 0; i < len(l.ends); i++ {
		if l.ends[i]-prev > linesLineMax {
			return false
		}
		prev = l.ends[i]
	}
	if joined != nil {
		l.add(joined, []int{len(joined)})
	}
	if last > 0 {
		l.add(q[:last], l.ends)
	}
	l.frag = append(l.frag[:0], rest...)
	l.drop()
	return true
}

// add keeps the lines of p, ends where each ends in p.
func (l *Lines) add(p []byte, ends []int) {
	at := l.base + int64(len(l.buf))
	l.buf = append(l.buf, p...)
	prev := 0
	for _, e := range ends {
		r := l.lineRows(p[prev : e-2])
		l.lines = append(l.lines, lineAt{end: at + int64(e), rows: r})
		l.kept += r
		l.drawn += int64(r)
		prev = e
	}
}

// lineRows is how many screen rows a line's characters take (at least
// one): a line of cols characters fills its row, and the CR LF after it
// starts the next.
func (l *Lines) lineRows(line []byte) int {
	if len(line) <= l.cols {
		return 1
	}
	n := chars(line)
	return max(1, (n+l.cols-1)/l.cols)
}

// chars counts the characters of plain text: its bytes less its
// sequences (each complete).
func chars(p []byte) int {
	n := len(p)
	for i := 0; ; {
		j := bytes.IndexByte(p[i:], 0x1b)
		if j < 0 {
			return n
		}
		i += j
		k := SGREnd(p, i)
		n -= k - i
		i = k
	}
}

// drop lets go of the oldest lines while those after them hold keepRows
// rows, their SGR sequences going into the pen.
func (l *Lines) drop() {
	keep := l.keepRows()
	for l.lhead < len(l.lines)-1 && l.kept-l.lines[l.lhead].rows >= keep {
		ln := l.lines[l.lhead]
		l.pen = SGRs(l.buf[l.start-l.base:ln.end-l.base], l.pen)
		l.start = ln.end
		l.kept -= ln.rows
		l.lhead++
	}
	if l.lhead > 0 && l.lhead >= len(l.lines)/2 {
		l.lines = append(l.lines[:0], l.lines[l.lhead:]...)
		l.lhead = 0
	}
	if off := int(l.start - l.base); off > 64<<10 && off >= len(l.buf)/2 {
		l.buf = append(l.buf[:0], l.buf[off:]...)
		l.base = l.start
	}
}

// Seed is what makes an emulator's screen and scrollback, from a blank
// screen, those all the bytes written would have: the pen of the lines
// dropped, the lines kept, the start of a line held.
func (l *Lines) Seed() []byte {
	kept := l.buf[l.start-l.base:]
	out := make([]byte, 0, len(l.pen)+len(kept)+len(l.frag))
	out = append(out, l.pen...)
	out = append(out, kept...)
	return append(out, l.frag...)
}

// layout is every row kept, as its bytes (the kept lines' rows, then
// those of the start of a line held), the index of the screen's first row
// among them, the cursor, and a sequence the held start of a line ends in
// the middle of.
func (l *Lines) layout() (rows [][]byte, top int, cur Cursor, cut []byte) {
	var spans []Span
	for i, s := l.lhead, l.start; i < len(l.lines); i++ {
		e := l.lines[i].end
		line := l.buf[s-l.base : e-l.base]
		spans = SplitRows(line, 0, len(line)-2, l.cols, spans[:0])
		for _, sp := range spans {
			rows = append(rows, line[sp.A:sp.B])
		}
		s = e
	}
	frag, cr := l.frag, false
	if n := len(frag); n > 0 && frag[n-1] == '\r' {
		frag, cr = frag[:n-1], true
	}
	if j := bytes.LastIndexByte(frag, 0x1b); j >= 0 && SGREnd(frag, j) < 0 {
		frag, cut = frag[:j], frag[j:] // a sequence cut short: not drawn yet
	}
	n := chars(frag)
	fragRows := max(1, (n+l.cols-1)/l.cols)
	spans = SplitRows(frag, 0, len(frag), l.cols, spans[:0])
	for _, sp := range spans {
		rows = append(rows, frag[sp.A:sp.B])
	}
	cur = Cursor{Visible: true}
	if n > 0 && !cr {
		cur.Col = min(n-(fragRows-1)*l.cols, l.cols-1) // a wrap pending stays on the last column
	}
	if total := l.drawn + int64(fragRows); total <= int64(l.rows) {
		cur.Row = int(total) - 1
	} else {
		top = len(rows) - l.rows
		cur.Row = l.rows - 1
	}
	return rows, top, cur, cut
}

// Snapshot is the screen now, with up to scrollback rows of scrollback
// when scrollback > 0: false when the rows kept cannot tell the
// scrollback's (its rows would reach the bound of ScrollbackBytes, which
// counts bytes as the emulator's ring does); then the owner asks an
// emulator fed Seed.
func (l *Lines) Snapshot(scrollback int) (Snapshot, bool) {
	rows, top, cur, _ := l.layout()
	s := Snapshot{Cols: l.cols, Rows: l.rows, Cursor: cur, Lines: make([]string, l.rows)}
	for y := range min(l.rows, len(rows)-top) {
		s.Lines[y] = Text(rows[top+y])
	}
	if scrollback > 0 {
		// The rows that scrolled off, newest last: the emulator's ring
		// keeps the last ScrollbackLines of them within ScrollbackBytes.
		off := rows[:top]
		if len(off) > ScrollbackLines {
			off = off[len(off)-ScrollbackLines:]
		}
		size := 0
		for _, r := range off {
			size += len(r)
		}
		if size > ScrollbackBytes {
			return Snapshot{}, false
		}
		off = off[max(0, len(off)-scrollback):]
		sb := make([]string, len(off))
		for i, r := range off {
			sb[i] = Text(r)
		}
		s.Scrollback = &sb
	}
	return s, true
}

// Redraw is the bytes that draw the screen now on a terminal of its size
// in any state (an attach's first message): RedrawReset, each row of the
// screen at its place, drawn with the pen it was written with and its own
// bytes (colours, erases), then the cursor, and the pen the next byte is
// written with; a sequence the program is in the middle of writing is
// begun, so its rest, which follows as the program writes it, ends it.
func (l *Lines) Redraw() []byte {
	rows, top, cur, cut := l.layout()
	b := []byte(RedrawReset)
	pen := append([]byte(nil), l.pen...)
	for i, r := range rows {
		if i >= top {
			b = append(b, "\x1b["...)
			b = strconv.AppendInt(b, int64(i-top+1), 10)
			b = append(b, ";1H\x1b[0m"...)
			b = append(b, pen...)
			b = append(b, r...)
		}
		pen = SGRs(r, pen)
	}
	b = append(b, "\x1b["...)
	b = strconv.AppendInt(b, int64(cur.Row+1), 10)
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(cur.Col+1), 10)
	b = append(b, "H\x1b[0m"...)
	b = append(b, pen...)
	return append(b, cut...)
}

// Footprint is what the screen holds in memory, in bytes.
func (l *Lines) Footprint() int64 {
	return int64(cap(l.buf)+cap(l.pen)+cap(l.frag)+cap(l.join)) + 16*int64(cap(l.lines)) + 8*int64(cap(l.ends))
}
