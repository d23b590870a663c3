package snapshot

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
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
		st, err = Restore(context.Background(), bytes.NewReader(archive.Bytes()), dest, RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(st.BytesWritten)
}
