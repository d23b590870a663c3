package main

import (
	"os"
	"path/filepath"
	"testing"
)

// stdinHasData tells a stdin with bytes left from one without, without
// reading: the hint of a run without -i depends on it.
func TestStdinHasData(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if stdinHasData(int(r.Fd())) {
		t.Error("an empty open pipe has data")
	}
	w.Write([]byte("1\n2\n"))
	if !stdinHasData(int(r.Fd())) {
		t.Error("a pipe holding bytes has none")
	}
	w.Close()
	buf := make([]byte, 16)
	r.Read(buf)
	if stdinHasData(int(r.Fd())) {
		t.Error("a pipe read to its end has data")
	}

	p := filepath.Join(t.TempDir(), "in")
	os.WriteFile(p, []byte("abc"), 0o600)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !stdinHasData(int(f.Fd())) {
		t.Error("a file with bytes left has none")
	}
	f.Read(buf)
	if stdinHasData(int(f.Fd())) {
		t.Error("a file read to its end has data")
	}
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	if stdinHasData(int(null.Fd())) {
		t.Error("/dev/null has data")
	}
}
