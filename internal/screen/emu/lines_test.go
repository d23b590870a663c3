package emu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/screen"
)

// linesInput is output a program could write: mostly plain lines (words,
// colours, erases, rows filled exactly, lines longer than a row), and,
// when odd, a few bytes outside them (a tab, a cursor move, a line feed
// without its CR, a CR that overwrites); it may end inside a line, inside
// a colour, or on a CR.
func linesInput(rng *rand.Rand, cols, n int, odd bool) string {
	word := func() string {
		b := make([]byte, rng.IntN(30))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
			if rng.IntN(7) == 0 {
				b[i] = ' '
			}
		}
		return string(b)
	}
	var b strings.Builder
	for range n {
		switch rng.IntN(12) {
		case 0:
			b.WriteString("\x1b[3" + fmt.Sprint(rng.IntN(8)) + "m" + word() + "\x1b[m" + word())
		case 1:
			b.WriteString("\x1b[1;4" + fmt.Sprint(rng.IntN(8)) + "m" + word()) // a pen left set
		case 2:
			b.WriteString(strings.Repeat("w", cols*(1+rng.IntN(2)))) // exactly full rows
		case 3:
			b.WriteString(word() + word() + word() + word() + word())
		case 4:
			b.WriteString(word() + "\x1b[K" + word() + "\x1b[0K")
		case 5:
			b.WriteString(strings.Repeat("x", cols) + "\x1b[K") // an erase on a full row: not plain
		case 6:
			if odd {
				b.WriteString([]string{"\t", "\x1b[2;1H", "a\nb", "abc\rx", "\x1b[?25l", "é"}[rng.IntN(6)])
			}
		}
		b.WriteString(word() + "\r\n")
	}
	switch rng.IntN(5) {
	case 0:
		b.WriteString("partial " + word())
	case 1:
		b.WriteString(word() + "\x1b[3")
	case 2:
		b.WriteString(word() + "\r")
	case 3:
		b.WriteString(strings.Repeat("y", cols*(1+rng.IntN(3))))
	}
	return b.String()
}

func sameSnapshot(t *testing.T, what string, got, want screen.Snapshot) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, w := []string{}, []string{}
		if got.Scrollback != nil {
			g = tail(*got.Scrollback)
		}
		if want.Scrollback != nil {
			w = tail(*want.Scrollback)
		}
		t.Fatalf("%s: screen differs\ngot:  %q %+v (scrollback tail %q)\nwant: %q %+v (scrollback tail %q)",
			what, got.Lines, got.Cursor, g, want.Lines, want.Cursor, w)
	}
}

// TestLinesSame: a screen.Lines fed what a pump hands over shows the
// screen and scrollback an emulator fed every byte shows, and its seed
// gives a fresh emulator that screen; when it takes no more, its seed and
// the rest give an emulator the same screen as every byte.
func TestLinesSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range [][2]int{{20, 5}, {80, 24}, {7, 1}, {30, 2}, {200, 50}} {
		cols, rows := size[0], size[1]
		for round := range 24 {
			n := 1 + rng.IntN(120)
			if round%6 == 5 {
				n = screen.ScrollbackLines + rng.IntN(1500) // lines dropped
			}
			odd := round%3 == 2
			in := linesInput(rng, cols, n, odd)
			what := fmt.Sprintf("%dx%d round %d (%d bytes)", cols, rows, round, len(in))
			// The reference: every byte, fed byte by byte where that is
			// quick, else as a pump hands them over (TestFastForwardSame
			// holds those two the same).
			ref := New(cols, rows)
			if len(in) < 20000 {
				byteByByte(ref, in)
			} else {
				feed(ref, in)
			}
			l := screen.NewLines(cols, rows)
			var rest string
			for p := in; p != ""; {
				k := min(len(p), 1+rng.IntN(600))
				if !l.Write([]byte(p[:k])) {
					rest = p
					break
				}
				p = p[k:]
			}
			for _, sb := range []int{screen.ScrollbackLines, 0, 3} {
				want := ref.Snapshot(sb)
				seeded := New(cols, rows)
				_, _ = seeded.Write(l.Seed())
				feed(seeded, rest)
				sameSnapshot(t, what+fmt.Sprintf(" seed, scrollback %d", sb), seeded.Snapshot(sb), want)
				seeded.Close()
				if rest != "" {
					continue
				}
				got, ok := l.Snapshot(sb)
				if !ok {
					t.Fatalf("%s: no snapshot from the lines", what)
				}
				sameSnapshot(t, what+fmt.Sprintf(" lines, scrollback %d", sb), got, want)
			}
			if rest == "" {
				// The lines' redraw, written to a terminal in another
				// state, draws the same screen; what the program writes
				// next lands the same, with the same pen.
				other := New(cols, rows)
				feed(other, "\x1b[?1049h\x1b[44mjunk\x1b[5;5Hjunk")
				feed(other, string(l.Redraw()))
				got, want := other.Snapshot(0), ref.Snapshot(0)
				sameSnapshot(t, what+" redraw", got, want)
				if g, w := penOf(other), penOf(ref); g != w {
					t.Fatalf("%s: the redraw leaves the pen %s, every byte %s", what, g, w)
				}
				sameSnapshot(t, what+" redraw, then more", other.Snapshot(0), ref.Snapshot(0))
				other.Close()
				ref.Close()
				ref = New(cols, rows)
				feed(ref, in)
			}
			// The pen too (colours are not in a snapshot): the style of
			// a character written next.
			seeded := New(cols, rows)
			_, _ = seeded.Write(l.Seed())
			feed(seeded, rest)
			if g, w := penOf(seeded), penOf(ref); g != w {
				t.Fatalf("%s: the seed leaves the pen %s, every byte %s", what, g, w)
			}
			seeded.Close()
			if !odd && rest != "" && !strings.Contains(in, "xxxxxxx\x1b[K") {
				t.Fatalf("%s: plain lines not taken at %q", what, rest[:min(40, len(rest))])
			}
			ref.Close()
		}
	}
}

// penOf writes a Z and a cursor move (the screen is drawn, whatever was
// pending) and reads the style the Z was drawn with.
func penOf(tm *Term) string {
	feed(tm, "Z\x1b[A")
	tm.Snapshot(0)
	for y := range tm.rows {
		for x := range tm.cols {
			if c := tm.emu.CellAt(x, y); c != nil && c.Content == "Z" {
				return fmt.Sprintf("%+v", c.Style)
			}
		}
	}
	return "(no Z drawn)"
}

// TestLinesTakeOnlyPlainLines: each way out of plain lines is refused,
// and leaves the screen as it was.
func TestLinesTakeOnlyPlainLines(t *testing.T) {
	for _, odd := range []string{"\t", "a\nb", "ab\rc", "\x1b[H", "\x1b[?1049h", "\x1b]0;t\x07", "\xc3\xa9", "\x1b[2K", strings.Repeat("z", screen.MaxFrag+1)} {
		l := screen.NewLines(10, 3)
		if !l.Write([]byte("one\r\ntwo\r\nthr")) {
			t.Fatal("plain lines refused")
		}
		before := string(l.Seed())
		if l.Write([]byte(odd)) {
			t.Fatalf("%q taken as plain", odd)
		}
		if got := string(l.Seed()); got != before {
			t.Fatalf("%q refused but the screen changed: %q, was %q", odd, got, before)
		}
	}
	// An erase right after a row's last column erases that column: not
	// plain, even when the row's start was held from an earlier write.
	l := screen.NewLines(4, 3)
	if !l.Write([]byte("abcd")) || l.Write([]byte("\x1b[K\r\n")) {
		t.Fatal("an erase after a full row taken as plain")
	}
}

// TestLinesKeepBounded: a long flood keeps a bounded number of lines
// and bytes, and a pen that is never reset stops the lines.
func TestLinesKeepBounded(t *testing.T) {
	l := screen.NewLines(80, 24)
	line := []byte(strings.Repeat("0123456789", 7) + "\r\n") // one row each
	var chunk []byte
	for range 40 {
		chunk = append(chunk, line...)
	}
	for range 2000 {
		if !l.Write(chunk) {
			t.Fatal("a flood of plain lines refused")
		}
	}
	if f := l.Footprint(); f > 1<<20 {
		t.Fatalf("80 000 lines kept in %d bytes", f)
	}
	if got, want := strings.Count(string(l.Seed()), "\r\n"), screen.ScrollbackLines+2*24; got < want || got > want+1 {
		t.Fatalf("the seed holds %d lines, want %d", got, want)
	}
	// One line longer than the lines keep goes to the emulator, whole or
	// cut across writes.
	long := append(bytes.Repeat([]byte("x"), 100<<10), "\r\n"...)
	if l.Write(long) {
		t.Fatal("a 100 KiB line taken")
	}
	if !l.Write(long[:10<<10]) || l.Write(long[10<<10:]) {
		t.Fatal("a 100 KiB line cut in two: its start not held, or its rest taken")
	}
}

// TestLinesPenBounded: lines that each set a colour and never reset it
// grow the pen; the lines stop taking more before it grows without bound,
// and their seed still gives the screen every byte gives.
func TestLinesPenBounded(t *testing.T) {
	l := screen.NewLines(40, 5)
	var all strings.Builder
	for i := range 100000 {
		p := fmt.Sprintf("\x1b[3%dmline %d\r\n", i%8, i)
		if !l.Write([]byte(p)) {
			if i < 1000 {
				t.Fatalf("refused after %d lines", i)
			}
			if f := l.Footprint(); f > 1<<20 {
				t.Fatalf("pen and lines in %d bytes", f)
			}
			ref := New(40, 5)
			feed(ref, all.String())
			seeded := New(40, 5)
			_, _ = seeded.Write(l.Seed())
			sameSnapshot(t, "pen flood", seeded.Snapshot(10), ref.Snapshot(10))
			return
		}
		all.WriteString(p)
	}
	t.Fatal("a pen never reset grew without bound")
}

// TestLinesRedrawMidSequence: attached while the program is in the middle
// of a colour sequence, the redraw begins it, so its rest (the raw bytes
// after the redraw) ends it instead of being drawn as text.
func TestLinesRedrawMidSequence(t *testing.T) {
	l := screen.NewLines(20, 3)
	if !l.Write([]byte("one\r\ntwo \x1b[3")) {
		t.Fatal("plain lines refused")
	}
	term := New(20, 3)
	defer term.Close()
	feed(term, string(l.Redraw()))
	feed(term, "1mred\r\n")
	if got := term.Snapshot(0).Lines; got[1] != "two red" {
		t.Fatalf("after the redraw and the sequence's rest: %q", got)
	}
	if p := penOf(term); !strings.Contains(p, "Fg:") || strings.Contains(p, "Fg:<nil>") {
		t.Fatalf("the sequence's colour was not taken: pen %s", p)
	}
}
