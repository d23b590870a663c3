package runner

import (
	"bytes"
	"strings"
	"testing"
)

// TestRawRingKeepsTheLastBytes: reads of any size, wrapping the ring many
// times, read back from any offset it still holds; older ones are gone.
func TestRawRingKeepsTheLastBytes(t *testing.T) {
	g := &rawRing{buf: make([]byte, 1000), first: 100}
	var all []byte
	end := int64(100)
	for i, n := range []int{1, 999, 7, 2500, 13, 1000, 640} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		for j := range p {
			p[j] += byte(j % 3)
		}
		all = append(all, p...)
		end += int64(n)
		g.keep(p, end)
		for _, off := range []int64{end - 1000, end - 999, end - 500, end - 1, end} {
			if off < 100 {
				continue
			}
			b, ok := g.read(off, end, 1<<20)
			if !ok || !bytes.Equal(b, all[off-100:]) {
				t.Fatalf("after %d writes, read at %d (end %d): %v %q", i+1, off, end, ok, b)
			}
		}
		if _, ok := g.read(end-1001, end, 1<<20); ok && end-1001 >= 100 {
			t.Fatalf("read at %d, past the ring (end %d), answered", end-1001, end)
		}
	}
	if _, ok := g.read(99, 110, 10); ok {
		t.Fatal("a read before the ring's first byte answered")
	}
	if b, ok := g.read(end-10, end, 4); !ok || len(b) != 4 {
		t.Fatalf("a read is not cut at its max: %q", b)
	}
}

// BenchmarkScreenFeedAttached: BenchmarkScreenFeed with the raw ring on
// (a client attached): each read is also copied into the ring and
// announced.
func BenchmarkScreenFeedAttached(b *testing.B) {
	line := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 3)[:99] + "\r\n"
	flood := []byte(strings.Repeat(line, 40000))
	b.SetBytes(int64(len(flood)))
	f := newScreenFeed(200, 50, inProcScreen(b))
	f.startRaw(func(int64) {})
	for b.Loop() {
		for p := flood; len(p) > 0; {
			n := min(len(p), 4095)
			f.put(p[:n])
			p = p[n:]
		}
	}
	f.close()
}
