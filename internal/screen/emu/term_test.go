package emu

import (
	"bytes"
	"fmt"
	"github.com/shellctl/shellctl/internal/screen"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func feed(t *Term, s string) { _, _ = t.Write([]byte(s)) }

func TestLinesCursorTrim(t *testing.T) {
	tm := New(20, 4)
	defer tm.Close()
	feed(tm, "hello   \r\nwor\x1b[31mld\x1b[m\r\n  x")
	s := tm.Snapshot(0)
	want := []string{"hello", "world", "  x", ""}
	if !reflect.DeepEqual(s.Lines, want) {
		t.Fatalf("lines %q, want %q", s.Lines, want)
	}
	if s.Cursor != (screen.Cursor{Row: 2, Col: 3, Visible: true}) {
		t.Fatalf("cursor %+v", s.Cursor)
	}
	if s.Cols != 20 || s.Rows != 4 || s.AltScreen || s.Scrollback != nil {
		t.Fatalf("snapshot %+v", s)
	}
	feed(tm, "\x1b[?25l\x1b[1;6H!")
	s = tm.Snapshot(0)
	if s.Cursor != (screen.Cursor{Row: 0, Col: 6, Visible: false}) || s.Lines[0] != "hello!" {
		t.Fatalf("after CUP: cursor %+v line %q", s.Cursor, s.Lines[0])
	}
}

func TestWideCharacters(t *testing.T) {
	tm := New(10, 2)
	defer tm.Close()
	feed(tm, "a世界b")
	if got := tm.Snapshot(0).Lines[0]; got != "a世界b" {
		t.Fatalf("line %q", got)
	}
	if c := tm.Snapshot(0).Cursor.Col; c != 6 {
		t.Fatalf("cursor col %d, want 6 (two wide characters)", c)
	}
}

func TestAltScreenAndTitle(t *testing.T) {
	tm := New(20, 3)
	defer tm.Close()
	feed(tm, "shell$ less\r\n")
	feed(tm, "\x1b]0;my title\x07\x1b[?1049h\x1b[Hpage one")
	s := tm.Snapshot(0)
	if !s.AltScreen || s.Lines[0] != "page one" || s.Title != "my title" {
		t.Fatalf("alt screen: %+v", s)
	}
	feed(tm, "\x1b[?1049l")
	s = tm.Snapshot(0)
	if s.AltScreen || s.Lines[0] != "shell$ less" {
		t.Fatalf("after leaving alt screen: %+v", s)
	}
	feed(tm, "\x1b]2;other\x1b\\")
	if got := tm.Snapshot(0).Title; got != "other" {
		t.Fatalf("title %q", got)
	}
}

func TestScrollbackCapAndOrder(t *testing.T) {
	tm := New(40, 5)
	defer tm.Close()
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line %d\r\n", i)
	}
	feed(tm, b.String())
	s := tm.Snapshot(5000)
	sb := *s.Scrollback
	if len(sb) != screen.ScrollbackLines {
		t.Fatalf("scrollback has %d rows, want the cap %d", len(sb), screen.ScrollbackLines)
	}
	// 5000 lines and a blank bottom row on a 5-row screen: 4 on screen.
	if sb[len(sb)-1] != "line 4995" || sb[0] != "line 3996" {
		t.Fatalf("scrollback runs %q … %q", sb[0], sb[len(sb)-1])
	}
	if s.Lines[0] != "line 4996" || s.Lines[3] != "line 4999" || s.Lines[4] != "" {
		t.Fatalf("screen %q", s.Lines)
	}
	if got := *tm.Snapshot(3).Scrollback; !reflect.DeepEqual(got, sb[len(sb)-3:]) {
		t.Fatalf("scrollback=3 gave %q", got)
	}
	empty := New(10, 2)
	defer empty.Close()
	if got := empty.Snapshot(10).Scrollback; got == nil || len(*got) != 0 {
		t.Fatalf("asked scrollback of a fresh screen: %v, want an empty list", got)
	}
}

func TestScrollbackByteCap(t *testing.T) {
	tm := New(4000, 16)
	defer tm.Close()
	feed(tm, strings.Repeat(strings.Repeat("y", 3000)+"\r\n", 1000))
	if tm.sb.bytes > screen.ScrollbackBytes {
		t.Fatalf("scrollback holds %d bytes, over the cap %d", tm.sb.bytes, screen.ScrollbackBytes)
	}
	if n := tm.sb.len(); n != screen.ScrollbackBytes/3000 {
		t.Fatalf("scrollback holds %d rows, want %d", n, screen.ScrollbackBytes/3000)
	}
}

// TestFootprintBounded prints 100 000 lines, plain and not, and checks the
// screen's accounting stays within the stated bound.
func TestFootprintBounded(t *testing.T) {
	tm := New(200, 50)
	defer tm.Close()
	bound := 2*200*50*CellBytes + screen.ScrollbackLines*16 + screen.ScrollbackBytes + parserBytes
	// In reads of 1000 lines, as a pump hands a flood over.
	var b strings.Builder
	for i := range 100000 {
		if i%500 != 0 {
			fmt.Fprintf(&b, "%d %s\x1b[1m%s\x1b[K\r\n", i, strings.Repeat("z", 150), "b")
		} else {
			fmt.Fprintf(&b, "\x1b[1m%d\x1b[K\tx\r\n", i)
		}
		if i%1000 == 999 {
			feed(tm, b.String())
			b.Reset()
			if f := tm.Footprint(); f > bound {
				t.Fatalf("footprint %d over the bound %d after %d lines", f, bound, i+1)
			}
		}
	}
	if got := tm.Snapshot(1).Lines[48]; got != "99999 "+strings.Repeat("z", 150)+"b" {
		t.Fatalf("last line %q", got)
	}
	if f := tm.Footprint(); f > bound {
		t.Fatalf("footprint %d over the bound %d", f, bound)
	}
	if n := tm.emu.ScrollbackLen(); n != 0 {
		t.Fatalf("the emulator still holds %d rows of scrollback cells", n)
	}
}

func altScrollback(tm *Term) reflect.Value {
	return reflect.ValueOf(tm.emu).Elem().FieldByName("scrs").Index(1).FieldByName("scrollback")
}

func TestAltScreenKeepsNoScrollback(t *testing.T) {
	tm := newWarm(40, 10)
	defer tm.Close()
	if !altScrollback(tm).IsNil() {
		t.Fatal("the alternate screen still has a scrollback")
	}
	feed(tm, "\x1b[?1049h")
	for i := range 3000 {
		feed(tm, fmt.Sprintf("\x1b[2J\x1b[Hpage %d\r\n\n\n\n\n\n\n\n\n\n\n\n", i))
	}
	feed(tm, "\x1b[?1049l")
	if s := tm.Snapshot(100); len(*s.Scrollback) != 0 {
		t.Fatalf("alternate screen rows reached the scrollback: %d", len(*s.Scrollback))
	}
}

// byteByByte feeds s one byte at a time: the fast path never runs.
func byteByByte(tm *Term, s string) {
	for i := 0; i < len(s); i++ {
		_, _ = tm.Write([]byte{s[i]})
	}
}

func TestFastForwardSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		n := rng.IntN(40)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
			if rng.IntN(8) == 0 {
				b[i] = ' '
			}
		}
		return string(b)
	}
	for _, size := range [][2]int{{20, 5}, {80, 24}, {7, 1}, {30, 2}} {
		for round := range 20 {
			var b strings.Builder
			b.WriteString("$ prompt " + word())
			for range 1 + rng.IntN(4) {
				for range rng.IntN(200) {
					switch rng.IntN(10) {
					case 0:
						b.WriteString("\x1b[3" + fmt.Sprint(rng.IntN(8)) + "m" + word() + "\x1b[m" + word())
					case 1:
						b.WriteString(strings.Repeat("w", size[0]*(1+rng.IntN(2)))) // exactly full rows
					case 2:
						b.WriteString(word() + word() + word() + word())
					case 3:
						b.WriteString(word() + "\x1b[K" + word() + "\x1b[0K")
					}
					b.WriteString(word() + "\r\n")
				}
				switch rng.IntN(4) {
				case 0:
					b.WriteString("\x1b[2;1Hover" + word()) // the cursor leaves the bottom
				case 1:
					b.WriteString("\x1b[" + fmt.Sprint(size[1]) + ";1H")
				case 2:
					b.WriteString("partial " + word())
				}
			}
			in := b.String()
			fast, slow := New(size[0], size[1]), New(size[0], size[1])
			// In pieces as a pump hands them over.
			for rest := in; rest != ""; {
				n := min(len(rest), 1+rng.IntN(4096))
				feed(fast, rest[:n])
				rest = rest[n:]
			}
			byteByByte(slow, in)
			a, s := fast.Snapshot(screen.ScrollbackLines), slow.Snapshot(screen.ScrollbackLines)
			if !reflect.DeepEqual(a, s) {
				t.Fatalf("size %v round %d: fast-forwarded screen differs\nfast: %q %+v\nslow: %q %+v\nfast scrollback tail %q\nslow scrollback tail %q",
					size, round, a.Lines, a.Cursor, s.Lines, s.Cursor, tail(*a.Scrollback), tail(*s.Scrollback))
			}
			fast.Close()
			slow.Close()
		}
	}
}

func tail(l []string) []string { return l[max(0, len(l)-5):] }

// TestFastForwardTaken: a flood at the bottom is fast-forwarded (else
// the emulator could not keep up with a pty), and states that change
// what plain lines do are not.
func TestFastForwardTaken(t *testing.T) {
	var flood bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&flood, "flood line %d\r\n", i)
	}
	for _, c := range []struct {
		name  string
		setup string
		fast  bool
	}{
		{"bottom of the main screen", "\x1b[24;1H", true},
		{"not at the bottom", "\x1b[3;1H", false},
		{"scroll region", "\x1b[2;10r\x1b[10;1H", false},
		{"scroll region reset", "\x1b[2;10r\x1b[r\x1b[24;1H", true},
		{"alternate screen", "\x1b[?1049h\x1b[24;1H", false},
		{"line drawing set", "\x1b(0\x1b[24;1H", false},
		{"line drawing set and back", "\x1b(0\x1b(B\x1b[24;1H", true},
		{"autowrap off", "\x1b[?7l\x1b[24;1H", false},
		{"inside an OSC", "\x1b]0;title", false},
	} {
		tm := New(80, 24)
		feed(tm, c.setup)
		n := tm.fastForward(flood.Bytes())
		took := n > len("flood line 0\r\n")
		if took != c.fast {
			t.Errorf("%s: fast path taken %v, want %v", c.name, took, c.fast)
		}
		// Whatever the path, the result is the byte-by-byte one.
		fed := New(80, 24)
		byteByByte(fed, c.setup)
		byteByByte(fed, flood.String())
		_, _ = tm.Write(flood.Bytes()[n:])
		if a, b := tm.Snapshot(screen.ScrollbackLines), fed.Snapshot(screen.ScrollbackLines); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: screens differ:\n%q\n%q", c.name, a.Lines, b.Lines)
		}
		tm.Close()
		fed.Close()
	}
}

func TestResize(t *testing.T) {
	tm := New(20, 5)
	defer tm.Close()
	feed(tm, "abc")
	tm.Resize(40, 10)
	s := tm.Snapshot(0)
	if s.Cols != 40 || s.Rows != 10 || len(s.Lines) != 10 || s.Lines[0] != "abc" {
		t.Fatalf("after resize: %+v", s)
	}
	if !screen.Fits(256, 256) || screen.Fits(4096, 4096) || screen.Fits(0, 5) {
		t.Fatal("Fits is wrong")
	}
}

func BenchmarkFlood(b *testing.B) {
	line := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 3)[:99] + "\r\n"
	chunk := []byte(strings.Repeat(line, 320))
	tm := New(200, 50)
	defer tm.Close()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		_, _ = tm.Write(chunk)
	}
}

// BenchmarkFloodSmallReads: a pty hands over at most 4 KiB a read.
func BenchmarkFloodSmallReads(b *testing.B) {
	line := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 3)[:99] + "\r\n"
	flood := []byte(strings.Repeat(line, 4000))
	tm := New(200, 50)
	defer tm.Close()
	b.SetBytes(int64(len(flood)))
	for b.Loop() {
		for p := flood; len(p) > 0; {
			n := min(len(p), 4095)
			_, _ = tm.Write(p[:n])
			p = p[n:]
		}
	}
}

func TestPrintable8(t *testing.T) {
	for b := range 256 {
		for pos := range 8 {
			w := []byte("abcdefgh")
			w[pos] = byte(b)
			got := screen.Printable8(uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56)
			if want := b >= 0x20 && b <= 0x7e; got != want {
				t.Fatalf("byte %#x at %d: screen.Printable8 %v, want %v", b, pos, got, want)
			}
		}
	}
}

// BenchmarkRandomBytes: what cat of a binary file costs.
func BenchmarkRandomBytes(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	junk := make([]byte, 1<<20)
	for i := range junk {
		junk[i] = byte(rng.IntN(256))
	}
	tm := New(200, 50)
	defer tm.Close()
	b.SetBytes(int64(len(junk)))
	for b.Loop() {
		for p := junk; len(p) > 0; {
			n := min(len(p), 64<<10)
			_, _ = tm.Write(p[:n])
			p = p[n:]
		}
	}
}

// TestKeysFollowDECCKM: the cursor keys follow the mode the program set.
func TestKeysFollowDECCKM(t *testing.T) {
	tm := New(10, 2)
	defer tm.Close()
	up := func() string { b, _ := screen.Keys([]string{"Up"}, tm.AppCursor()); return string(b) }
	if up() != "\x1b[A" {
		t.Fatalf("default: %q", up())
	}
	feed(tm, "\x1b[?1h")
	if up() != "\x1bOA" {
		t.Fatalf("after DECCKM set: %q", up())
	}
	feed(tm, "\x1b[?1l")
	if up() != "\x1b[A" {
		t.Fatalf("after DECCKM reset: %q", up())
	}
	feed(tm, "\x1b[?1h\x1bc")
	if up() != "\x1b[A" {
		t.Fatalf("after a full reset: %q", up())
	}
}
