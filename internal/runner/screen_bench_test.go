package runner

import (
	"strings"
	"testing"
)

// BenchmarkScreenFeed: a flood read 4 KiB at a time, through the queue.
func BenchmarkScreenFeed(b *testing.B) {
	line := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 3)[:99] + "\r\n"
	flood := []byte(strings.Repeat(line, 40000))
	b.SetBytes(int64(len(flood)))
	f := newScreenFeed(200, 50, inProcScreen(b))
	for b.Loop() {
		for p := flood; len(p) > 0; {
			n := min(len(p), 4095)
			f.put(p[:n])
			p = p[n:]
		}
	}
	f.close()
}
