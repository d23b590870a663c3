package emu

import (
	"reflect"
	"testing"
)

// TestRedrawDrawsTheSameScreen: a fresh terminal fed only the redraw
// shows what the terminal fed the program's bytes shows — main screen,
// alternate screen over it, colours, wide characters, the title, the
// cursor and its visibility, application cursor keys — and a terminal in
// any state (here: on the alternate screen, with margins and origin mode)
// is put right first.
func TestRedrawDrawsTheSameScreen(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"cold", "plain\r\n\x1b[31mred\x1b[0m"},
		{"colours and wide", "\x1b[2J\x1b[3;5H\x1b[1;32mgreen\x1b[0m 漢字 end\x1b]2;a title\a\x1b[5;2H"},
		{"alternate over main", "main line\r\nsecond\x1b[?1049h\x1b[H\x1b[7malt\x1b[0m\x1b[?1h\x1b[?25l\x1b[4;10H"},
		{"margins", "\x1b[2J\x1b[2;5r\x1b[5;1Hscrolled\r\n\x1b[44mx\x1b[0m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := New(40, 8)
			defer src.Close()
			src.Write([]byte(tc.in))
			red := src.Redraw()
			dst := New(40, 8)
			defer dst.Close()
			// A terminal left in some other state.
			dst.Write([]byte("junk\x1b[?1049h\x1b[3;6r\x1b[?6hmore junk\x1b[?1h"))
			dst.Write(red)
			want, got := src.Snapshot(0), dst.Snapshot(0)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("redraw %q\nshows %+v\nwant  %+v", red, got, want)
			}
			if src.emu != nil && dst.emu != nil {
				for y := range 8 {
					for x := range 40 {
						a, b := src.emu.CellAt(x, y), dst.emu.CellAt(x, y)
						if a.Content != b.Content || !a.Style.Equal(&b.Style) {
							t.Fatalf("cell %d,%d is %+v, want %+v", x, y, b, a)
						}
					}
				}
			}
			if dst.AppCursor() != src.AppCursor() {
				t.Fatalf("application cursor keys %v, want %v", dst.AppCursor(), src.AppCursor())
			}
		})
	}
}
