package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// plainRunModel is plainRun byte by byte.
func plainRunModel(p []byte) int {
	for i, c := range p {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return len(p)
}

// plainBlocksModel is plainBlocksGo byte by byte.
func plainBlocksModel(p []byte) int {
	n := len(p) &^ 15
	for i := 0; i < n; i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return n
}

// forEachScanInput gives every byte value at every place of three blocks,
// with several lengths and unaligned starts, then random text with a few
// bytes to escape.
func forEachScanInput(f func([]byte)) {
	for c := 0; c < 256; c++ {
		for at := 0; at < 80; at++ {
			p := make([]byte, 80)
			for k := range p {
				p[k] = 'a' + byte(k%26)
			}
			p[at] = byte(c)
			for _, n := range []int{15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 80} {
				f(p[:n])
				if at%32 <= n {
					f(p[at%32 : n]) // unaligned starts
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 20000; n++ {
		p := make([]byte, rng.IntN(200))
		for k := range p {
			p[k] = byte(0x20 + rng.IntN(0x5f))
			if rng.IntN(100) == 0 {
				p[k] = byte(rng.IntN(256))
			}
		}
		f(p)
	}
	f(nil)
}

// The scanner in use on this machine, and the Go one of the other
// architectures, find the first byte that needs an escape.
func TestPlainRunFindsTheFirstByteToEscape(t *testing.T) {
	forEachScanInput(func(p []byte) {
		if got, want := plainRun(p), plainRunModel(p); got != want {
			t.Fatalf("plainRun(%q) = %d, want %d", p, got, want)
		}
		if got, want := plainBlocksGo(p), plainBlocksModel(p); got != want {
			t.Fatalf("plainBlocksGo(%q) = %d, want %d", p, got, want)
		}
	})
}

// benchText is what the page read bench pages: base64 lines of 99
// characters.
func benchText(n int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	enc := base64.StdEncoding.EncodeToString(raw)
	out := make([]byte, 0, n+n/99+1)
	for len(out) < n {
		k := min(99, len(enc))
		out = append(out, enc[:k]...)
		out = append(out, '\n')
		enc = enc[k:]
	}
	return string(out[:n])
}

func BenchmarkAppendString512K(b *testing.B) {
	s := benchText(512 << 10)
	buf := make([]byte, 0, 600<<10)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}

func BenchmarkAppendStringNUL512K(b *testing.B) {
	s := string(make([]byte, 512<<10))
	buf := make([]byte, 0, 4<<20)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}

// A long run of bytes to escape (a window of NULs) gets its room at once,
// not by appends that copy the answer over and over as it grows.
func TestEscapedRunIsGrownOnce(t *testing.T) {
	s := string(make([]byte, 512<<10))
	allocs := testing.AllocsPerRun(5, func() { appendString(nil, s) })
	if allocs > 3 {
		t.Fatalf("%v allocations escaping 512 KiB of NULs", allocs)
	}
	if got := appendString(nil, "\x00\x01"+s[:100]+"ab"); string(got) != `"`+strings.Repeat(`\u0000`, 1)+`\u0001`+strings.Repeat(`\u0000`, 100)+`ab"` {
		t.Fatalf("escaped %s", got)
	}
}

// Long texts of lines (the page read's case, where escapeRun copies), with
// a few other bytes to escape and non-ASCII among them, escape as
// encoding/json escapes them (escape_amd64_test.go runs it without AVX2
// too).
func TestAppendStringOfLinesIsEncodingJSON(t *testing.T) { checkLinesAsEncodingJSON(t) }

func checkLinesAsEncodingJSON(t *testing.T) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n < 300; n++ {
		p := make([]byte, rng.IntN(5000))
		for k := range p {
			switch r := rng.IntN(1000); {
			case r < 15:
				p[k] = '\n'
			case r < 17:
				p[k] = byte(rng.IntN(256))
			default:
				p[k] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(string(p))
		for _, prefix := range []string{"", `{"a":`} {
			if got := appendString([]byte(prefix), string(p)); string(got[len(prefix):])+"\n" != want.String() {
				t.Fatalf("appendString of %d bytes of lines differs from encoding/json:\n got %s\nwant %s", len(p), got[len(prefix):], want.String())
			}
		}
	}
}
