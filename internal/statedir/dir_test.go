package statedir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemovedTellsADeletedDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "job"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "job"))
	if err != nil {
		t.Fatal(err)
	}
	d := FromFD(int(f.Fd()), filepath.Join(root, "job"))
	if d.Removed() {
		t.Fatal("a directory still there is reported removed")
	}
	if err := os.Remove(filepath.Join(root, "job")); err != nil {
		t.Fatal(err)
	}
	if !d.Removed() {
		t.Fatal("a deleted directory is not reported removed")
	}
	f.Close()
}
