package emu

import (
	"fmt"
	"github.com/shellctl/shellctl/internal/screen"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestLongLinesSame: long lines with no line end (wrapped at the margin)
// fast-forwarded give the screen, cursor and scrollback that feeding every
// byte gives, whatever the column the run starts at, the write boundaries,
// colours inside the run, what ends it, and resizes between writes.
func TestLongLinesSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	run := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			switch rng.IntN(40) {
			case 0:
				b.WriteString("\x1b[3" + fmt.Sprint(rng.IntN(8)) + "m")
			case 1:
				b.WriteString("\x1b[m")
			default:
				b.WriteByte(byte('A' + rng.IntN(58)))
			}
		}
		return b.String()
	}
	for _, size := range [][2]int{{20, 5}, {80, 24}, {7, 1}, {30, 2}, {13, 3}} {
		cols := size[0]
		for round := range 30 {
			var b strings.Builder
			b.WriteString("$ prompt\r\n")
			if round%3 == 0 {
				b.WriteString("wide 日本語 é\r\n") // rows that scroll off hold more than ASCII
			}
			for range 1 + rng.IntN(6) {
				switch rng.IntN(6) {
				case 0:
					b.WriteString(run(cols * (2 + rng.IntN(40)))) // whole rows, more or less
				case 1:
					b.WriteString(strings.Repeat("x", cols*(1+rng.IntN(30)))) // exactly full rows
				case 2:
					b.WriteString(run(rng.IntN(5*cols)) + "\r\n")
				case 3:
					b.WriteString(run(rng.IntN(3*cols)) + "\r" + run(rng.IntN(2*cols))) // a progress line
				case 4:
					b.WriteString(run(cols*rng.IntN(4)) + "\x1b[K" + run(rng.IntN(cols))) // erase in a run
				case 5:
					b.WriteString("\x1b[" + fmt.Sprint(1+rng.IntN(size[1])) + ";" + fmt.Sprint(1+rng.IntN(cols)) + "H" + run(rng.IntN(4*cols)))
				}
			}
			in := b.String()
			fast, slow := New(size[0], size[1]), New(size[0], size[1])
			resized := false
			for rest := in; rest != ""; {
				n := min(len(rest), 1+rng.IntN(3*cols))
				if rng.IntN(30) == 0 {
					n = len(rest)
				}
				feed(fast, rest[:n])
				byteByByte(slow, rest[:n])
				rest = rest[n:]
				if !resized && rng.IntN(60) == 0 {
					// A resize between writes, to a size of the same width
					// or not: what the fast path held must come out right.
					c, r := max(1, cols+rng.IntN(5)-2), max(1, size[1]+rng.IntN(3)-1)
					fast.Resize(c, r)
					slow.Resize(c, r)
					resized = true
				}
			}
			a, s := fast.Snapshot(screen.ScrollbackLines), slow.Snapshot(screen.ScrollbackLines)
			if !reflect.DeepEqual(a, s) {
				t.Fatalf("size %v round %d: screens differ for %q\nfast: %q %+v\nslow: %q %+v\nfast scrollback tail %q\nslow scrollback tail %q",
					size, round, in, a.Lines, a.Cursor, s.Lines, s.Cursor, tail(*a.Scrollback), tail(*s.Scrollback))
			}
			fast.Close()
			slow.Close()
		}
	}
}

// TestLongLineTaken: a long line at the bottom of the screen goes past the
// emulator (else a 50 MB base64 line took the emulator most of a minute),
// from the start of the bottom row, from the middle of it, and with a wrap
// pending; a long line elsewhere on the screen is fed as usual until it
// reaches the bottom.
func TestLongLineTaken(t *testing.T) {
	long := strings.Repeat("QUJDRA", 2000) // 12 000 characters: 150 rows of 80
	for _, c := range []struct {
		name  string
		setup string
		fast  bool
	}{
		{"start of the bottom row", "\x1b[24;1H", true},
		{"middle of the bottom row", "\x1b[24;31Hprompt$ ", true},
		{"wrap pending", "\x1b[24;1H" + strings.Repeat("w", 80), true},
		{"top of the screen", "\x1b[H", false},
		{"scroll region", "\x1b[2;10r\x1b[10;1H", false},
		{"autowrap off", "\x1b[?7l\x1b[24;1H", false},
	} {
		tm := New(80, 24)
		feed(tm, c.setup)
		n := tm.fastForward([]byte(long))
		if took := n > 0 && tm.pend != nil; took != c.fast {
			t.Errorf("%s: fast path taken %v (%d bytes), want %v", c.name, took, n, c.fast)
		}
		fed := New(80, 24)
		byteByByte(fed, c.setup+long)
		_, _ = tm.Write([]byte(long[n:]))
		if a, b := tm.Snapshot(screen.ScrollbackLines), fed.Snapshot(screen.ScrollbackLines); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: screens differ:\n%q %+v\n%q %+v", c.name, a.Lines, a.Cursor, b.Lines, b.Cursor)
		}
		tm.Close()
		fed.Close()
	}
}

// TestLongLineSmallWrites: a long line that comes in writes shorter than
// a row (a slow pipe, a pty read short) goes past the emulator all the
// same: once a write fills the bottom row, the screen is pending and the
// writes after it add rows to it.
func TestLongLineSmallWrites(t *testing.T) {
	tm := New(200, 50)
	defer tm.Close()
	feed(tm, "\x1b[50;1H")
	chunk := []byte(strings.Repeat("a", 100))
	for range 1000 {
		_, _ = tm.Write(chunk)
	}
	if tm.pend == nil {
		t.Fatal("100 000 characters in writes of 100: the emulator drew every row")
	}
	want := New(200, 50)
	defer want.Close()
	byteByByte(want, "\x1b[50;1H"+strings.Repeat("a", 100_000))
	if a, b := tm.Snapshot(screen.ScrollbackLines), want.Snapshot(screen.ScrollbackLines); !reflect.DeepEqual(a, b) {
		t.Errorf("screens differ:\n%q %+v\n%q %+v", a.Lines, a.Cursor, b.Lines, b.Cursor)
	}
}

// BenchmarkLongLine: one line with no end (base64 -w 0), in pty-sized reads.
func BenchmarkLongLine(b *testing.B) {
	chunk := []byte(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", 120)[:4095])
	tm := New(200, 50)
	defer tm.Close()
	feed(tm, "\x1b[50;1H")
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		_, _ = tm.Write(chunk)
	}
}
