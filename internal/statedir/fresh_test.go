package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// OpenFresh writes through an empty file of ours made ahead, makes a
// missing one, and refuses anything else already there: a file with
// bytes, a second link, a symlink, a FIFO (without blocking), a directory.
func TestOpenFresh(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	write := func(name string) error {
		f, err := d.OpenFresh(name, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("x")
		return err
	}
	// Made ahead, empty: written through.
	if err := os.WriteFile(filepath.Join(root, "ahead"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := write("ahead"); err != nil {
		t.Fatalf("a file made ahead: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ahead")); string(b) != "x" {
		t.Fatalf("made ahead, then %q", b)
	}
	// Missing: made.
	if err := write("missing"); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
	// Everything else: refused, untouched.
	os.WriteFile(filepath.Join(root, "full"), []byte("old"), 0o600)
	os.WriteFile(filepath.Join(root, "linked"), nil, 0o600)
	os.Link(filepath.Join(root, "linked"), filepath.Join(root, "second"))
	os.WriteFile(filepath.Join(root, "target"), nil, 0o600)
	os.Symlink(filepath.Join(root, "target"), filepath.Join(root, "sym"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "dir"), 0o700)
	for _, name := range []string{"full", "linked", "sym", "fifo", "dir"} {
		err := write(name)
		if err == nil {
			t.Errorf("%s: written through", name)
			continue
		}
		if name != "sym" && name != "fifo" && name != "dir" && !errors.Is(err, ErrNotFresh) {
			t.Errorf("%s: %v, want ErrNotFresh", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "full")); string(b) != "old" {
		t.Errorf("the full file became %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "target")); len(b) != 0 {
		t.Errorf("written through the symlink: %q", b)
	}
}
