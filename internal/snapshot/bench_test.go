package snapshot

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchHome returns a ~150 MB mixed Home: $SNAPSHOT_BENCH_HOME when set
// (generated there once and reused, so repeated runs compare alike), else
// a fresh one in a temporary directory.
func benchHome(b *testing.B) string {
	b.Helper()
	dir := os.Getenv("SNAPSHOT_BENCH_HOME")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "home")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "model.bin")); err != nil {
		if err := MakeBenchHome(dir, 150<<20); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func BenchmarkSave(b *testing.B) {
	home := benchHome(b)
	var st SaveStats
	for b.Loop() {
		var err error
		st, err = Save(context.Background(), io.Discard, home, SaveOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(st.FileBytes)
	b.ReportMetric(float64(st.Bytes), "archive-bytes")
	b.ReportMetric(float64(st.Entries), "entries")
}

func BenchmarkRestore(b *testing.B) {
	home := benchHome(b)
	var archive bytes.Buffer
	if _, err := Save(context.Background(), &archive, home, SaveOptions{}); err != nil {
		b.Fatal(err)
	}
	dest := filepath.Join(b.TempDir(), "dest")
	var st RestoreStats
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		if err := os.RemoveAll(dest); err != nil {
			b.Fatal(err)
		}
		if err := os.Mkdir(dest, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var err error
		cpu0 := cpuTime()
		st, err = Restore(context.Background(), bytes.NewReader(archive.Bytes()), dest, RestoreOptions{})
		cpu += cpuTime() - cpu0
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(st.BytesWritten)
	// CPU time (user + system, all threads) says more than wall time on a
	// shared machine, where the disk and the other tenants set the pace.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
