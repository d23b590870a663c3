package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// heapPeak samples the Go heap (live objects and garbage not yet swept)
// every millisecond while f runs and returns the largest figure.
func heapPeak(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	metrics.Read(sample) // the last moment counts too
	return max(peak.Load(), sample[0].Value.Uint64())
}

// heapInuse is the heap the process holds after a full collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// writeRandomFile writes size pseudo-random bytes (incompressible, so the
// compressor's output buffers are as large as they get) at about 1 GB/s.
func writeRandomFile(t *testing.T, path string, size int64, seed uint64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		_, _ = rng.Read(buf)
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryBounded saves and restores a Home of two 200 MiB files (one
// sparse, one random) and 4 000 small ones, and checks that neither
// operation takes more than MemoryBound of Go heap above what the process
// held before (garbage included), and that the heap comes back to where it
// was once the operation has returned and released its memory.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 800 MiB of files; skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes the heap figure meaningless")
	}
	home, dst, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	for i := range 40 {
		for j := range 100 {
			writeFile(t, filepath.Join(home, fmt.Sprintf("d%02d/f%03d", i, j)), fmt.Sprintf("%0*d", j*20, i*j), 0o644)
		}
	}
	if err := truncateNew(filepath.Join(home, "sparse.img"), 200<<20); err != nil {
		t.Fatal(err)
	}
	writeRandomFile(t, filepath.Join(home, "random.bin"), 200<<20, 1)
	archive := filepath.Join(tmp, "home.tar.zst")

	check := func(what string, op func() error) {
		t.Helper()
		base := heapInuse()
		var err error
		peak := heapPeak(func() { err = op() })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		releaseMemory()
		after := heapInuse()
		t.Logf("%s: heap before %.1f MiB, peak %.1f MiB, after %.1f MiB",
			what, float64(base)/(1<<20), float64(peak)/(1<<20), float64(after)/(1<<20))
		if peak > base && peak-base > MemoryBound {
			t.Errorf("%s: peak heap %.1f MiB above the baseline, over MemoryBound (%d MiB)",
				what, float64(peak-base)/(1<<20), MemoryBound>>20)
		}
		// Nothing of the operation may stay behind (a cached encoder, a
		// pool of buffers): 1 MiB of slack for the runtime's own.
		if after > base+1<<20 {
			t.Errorf("%s: heap in use %.1f MiB after, %.1f MiB before", what, float64(after)/(1<<20), float64(base)/(1<<20))
		}
	}
	check("save", func() error {
		f, err := os.Create(archive)
		if err != nil {
			return err
		}
		if _, err := Save(context.Background(), f, home, SaveOptions{}); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	check("restore", func() error {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := Restore(context.Background(), f, dst, RestoreOptions{})
		if err == nil && st.BytesWritten < 400<<20 {
			err = fmt.Errorf("restored only %d bytes", st.BytesWritten)
		}
		return err
	})
}
