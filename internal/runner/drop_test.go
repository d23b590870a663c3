package runner

import (
	"os"
	"testing"
)

type failAfter struct{ n, calls int }

func (f *failAfter) Write(p []byte) (int, error) {
	f.calls++
	if f.calls > f.n {
		return 0, os.ErrClosed
	}
	return len(p), nil
}

// A droppingWriter stops writing after the first failed write (and keeps
// taking everything, so the pipe it drains never blocks).
func TestDroppingWriterDropsAfterAFailure(t *testing.T) {
	f := &failAfter{n: 1}
	d := &droppingWriter{f}
	for i := 0; i < 5; i++ {
		if n, err := d.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if f.calls != 2 {
		t.Fatalf("the failing writer was called %d times, want 2 (one success, one failure, then dropped)", f.calls)
	}
}
