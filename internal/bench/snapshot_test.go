package bench

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// The restore passes empty the Home without deleting anything: its entries
// move, inodes and all, into the directory aside.
func TestMoveAsideEmptiesWithoutDeleting(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	for _, d := range []string{"home/a/b", "home/c"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "a", "b", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := inode(t, filepath.Join(home, "a", "b", "f"))
	homeIno := inode(t, home)
	aside := filepath.Join(base, "aside")
	if err := moveAside(home, aside); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("home still holds %d entries", len(ents))
	}
	if inode(t, home) != homeIno {
		t.Error("home itself was replaced")
	}
	if got := inode(t, filepath.Join(aside, "a", "b", "f")); got != before {
		t.Errorf("file moved aside has inode %d, want %d (the same file)", got, before)
	}
	if _, err := os.Stat(filepath.Join(aside, "c")); err != nil {
		t.Error(err)
	}
}

// Where the file system has the flag (ext4, as on the bench machine),
// spreadDirs sets it.
func TestSpreadDirsSetsTheFlag(t *testing.T) {
	dir := t.TempDir()
	ok, err := spreadDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("the file system of the temp dir has no FS_TOPDIR_FL")
	}
	has, err := hasSpreadFlag(dir)
	if err != nil || !has {
		t.Errorf("flag not set after spreadDirs: %v %v", has, err)
	}
}
