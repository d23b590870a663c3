// Package emu is the terminal emulator behind a pty job's screen: a Term
// feeds the raw bytes the program writes to an emulator
// (github.com/charmbracelet/x/vt) and reads back what internal/screen
// describes (the rows as text, the cursor, the alternate screen, the
// title and a capped scrollback). It runs in the screen process
// (cmd/shellctl-screen, serve.go), which a runner starts for a job whose
// output needs it; the runner itself links none of this.
//
// A Term is pure logic and not safe for concurrent use: its owner
// serializes Write, Resize and Snapshot.
//
// A Term starts cold (screen.Cold): it keeps the bytes written (at most
// screen.ColdMax) and the rows they draw, and makes the emulator only on
// the first byte outside a simple subset (printable ASCII, CR, LF, HT,
// BS, SGR and erase-to-end sequences, nothing that scrolls), on a Resize,
// or past screen.ColdMax bytes.
//
// Memory is bounded (see Footprint): while cold, screen.ColdMax bytes and
// the rows drawn (cols × rows bytes at most); once the emulator is made,
// the emulated screen is at most screen.MaxCells cells (two buffers of
// them: main and alternate), the scrollback at most
// screen.ScrollbackLines rows and screen.ScrollbackBytes bytes of text,
// and the emulator's own string buffer (OSC, DCS) 4 MiB.
package emu

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"unsafe"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"

	"github.com/shellctl/shellctl/internal/screen"
)

const (
	// CellBytes is the size of one emulated cell.
	CellBytes = int64(unsafe.Sizeof(uv.Cell{}))
	// parserBytes is the emulator's buffer for OSC and DCS strings.
	parserBytes = 4 << 20
)

// Term is one terminal's emulated screen.
type Term struct {
	emu        *vt.Emulator // nil while cold
	cold       *screen.Cold // the screen until the emulator is made
	cols, rows int
	title      string
	appCursor  bool
	sb         ring
	st         emuState // the emulator's own state (state.go)
	stOK       bool
	runs       []int         // plain-run scratch: line ends
	spans      []screen.Span // and rows
	// pend: a flood of plain lines the emulator has not drawn yet;
	// frag: the start of the next plain line, held back meanwhile
	// (fast.go).
	pend *pending
	frag []byte
	join []byte // frag and the next write
	// moved: line feeds and indexes done by moving rows (scroll.go),
	// not by the emulator's copy of every cell.
	moved int
	// lineBuf: scratch for a row's text on its way to the scrollback.
	lineBuf []byte
}

// New makes the screen of a cols × rows terminal (Fits must hold). It
// starts cold (screen.Cold): the emulator is made when first needed.
func New(cols, rows int) *Term {
	return &Term{cols: cols, rows: rows, cold: &screen.Cold{}}
}

// warm makes the emulator, if not made yet, and feeds it what was written
// while cold.
func (t *Term) warm() {
	if t.emu != nil {
		return
	}
	t.emu = vt.NewEmulator(t.cols, t.rows)
	// Rows that scroll off the main screen are moved out after every
	// write into the text ring (t.sb); the emulator's own scrollback of
	// cells only ever holds those of one write.
	t.emu.SetScrollbackSize(screen.ScrollbackLines)
	dropAltScrollback(t.emu)
	t.st, t.stOK = stateOf(t.emu)
	t.emu.SetCallbacks(vt.Callbacks{
		Title: func(s string) { t.title = s },
		EnableMode: func(m ansi.Mode) {
			if m == ansi.ModeCursorKeys {
				t.appCursor = true
			}
		},
		DisableMode: func(m ansi.Mode) {
			if m == ansi.ModeCursorKeys {
				t.appCursor = false
			}
		},
	})
	// Answers to a program's queries (cursor position, device
	// attributes) are read and dropped: the runner never answered them,
	// and an answer that came late (the screen is fed off the output
	// path) would arrive as typed input.
	go func() { _, _ = io.Copy(io.Discard, t.emu) }()
	raw := t.cold.Raw()
	t.cold = nil
	t.write(raw)
}

// dropAltScrollback takes the scrollback off the alternate screen. The
// emulator gives both screens one (10 000 rows of cells) and lets only
// the main one's be sized; a full-screen program that redraws (ED 2 pushes
// the screen into it) or scrolls would grow it without a bound worth
// having, and a real terminal keeps none there. The field is not
// exported, hence reflect; TestAltScreenKeepsNoScrollback guards it.
func dropAltScrollback(e *vt.Emulator) {
	scrs := reflect.ValueOf(e).Elem().FieldByName("scrs")
	if !scrs.IsValid() || scrs.Len() < 2 {
		return
	}
	f := scrs.Index(1).FieldByName("scrollback")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*vt.Scrollback)(nil)) {
		return
	}
	*(**vt.Scrollback)(unsafe.Pointer(f.UnsafeAddr())) = nil
}

// Close stops the goroutine reading the emulator's answers: the end of
// their pipe is closed (Emulator.Close would race with that goroutine's
// Read over the emulator's closed flag).
func (t *Term) Close() {
	if t.emu == nil {
		return
	}
	if pw, ok := t.emu.InputPipe().(*io.PipeWriter); ok {
		_ = pw.Close()
	}
}

// Emulating reports whether the emulator was made (false: still cold).
func (t *Term) Emulating() bool { return t.emu != nil }

// Size is the terminal's size.
func (t *Term) Size() (cols, rows int) { return t.cols, t.rows }

// AppCursor reports whether the program asked for application cursor
// keys (DECCKM): cursor keys then send ESC O A rather than ESC [ A.
func (t *Term) AppCursor() bool { return t.appCursor }

// settle brings the emulator up to date with everything written.
func (t *Term) settle() {
	t.materialize()
	if len(t.frag) > 0 {
		f := append([]byte(nil), t.frag...)
		t.frag = t.frag[:0]
		t.feed(f)
	}
}

// Resize changes the terminal's size (Fits must hold).
func (t *Term) Resize(cols, rows int) {
	t.warm()
	t.settle()
	t.cols, t.rows = cols, rows
	t.emu.Resize(cols, rows)
	t.drain()
}

// Write feeds bytes the program wrote to its terminal.
func (t *Term) Write(p []byte) (int, error) {
	n := len(p)
	if c := t.cold; c != nil {
		if c.Write(p, t.cols, t.rows) {
			return n, nil
		}
		t.warm()
	}
	if len(t.frag) > 0 {
		// The held start of a line, with the rest of that line.
		i := indexLF(p)
		if i < 0 {
			i = len(p) - 1
		}
		t.join = append(append(t.join[:0], t.frag...), p[:i+1]...)
		t.frag = t.frag[:0]
		p = p[i+1:]
		t.write(t.join)
	}
	t.write(p)
	return n, nil
}

func (t *Term) write(p []byte) {
	for len(p) > 0 {
		if t.pend != nil {
			t.runs = screen.PlainLines(p, t.cols, t.runs)
			if len(t.runs) > 0 {
				end := t.runs[len(t.runs)-1]
				t.extend(p[:end], t.runs, 0)
				p = p[end:]
				continue
			}
			if _, cut := wrapRun(p, t.cols, t.cols); cut > 0 {
				// A long line: its full rows scroll on (fast.go).
				t.wrapRows(p, 0, cut)
				p = p[cut:]
				continue
			}
			if len(t.frag)+len(p) <= screen.MaxFrag && screen.PlainPrefix(p) {
				t.frag = append(t.frag, p...)
				return
			}
			t.materialize()
			if len(t.frag) > 0 {
				f := append([]byte(nil), t.frag...)
				t.frag = t.frag[:0]
				t.feed(f)
			}
		}
		if k := t.fastForward(p); k > 0 || t.pend != nil {
			p = p[k:]
			continue
		}
		// Feed through the next line end: a run of plain lines may start
		// there (fastForward).
		i := indexLF(p)
		if i < 0 {
			i = len(p)
		} else {
			i++
		}
		t.feed(p[:i])
		p = p[i:]
	}
}

func indexLF(p []byte) int { return bytes.IndexByte(p, '\n') }

// drain moves the rows the emulator pushed into its scrollback into the
// text ring.
func (t *Term) drain() {
	sb := t.emu.Scrollback()
	if sb == nil || sb.Len() == 0 {
		return
	}
	for _, l := range sb.Lines() {
		t.sb.push([]byte(strings.TrimRight(l.String(), " ")))
	}
	sb.Clear()
}

// row is the text of screen row y, trailing blanks trimmed. A wide
// character's second cell is a zero cell and adds nothing.
func (t *Term) row(y int) string {
	var b strings.Builder
	for x := 0; x < t.cols; x++ {
		c := t.emu.CellAt(x, y)
		switch {
		case c == nil:
			b.WriteByte(' ')
		case c.IsZero():
		case c.Content == "":
			b.WriteByte(' ')
		default:
			b.WriteString(c.Content)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// Snapshot is the screen now, with up to scrollback rows of scrollback
// when scrollback > 0 (an empty list when 0 < scrollback and there is none).
func (t *Term) Snapshot(scrollback int) screen.Snapshot {
	if t.cold != nil {
		return t.cold.Snapshot(t.cols, t.rows, scrollback)
	}
	t.settle()
	pos := t.emu.CursorPosition()
	s := screen.Snapshot{
		Cols: t.cols, Rows: t.rows,
		Cursor:    screen.Cursor{Row: pos.Y, Col: pos.X, Visible: !t.emu.CursorHidden()},
		AltScreen: t.emu.IsAltScreen(),
		Title:     t.title,
		Lines:     make([]string, t.rows),
	}
	for y := range t.rows {
		s.Lines[y] = t.row(y)
	}
	if scrollback > 0 {
		l := t.sb.last(scrollback)
		s.Scrollback = &l
	}
	return s
}

// Footprint is what the screen holds in memory, in bytes, by its own
// accounting: while cold, the bytes written and the rows they drew (at
// most screen.ColdMax and cols × rows bytes); once the emulator is made, both its
// screen buffers, the scrollback text, and its string buffer.
func (t *Term) Footprint() int64 {
	if t.cold != nil {
		return t.cold.Footprint()
	}
	n := 2*int64(t.cols)*int64(t.rows)*CellBytes + t.sb.footprint() + parserBytes + int64(cap(t.frag)+cap(t.join))
	if t.pend != nil {
		for _, r := range t.pend.rows {
			n += int64(len(r))
		}
		n += int64(len(t.pend.pen))
	}
	return n
}

// String is the screen's rows joined by newlines (for tests and logs).
func (t *Term) String() string {
	return strings.Join(t.Snapshot(0).Lines, "\n")
}

// ring is the scrollback: rows, oldest first, capped at screen.ScrollbackLines
// rows and screen.ScrollbackBytes bytes. A row is kept as it came (plain text
// with SGR sequences, or text) and made text when asked for: most rows
// of a flood are pushed out before anyone looks.
type ring struct {
	rows  [][]byte // a circular buffer of up to screen.ScrollbackLines
	start int
	n     int
	bytes int
}

func (r *ring) push(s []byte) {
	if len(s) > screen.ScrollbackBytes {
		s = s[:screen.ScrollbackBytes]
	}
	if r.rows == nil {
		r.rows = make([][]byte, screen.ScrollbackLines)
	}
	for r.n > 0 && (r.n == screen.ScrollbackLines || r.bytes+len(s) > screen.ScrollbackBytes) {
		r.bytes -= len(r.rows[r.start])
		r.rows[r.start] = nil
		r.start = (r.start + 1) % screen.ScrollbackLines
		r.n--
	}
	r.rows[(r.start+r.n)%screen.ScrollbackLines] = s
	r.n++
	r.bytes += len(s)
}

// last is the newest n rows as text, oldest first.
func (r *ring) last(n int) []string {
	n = min(n, r.n)
	out := make([]string, n)
	for i := range n {
		out[i] = screen.Text(r.rows[(r.start+r.n-n+i)%screen.ScrollbackLines])
	}
	return out
}

func (r *ring) len() int { return r.n }

func (r *ring) footprint() int64 {
	return int64(len(r.rows))*int64(unsafe.Sizeof([]byte(nil))) + int64(r.bytes)
}
