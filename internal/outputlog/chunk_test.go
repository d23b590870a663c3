package outputlog

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// chunkString shows chunks as t"…" / b"…" for failure messages and
// table comparisons.
func chunkString(cs []Chunk) string {
	var sb strings.Builder
	for i, c := range cs {
		if i > 0 {
			sb.WriteByte(' ')
		}
		if c.Text {
			sb.WriteString("t")
		} else {
			sb.WriteString("b")
		}
		sb.WriteString(quote(c.Data))
		sb.WriteString("@")
		sb.WriteString(itoa(c.Offset))
	}
	return sb.String()
}

func quote(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '"' {
			sb.WriteByte(c)
		} else {
			const hex = "0123456789abcdef"
			sb.WriteString(`\x`)
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&15])
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    string
		off   int64
		final bool
		want  string
		n     int
	}{
		{"text", "hello\n", 0, false, `t"hello\x0a"@0`, 6},
		{"offset carried", "ab", 100, true, `t"ab"@100`, 2},
		{"cjk whole", "\u4e16\u754c", 0, false, `t"\xe4\xb8\x96\xe7\x95\x8c"@0`, 6},
		{"incomplete tail held", "ok\xe4\xb8", 0, false, `t"ok"@0`, 2},
		{"incomplete tail final goes raw", "ok\xe4\xb8", 0, true, `t"ok"@0 b"\xe4\xb8"@2`, 4},
		{"only an incomplete prefix held", "\xf0\x9f\x98", 7, false, ``, 0},
		{"invalid bytes raw", "\xff\xfeok\n", 0, false, `b"\xff\xfe"@0 t"ok\x0a"@2`, 5},
		{"invalid tail is not held", "ok\xff", 0, false, `t"ok"@0 b"\xff"@2`, 3},
		{"broken sequence mid-window", "a\xe4Zb", 0, false, `t"a"@0 b"\xe4"@1 t"Zb"@2`, 4},
		{"short text between raw joins it", "\xffab\xfe", 0, true, `b"\xffab\xfe"@0`, 4},
		{"long text between raw stays text", "\xff0123456789abcdef\xfe", 0, true, `b"\xff"@0 t"0123456789abcdef"@1 b"\xfe"@17`, 18},
		{"continuation bytes at a cut offset go raw", "\x96\xe7\x95\x8c", 0, true, `b"\x96"@0 t"\xe7\x95\x8c"@1`, 4},
		{"empty", "", 0, false, ``, 0},
	} {
		got, n := Split(nil, []byte(c.in), c.off, c.final)
		if s := chunkString(got); s != c.want || n != c.n {
			t.Errorf("%s: Split(%q, final %v) = %s, %d; want %s, %d", c.name, c.in, c.final, s, n, c.want, c.n)
		}
	}
}

// TestSplitAppends keeps the chunks already in dst (a caller reuses its
// slice) and merges nothing across them.
func TestSplitAppends(t *testing.T) {
	dst := []Chunk{{Offset: 0, Data: []byte{0xff}}}
	got, _ := Split(dst, []byte("ab\xfe"), 1, true)
	if s := chunkString(got); s != `b"\xff"@0 t"ab"@1 b"\xfe"@3` {
		t.Fatalf("got %s", s)
	}
}

// checkChunks asserts the chunks tile b[:n] from offset in order, text
// chunks are valid UTF-8 and none is empty.
func checkChunks(t *testing.T, cs []Chunk, b []byte, offset int64, n int) {
	t.Helper()
	var got []byte
	at := offset
	for _, c := range cs {
		if len(c.Data) == 0 {
			t.Fatalf("empty chunk at %d", c.Offset)
		}
		if c.Offset != at {
			t.Fatalf("chunk at %d, want %d (chunks %s)", c.Offset, at, chunkString(cs))
		}
		if c.Text && !utf8.Valid(c.Data) {
			t.Fatalf("text chunk at %d is not valid UTF-8: %q", c.Offset, c.Data)
		}
		got = append(got, c.Data...)
		at += int64(len(c.Data))
	}
	if !bytes.Equal(got, b[:n]) {
		t.Fatalf("chunks cover %q, want %q", got, b[:n])
	}
}

// TestSplitFollow reads a file through small windows as a stream does:
// every byte comes out once and in order, whatever the window size.
func TestSplitFollow(t *testing.T) {
	data := []byte("x\u4e16y\xff\xfe\xe4\xb8\x96\xf0\x9f\x98\x80z\xe4\xb8")
	for w := 1; w <= len(data); w++ {
		var got []byte
		off := 0
		for off < len(data) {
			hi := min(len(data), off+w)
			final := hi == len(data)
			cs, n := Split(nil, data[off:hi], int64(off), final)
			checkChunks(t, cs, data[off:hi], int64(off), n)
			if n == 0 && !final {
				// Held: the window is only an incomplete prefix; a
				// stream reads a bigger window (more bytes arrived).
				hi = min(len(data), off+utf8.UTFMax)
				cs, n = Split(nil, data[off:hi], int64(off), hi == len(data))
				checkChunks(t, cs, data[off:hi], int64(off), n)
			}
			for _, c := range cs {
				got = append(got, c.Data...)
			}
			off += n
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("window %d: got %q, want %q", w, got, data)
		}
	}
}
