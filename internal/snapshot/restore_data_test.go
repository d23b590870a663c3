//go:build linux

package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// metaState maps every entry below root to its type, permission bits and
// mtime (whole seconds, as the archive keeps them), links not followed.
func metaState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%s size=%d mtime=%s", fi.Mode(), sizeOf(fi), fi.ModTime().UTC().Format(time.RFC3339))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sizeOf(fi fs.FileInfo) int64 {
	if fi.Mode().IsRegular() {
		return fi.Size()
	}
	return 0
}

// emptyDir removes everything inside dir, keeping dir.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// Every file comes back with its mtime and mode, whatever the number of
// restore batches its contents span; so do directories and symlinks,
// whose mtimes the archive keeps too. (A file whose contents spanned two
// batches came back dated 1901-12-13: the piece that ends it, whose mtime
// is applied, carried none, nor a mode.)
func TestRestoreKeepsMtimesAcrossBatches(t *testing.T) {
	old := syscall.Umask(0o022) // a mode the umask cuts must still come back whole
	defer syscall.Umask(old)

	home := t.TempDir()
	base := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * 3637 * time.Second) }
	sizes := []int{0, 1, 4095, 200_000, restoreBatchBytes - 1, restoreBatchBytes, restoreBatchBytes + 1,
		700_000, 1<<20 + 3, 3 << 20}
	i := 0
	for d, dir := range []string{"", "a", "a/b", "a/b/c"} {
		for j, size := range sizes {
			// Small files between the big ones move where each big one
			// starts in its batch.
			writeRandom(t, filepath.Join(home, dir, fmt.Sprintf("small%d", j)), 100+j*d)
			p := filepath.Join(home, dir, fmt.Sprintf("f%d", size))
			writeRandom(t, p, size)
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("small0", filepath.Join(home, dir, "link")); err != nil {
			t.Fatal(err)
		}
	}
	// Times last, deepest first, so creating children does not move a
	// directory's mtime again.
	var paths []string
	filepath.WalkDir(home, func(p string, _ fs.DirEntry, _ error) error {
		if p != home {
			paths = append(paths, p)
		}
		return nil
	})
	for k := len(paths) - 1; k >= 0; k-- {
		ts := []unix.Timespec{unix.NsecToTimespec(at(i).UnixNano()), unix.NsecToTimespec(at(i).UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, paths[k], ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
		i++
	}
	want := metaState(t, home)

	var buf bytes.Buffer
	if _, err := Save(context.Background(), &buf, home, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	emptyDir(t, home)
	if _, err := Restore(context.Background(), &buf, home, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	diffStates(t, want, metaState(t, home))
}
