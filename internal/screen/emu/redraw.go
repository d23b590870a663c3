package emu

// The redraw an attaching terminal gets first (GET /v1/jobs/{id}/attach):
// bytes that, written to a terminal of the same size in any state, draw
// the screen as it is now — its cells with their colours and attributes,
// the main screen under an alternate one, the scroll region, the modes a
// program's input depends on (cursor keys, keypad, mouse, bracketed
// paste), the title and the cursor — as tmux draws a pane on attach. The
// terminal's raw bytes written after that point then follow as the
// program wrote them.

import (
	"strconv"
	"strings"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"

	"github.com/shellctl/shellctl/internal/screen"
)

// redrawModes are the modes carried over when set (their default is
// reset), and the sequence that sets each.
var redrawModes = []struct {
	m   ansi.Mode
	seq string
}{
	{ansi.ModeCursorKeys, "\x1b[?1h"},
	{ansi.ModeNumericKeypad, "\x1b="},
	{ansi.ModeMouseNormal, "\x1b[?1000h"},
	{ansi.ModeMouseButtonEvent, "\x1b[?1002h"},
	{ansi.ModeMouseAnyEvent, "\x1b[?1003h"},
	{ansi.ModeFocusEvent, "\x1b[?1004h"},
	{ansi.ModeMouseExtSgr, "\x1b[?1006h"},
	{ansi.ModeBracketedPaste, "\x1b[?2004h"},
}

// Redraw is the bytes that draw the screen now (see above).
func (t *Term) Redraw() []byte {
	b := []byte(screen.RedrawReset)
	if t.cold != nil {
		// A cold screen is what its bytes drew from a blank one.
		return append(b, t.cold.Raw()...)
	}
	t.settle()
	e := t.emu
	alt := e.IsAltScreen()
	if alt && t.stOK {
		// The main screen first, so the terminal has it back when the
		// program leaves the alternate one.
		if main := t.st.bufs[0]; main != nil && main.Width() == t.cols && main.Height() == t.rows {
			for y := range t.rows {
				b = appendRow(b, y, main.Line(y))
			}
		}
		b = append(b, "\x1b[?1049h"...)
	}
	row := make(uv.Line, t.cols)
	for y := range t.rows {
		for x := range t.cols {
			if c := e.CellAt(x, y); c != nil {
				row[x] = *c
			} else {
				row[x] = uv.EmptyCell
			}
		}
		b = appendRow(b, y, row)
	}
	origin := false
	top := 0
	if t.stOK {
		i := 0
		if alt {
			i = 1
		}
		if r := *t.st.scroll[i]; r.Min.Y != 0 || r.Max.Y != t.rows {
			b = append(b, "\x1b["...)
			b = strconv.AppendInt(b, int64(r.Min.Y+1), 10)
			b = append(b, ';')
			b = strconv.AppendInt(b, int64(r.Max.Y), 10)
			b = append(b, 'r')
			top = r.Min.Y
		}
		for _, m := range redrawModes {
			if t.st.mode(m.m) {
				b = append(b, m.seq...)
			}
		}
		if !t.st.mode(ansi.ModeAutoWrap) {
			b = append(b, "\x1b[?7l"...)
		}
		if t.st.mode(ansi.ModeOrigin) {
			b = append(b, "\x1b[?6h"...)
			origin = true
		}
	} else if t.appCursor {
		b = append(b, "\x1b[?1h"...)
	}
	if t.title != "" {
		b = append(b, "\x1b]2;"...)
		b = append(b, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return -1
			}
			return r
		}, t.title)...)
		b = append(b, '\a')
	}
	pos := e.CursorPosition()
	y := pos.Y
	if origin {
		y -= top
	}
	b = append(b, "\x1b["...)
	b = strconv.AppendInt(b, int64(y+1), 10)
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(pos.X+1), 10)
	b = append(b, 'H')
	if e.CursorHidden() {
		b = append(b, "\x1b[?25l"...)
	}
	return b
}

// appendRow draws row y at its place: its cells, styled, trailing blanks
// left blank.
func appendRow(b []byte, y int, l uv.Line) []byte {
	b = append(b, "\x1b["...)
	b = strconv.AppendInt(b, int64(y+1), 10)
	b = append(b, ";1H"...)
	return append(b, l.Render()...)
}
