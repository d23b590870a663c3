package bench

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shellctl/shellctl/internal/snapshot"
)

// onDisk is the space the tree at dir takes (allocated blocks).
func onDisk(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The estimate covers what the group keeps: 1 + 2 × passes trees of the
// bench Home as they lie on disk here, and an archive as large as the
// Home.
func TestSnapshotDiskNeedCoversTheTrees(t *testing.T) {
	s := Sizes{HomeMB: 8, Reps: 3}
	home := t.TempDir()
	if err := snapshot.MakeBenchHome(home, s.HomeMB*1000*1000); err != nil {
		t.Fatal(err)
	}
	tree := onDisk(t, home)
	kept := int64(1+2*s.Reps)*tree + s.HomeMB*1000*1000
	need := snapshotDiskNeed(s)
	t.Logf("tree %.1f MB on disk for %d MB of files; kept %.1f MB, estimate %.1f MB", float64(tree)/1e6, s.HomeMB, float64(kept)/1e6, float64(need)/1e6)
	if need < kept {
		t.Errorf("estimate %d bytes, below the %d the group keeps", need, kept)
	}
}

// With less free space than the group needs, Run stops before anything
// runs (no server is started: the missing binaries would be the error
// otherwise), naming the dir, the free space, the need and what to do.
func TestRunRefusesSnapshotWithoutSpace(t *testing.T) {
	need := snapshotDiskNeed(QuickSizes)
	var free int64
	var asked string
	freeSpace = func(dir string) (int64, bool, error) { asked = dir; return free, true, nil }
	t.Cleanup(func() { freeSpace = diskFree })
	run := func(only ...string) error {
		_, err := Run(context.Background(), Config{Bin: t.TempDir(), Quick: true, Only: only, Out: io.Discard, Log: io.Discard})
		return err
	}

	free = need - 1
	err := run("snapshot")
	if err == nil || !strings.Contains(err.Error(), "the snapshot group needs 0.30 GB") || !strings.Contains(err.Error(), os.TempDir()) ||
		!strings.Contains(err.Error(), "TMPDIR") {
		t.Errorf("too little space: err %v, want the snapshot group's need, the dir and what to do", err)
	}
	if asked != os.TempDir() {
		t.Errorf("free space asked of %q, want the temp dir %q", asked, os.TempDir())
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Errorf("all groups, too little space: err %v, want the need", err)
	}
	// Enough space, or the group not selected: the check passes and the
	// run fails on what comes next, the binaries.
	for _, c := range []struct {
		free int64
		only []string
	}{{need, []string{"snapshot"}}, {0, []string{"list"}}} {
		free = c.free
		if err := run(c.only...); err == nil || strings.Contains(err.Error(), "needs") {
			t.Errorf("free %d, only %v: err %v, want the missing binaries", c.free, c.only, err)
		}
	}
}
