package emu

import (
	"fmt"
	"github.com/shellctl/shellctl/internal/screen"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// newWarm is a Term that emulates from the start.
func newWarm(cols, rows int) *Term {
	t := New(cols, rows)
	t.warm()
	return t
}

// coldSize is the terminal size of a fuzz case.
func coldSize(c, r uint8) (int, int) { return 1 + int(c)%250, 1 + int(r)%60 }

// runCold feeds in, cut as plan says, to a Term that starts cold and to
// one that emulates from the start, and fails on the first difference of
// their snapshots (all fields, the whole scrollback) or cursor keys mode.
// A plan byte b > 0 is a write of the next b bytes; 0 is a resize to the
// size of the next two plan bytes (coldSize). What the plan leaves is one
// write.
func runCold(t *testing.T, c, r uint8, in, plan []byte) {
	cols, rows := coldSize(c, r)
	got, want := New(cols, rows), newWarm(cols, rows)
	defer got.Close()
	defer want.Close()
	var did []string // the steps so far, for the message
	check := func() {
		t.Helper()
		a, b := got.Snapshot(screen.ScrollbackLines), want.Snapshot(screen.ScrollbackLines)
		if !reflect.DeepEqual(a, b) || got.AppCursor() != want.AppCursor() {
			t.Fatalf("%dx%d after %q (cold: %v):\nstarted cold: %+v %q app cursor %v\nemulated:     %+v %q app cursor %v",
				cols, rows, did, got.emu == nil, a.Cursor, a.Lines, got.AppCursor(), b.Cursor, b.Lines, want.AppCursor())
		}
		if !reflect.DeepEqual(*a.Scrollback, *b.Scrollback) || a.Title != b.Title || a.AltScreen != b.AltScreen {
			t.Fatalf("%dx%d after %q: scrollback, title or alt screen differ", cols, rows, did)
		}
	}
	write := func(p []byte) {
		_, _ = got.Write(p)
		_, _ = want.Write(p)
		did = append(did, string(p))
		check()
	}
	check()
	for i := 0; i < len(plan) && len(in) > 0; i++ {
		if plan[i] == 0 {
			if i+2 >= len(plan) {
				break
			}
			cols, rows = coldSize(plan[i+1], plan[i+2])
			i += 2
			got.Resize(cols, rows)
			want.Resize(cols, rows)
			did = append(did, fmt.Sprintf("<resize %dx%d>", cols, rows))
			check()
			continue
		}
		n := min(int(plan[i]), len(in))
		write(in[:n])
		in = in[n:]
	}
	if len(in) > 0 {
		write(in)
	}
}

// What programs print, mostly within the cold subset (words, line ends,
// controls), some of it just outside.
var (
	coldWords    = []string{"hi", "hello world", "$ ", "a", "  ", "x", "0123456789"}
	coldControls = []string{"\r", "\n", "\v", "\f", "\t", "\t", "\b", "\b\b",
		"\x1b[31m", "\x1b[m", "\x1b[0m", "\x1b[1;38;5;200m", "\x1b[38:2::1:2:3m", "\x1b[01;34m", "\x1b[41m",
		"\x1b[K", "\x1b[0K", "\x1b[", "\x1b", "\x1b[3", "\x1b[99999999999999999999m"}
	coldOutside = []string{"\x1b[1K", "\x1b[2K", "\x1b[00K", "\x1b[;K", "\x1b[H", "\x1b[2;5H", "é", "世", "\x1b]0;title\x07",
		"\x1b[?1h", "\x1b[?1049h", "\x07", "\x00", "\x1b[?25l", "\x1b(0", "\x1b[2J", "\x1bM", "\x1b[5;10r",
		"\x1b[20h", "\x1b[A", "\x7f", "\x1bc", "\x1b[" + strings.Repeat("1;", 40) + "m", "\x1b[1m\x1b[K"}
)

// coldInput is a random input: words, line ends, controls, runs of about
// a row's width, and now and then something outside the subset.
func coldInput(rng *rand.Rand, cols, rows int) []byte {
	var b strings.Builder
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	for range rng.IntN(6*rows + 10) {
		switch k := rng.IntN(100); {
		case k < 40:
			b.WriteString(pick(coldWords))
		case k < 52:
			b.WriteString("\r\n")
		case k < 82:
			b.WriteString(pick(coldControls))
		case k < 95:
			// A row filled to the last column or one short or over,
			// then what comes at a pending wrap.
			b.WriteString(strings.Repeat("w", max(0, cols-1+rng.IntN(3))))
			b.WriteString(pick(coldControls))
		default:
			b.WriteString(pick(coldOutside))
		}
	}
	return []byte(b.String())
}

// FuzzColdSame: a Term that starts cold shows what one that emulates from
// the start does, for any input in any writes with resizes between them.
func FuzzColdSame(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	sizes := [][2]uint8{{0, 0}, {2, 1}, {7, 2}, {8, 3}, {16, 4}, {19, 9}, {79, 23}, {199, 49}}
	for i := range 600 {
		sz := sizes[i%len(sizes)]
		cols, rows := coldSize(sz[0], sz[1])
		in := coldInput(rng, cols, rows)
		var plan []byte
		for range rng.IntN(12) {
			if rng.IntN(10) == 0 {
				plan = append(plan, 0, byte(rng.IntN(256)), byte(rng.IntN(256)))
				continue
			}
			plan = append(plan, byte(1+rng.IntN(255)))
		}
		f.Add(sz[0], sz[1], in, plan)
	}
	// Past the bound of bytes kept, all within the subset.
	f.Add(uint8(79), uint8(23), []byte(strings.Repeat("ab\x1b[1mcd\x1b[m\r", screen.ColdMax/10+1)), []byte{200, 100})
	f.Add(uint8(79), uint8(23), []byte(strings.Repeat("x", screen.ColdMax)+"y"), []byte{255})
	f.Fuzz(runCold)
}

// TestColdUntilNeeded: the emulator is made only when the input leaves
// the subset, the size changes or the bytes kept pass the bound.
func TestColdUntilNeeded(t *testing.T) {
	ls := "\x1b[0m\x1b[01;34mdir\x1b[0m\t\x1b[01;32mrun.sh\x1b[0m\tfile.txt\r\n"
	for _, c := range []struct {
		name string
		in   []string
		cold bool
	}{
		{"echo hi", []string{"hi\r\n"}, true},
		{"ls in colour", []string{ls, ls}, true},
		{"grep in colour", []string{"a \x1b[01;31m\x1b[Kmatch\x1b[m\x1b[K b\r\n"}, true},
		{"an SGR cut between writes", []string{"x\x1b[3", "1mred\x1b[m\r\n"}, true},
		{"a progress line", []string{"10%\r", "20%\r", "done\r\n"}, true},
		{"a full row then a wrap", []string{strings.Repeat("z", 80), "next\r\n"}, true},
		{"the bottom row", []string{strings.Repeat("line\r\n", 23), "last"}, true},
		{"a line feed on the bottom row", []string{strings.Repeat("line\r\n", 24)}, false},
		{"a wrap from the bottom row", []string{strings.Repeat("\n", 23), strings.Repeat("z", 81)}, false},
		{"cursor position", []string{"a\x1b[2;2H"}, false},
		{"UTF-8", []string{"café\r\n"}, false},
		{"a title", []string{"\x1b]0;t\x07"}, false},
		{"application cursor keys", []string{"\x1b[?1h"}, false},
		{"past the bound", []string{strings.Repeat("a\r", screen.ColdMax/2), "b"}, false},
	} {
		tm := New(80, 24)
		for _, p := range c.in {
			feed(tm, p)
		}
		if cold := !tm.Emulating(); cold != c.cold {
			t.Errorf("%s: cold %v, want %v", c.name, cold, c.cold)
		}
		if c.cold {
			if f := tm.Footprint(); f > 2*screen.ColdMax {
				t.Errorf("%s: a cold screen's footprint is %d bytes", c.name, f)
			}
		}
		tm.Close()
	}
	tm := New(80, 24)
	defer tm.Close()
	feed(tm, "abc")
	tm.Resize(80, 24)
	if tm.emu == nil {
		t.Error("after a resize: still cold")
	}
}

// TestColdSnapshot: what a cold screen answers, spelled out.
func TestColdSnapshot(t *testing.T) {
	tm := New(10, 5)
	defer tm.Close()
	feed(tm, "ab\tc\x1b[32mdef\x1b[m\r\n0123456789XY\r\n\x1b[1mxyz\bQ\x1b[K")
	s := tm.Snapshot(5)
	want := screen.Snapshot{Cols: 10, Rows: 5, Cursor: screen.Cursor{Row: 4, Col: 3, Visible: true},
		Lines: []string{"ab      cd", "ef", "0123456789", "XY", "xyQ"}, Scrollback: &[]string{}}
	if tm.emu != nil || !reflect.DeepEqual(s, want) {
		t.Fatalf("cold %v: %+v %q, want %+v %q", tm.emu == nil, s, s.Lines, want, want.Lines)
	}
}
