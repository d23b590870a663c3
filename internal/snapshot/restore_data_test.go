//go:build linux

package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
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

// writeSparse makes path a file of size bytes, all holes but the given
// pieces of data.
func writeSparse(t *testing.T, path string, size int64, data map[int64]string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, s := range data {
		if _, err := f.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
}

// allocated is the disk space the file at path takes.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// sameContents compares two files a chunk at a time.
func sameContents(t *testing.T, a, b string) {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			t.Fatalf("%s and %s differ in the MiB at %d", a, b, off)
		}
		if ea != nil || eb != nil {
			if ea != eb && !(ea == io.ErrUnexpectedEOF && eb == io.ErrUnexpectedEOF) {
				t.Fatalf("%s: %v, %s: %v", a, ea, b, eb)
			}
			return
		}
		off += int64(na)
	}
}

// A sparse file comes back sparse: its runs of zero blocks are holes
// again, not gigabytes of allocated zeros. (It was saved to 1 MB and
// restored as its whole apparent size of real disk.)
func TestRestoreKeepsHoles(t *testing.T) {
	src, home := t.TempDir(), t.TempDir()
	const size = 512 << 20
	data := map[int64]string{
		0:           "head",
		300 << 20:   "in the middle",
		256<<20 - 3: "across a block boundary",
		size - 5:    "tail!",
	}
	writeSparse(t, filepath.Join(src, "big.img"), size, data)
	// And a file that ends in a hole, whose size only the truncation at
	// its end can give.
	writeSparse(t, filepath.Join(src, "ends-in-hole"), 64<<20+123, map[int64]string{1 << 20: "x"})
	if a := allocated(t, filepath.Join(src, "big.img")); a > 1<<20 {
		t.Skipf("the file system of %s does not keep holes (%d bytes allocated)", src, a)
	}

	var buf bytes.Buffer
	if _, err := Save(context.Background(), &buf, src, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := Restore(context.Background(), &buf, home, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(size + 64<<20 + 123); st.BytesWritten != want {
		t.Errorf("bytes_written %d, want %d (the contents restored, holes included)", st.BytesWritten, want)
	}
	for _, name := range []string{"big.img", "ends-in-hole"} {
		got := filepath.Join(home, name)
		fi, err := os.Stat(got)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.Stat(filepath.Join(src, name))
		if fi.Size() != want.Size() {
			t.Errorf("%s: size %d, want %d", name, fi.Size(), want.Size())
		}
		if a := allocated(t, got); a > 4<<20 {
			t.Errorf("%s: %d bytes allocated for %d apparent: the holes were written as zeros", name, a, fi.Size())
		}
		sameContents(t, filepath.Join(src, name), got)
	}
}

// Holes are only what is zero: data at any offset, in any piece of a
// batch, is written where it belongs, whole zero blocks are skipped,
// partial ones are written or skipped without changing a byte.
func TestRestoreHolesKeepContents(t *testing.T) {
	const holeBlock = 4 << 10 // the file system's block, as restore uses it
	rnd := rand.NewChaCha8([32]byte{9})
	var ents []ent
	want := map[string][]byte{}
	for i, spec := range []struct {
		size  int
		datas [][2]int // offset, length of non-zero runs
	}{
		{0, nil},
		{1, nil},
		{holeBlock, nil},
		{holeBlock + 1, [][2]int{{holeBlock, 1}}},
		{3*holeBlock + 17, [][2]int{{0, 1}, {2*holeBlock - 1, 2}}},
		{restoreBatchBytes*3 + 5, [][2]int{{restoreBatchBytes - 2, 4}, {restoreBatchBytes*2 + 100, holeBlock * 3}}},
		{restoreBatchBytes + holeBlock/2, [][2]int{{restoreBatchBytes - holeBlock/2, 1}}},
		{5 * holeBlock, [][2]int{{0, 5 * holeBlock}}},
		{5*holeBlock - 1, [][2]int{{holeBlock + 1, holeBlock - 2}, {3 * holeBlock, 1}}},
	} {
		b := make([]byte, spec.size)
		for _, d := range spec.datas {
			rnd.Read(b[d[0] : d[0]+d[1]])
			for k := d[0]; k < d[0]+d[1]; k++ {
				if b[k] == 0 {
					b[k] = 1
				}
			}
		}
		name := fmt.Sprintf("f%d", i)
		want[name] = b
		// A small random file before each moves where it starts in its batch.
		pad := make([]byte, 1000*i+7)
		rnd.Read(pad)
		ents = append(ents, file(fmt.Sprintf("pad%d", i), string(pad)), file(name, string(b)))
	}
	home := t.TempDir()
	if _, err := Restore(context.Background(), bytes.NewReader(makeArchive(t, ents...)), home, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(home, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: contents differ (%d bytes, want %d)", name, len(got), len(b))
		}
	}
}
