package emu

import (
	"github.com/shellctl/shellctl/internal/screen"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// rawLines is what the emulator shows fed as it is, read as Term reads.
func rawLines(e *vt.Emulator, cols, rows int) ([]string, []string) {
	lines := make([]string, rows)
	for y := range rows {
		var b strings.Builder
		for x := range cols {
			c := e.CellAt(x, y)
			switch {
			case c == nil || (!c.IsZero() && c.Content == ""):
				b.WriteByte(' ')
			case c.IsZero():
			default:
				b.WriteString(c.Content)
			}
		}
		lines[y] = strings.TrimRight(b.String(), " ")
	}
	var sb []string
	for _, l := range e.Scrollback().Lines() {
		sb = append(sb, strings.TrimRight(l.String(), " "))
	}
	return lines, sb
}

// TestScrollSame: line feeds done by moving rows give the screen and the
// scrollback the emulator's own give, for plain text, colours, cursor
// movement, scroll regions, the alternate screen, IND and random bytes.
func TestScrollSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"hello", "\r\n", "\n", "\x0b", "\x0c", "\x1b[31mred\x1b[m", "\x1b[2;5r", "\x1b[r", "\x1b[?1049h", "\x1b[?1049l",
		"\x1b[H", "\x1b[10;1H", "\x1b[K", "\x1b[2J", "\x1bD", "\x1bM", "\x1b[3S", "\x1b[20h", "\x1b[20l", "wide 世界 ", "\t", "\x1b[?7l", "\x1b[?7h",
		strings.Repeat("z", 37), "\x1b(0qqq\x1b(B", "\x1b[4h", "\x1b[4l", "\x1b[?6h", "\x1b[?6l",
		// IND, the 8-bit index, alone and after a whole character; and
		// the same byte inside a character (Ä), where it is no control.
		"\x84", "\x84\x84\x84", "é\x84", "\xc3\x84", "\x1b[20h\x84x\x1b[20l"}
	for _, size := range [][2]int{{20, 6}, {37, 10}, {5, 1}} {
		for round := range 30 {
			var in strings.Builder
			for range 400 {
				if rng.IntN(6) == 0 {
					// Random bytes below 0x80: controls, ESC, sequences cut
					// short. (Above it, where a write ends between a
					// character and its combining mark decides how they
					// combine: the emulator ends a cluster at the end of
					// every write, as reads of a terminal end anywhere.)
					junk := make([]byte, rng.IntN(40))
					for i := range junk {
						junk[i] = byte(rng.IntN(128))
					}
					in.Write(junk)
					continue
				}
				in.WriteString(pieces[rng.IntN(len(pieces))])
			}
			raw := vt.NewEmulator(size[0], size[1])
			raw.SetScrollbackSize(100000)
			go func() {
				b := make([]byte, 256)
				for {
					if _, err := raw.Read(b); err != nil {
						return
					}
				}
			}()
			_, _ = raw.Write([]byte(in.String()))
			tm := New(size[0], size[1])
			feed(tm, in.String())
			wantLines, wantSB := rawLines(raw, size[0], size[1])
			got := tm.Snapshot(screen.ScrollbackLines)
			if len(wantSB) > screen.ScrollbackLines {
				wantSB = wantSB[len(wantSB)-screen.ScrollbackLines:]
			}
			if wantSB == nil {
				wantSB = []string{}
			}
			if !reflect.DeepEqual(*got.Scrollback, wantSB) {
				g := *got.Scrollback
				i := 0
				for i < len(g) && i < len(wantSB) && g[i] == wantSB[i] {
					i++
				}
				t.Fatalf("size %v round %d: scrollback differs at %d of %d/%d: got %q want %q", size, round, i, len(g), len(wantSB), g[i:min(i+3, len(g))], wantSB[i:min(i+3, len(wantSB))])
			}
			if !reflect.DeepEqual(got.Lines, wantLines) {
				t.Fatalf("size %v round %d: differs from the emulator's own scrolling\ngot  %q\nwant %q\ngot scrollback  %q\nwant scrollback %q",
					size, round, got.Lines, wantLines, tail(*got.Scrollback), tail(wantSB))
			}
			if pos := raw.CursorPosition(); pos.X != got.Cursor.Col || pos.Y != got.Cursor.Row {
				t.Fatalf("size %v round %d: cursor %+v, the emulator's %v", size, round, got.Cursor, pos)
			}
			tm.Close()
		}
	}
}

// TestEmulatorState: the emulator's fields the fast paths read are found.
func TestEmulatorState(t *testing.T) {
	tm := newWarm(10, 4)
	defer tm.Close()
	if !tm.stOK {
		t.Fatal("the emulator's state fields were not found: the fast paths are off")
	}
	if !tm.st.ground() || !tm.st.fullRegion(0, 10, 4) || !tm.st.plainText() {
		t.Fatal("a new emulator's state reads wrong")
	}
	feed(tm, "\x1b]0;tit")
	if tm.st.ground() {
		t.Fatal("inside an OSC: ground")
	}
	feed(tm, "le\x07\x1b[2;3r")
	if !tm.st.ground() || tm.st.fullRegion(0, 10, 4) {
		t.Fatal("after DECSTBM 2;3: still a whole-screen region")
	}
	feed(tm, "\x1b(0")
	if tm.st.plainText() {
		t.Fatal("with the line drawing set in G0: plain text")
	}
	feed(tm, "\x1b(B\x1b[r\x1b[4;1H123456789")
	if tm.st.atPhantom() {
		t.Fatal("nine characters on a row of ten: a wrap pending")
	}
	feed(tm, "0")
	if !tm.st.atPhantom() || tm.emu.CursorPosition().X != 9 {
		t.Fatal("ten characters on a row of ten: no wrap pending")
	}
	feed(tm, "\r")
	if tm.st.atPhantom() {
		t.Fatal("a wrap pending after CR")
	}
}

// TestIndexScrollsByMovingRows: IND (0x84) at the bottom of the screen
// scrolls the fast way, as a line feed does, and the screen is the
// emulator's own (TestScrollSame); inside a character (Ä) the same byte
// is no control and scrolls nothing.
func TestIndexScrollsByMovingRows(t *testing.T) {
	tm := newWarm(20, 5)
	defer tm.Close()
	feed(tm, "\x1b[5;1H")
	feed(tm, strings.Repeat("x\x84", 50))
	if tm.moved != 50 {
		t.Fatalf("50 INDs at the bottom: %d moved rows, want 50 (the emulator copied the rest cell by cell)", tm.moved)
	}
	feed(tm, "\xc3\x84\xc3\x84")
	if tm.moved != 50 {
		t.Fatalf("0x84 inside a character was taken for IND: %d moved", tm.moved)
	}
	raw := vt.NewEmulator(20, 5)
	go func() {
		b := make([]byte, 256)
		for {
			if _, err := raw.Read(b); err != nil {
				return
			}
		}
	}()
	_, _ = raw.Write([]byte("\x1b[5;1H" + strings.Repeat("x\x84", 50) + "\xc3\x84\xc3\x84"))
	want, _ := rawLines(raw, 20, 5)
	if got := tm.Snapshot(0); !reflect.DeepEqual(got.Lines, want) {
		t.Fatalf("screen %q, the emulator's own %q", got.Lines, want)
	}
}

// TestAppendTextIsTheRowsString: a row's text for the scrollback is the
// row's String with trailing spaces trimmed, for rows of every kind the
// random feeds of TestScrollSame leave (wide characters, colours, blanks
// written with attributes, spaces).
func TestAppendTextIsTheRowsString(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pieces := []string{"a", " ", "世界", "\x1b[31m", "\x1b[41m \x1b[m", "\x1b[m", "\x1b[5C", "é", "\t", "\x1b[K"}
	for round := range 200 {
		tm := newWarm(23, 3)
		var in strings.Builder
		for range 30 {
			in.WriteString(pieces[rng.IntN(len(pieces))])
		}
		feed(tm, "\x1b[H"+in.String())
		buf := tm.st.bufs[0]
		for y, l := range buf.Lines {
			want := strings.TrimRight(l.String(), " ")
			if got := string(appendText([]byte("keep"), l)); got != "keep"+want {
				t.Fatalf("round %d row %d of %q: %q, want %q", round, y, in.String(), got, "keep"+want)
			}
		}
		tm.Close()
	}
}
