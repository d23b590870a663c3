package bench

import (
	"fmt"
	"os"
	"slices"
)

// snapshotDiskNeed is the free space the snapshot group needs where the
// bench keeps its files: the Home and the two trees of every restore pass
// (the server's and the floor's), all kept until the group ends (see
// benchSnapshot: deleting one right before a pass measured ext4's inode
// order, not the restore), and the archive. A tree takes about 1.2 × its
// file bytes on disk (174 MiB for the 150 MB bench Home on ext4 with 4 KiB
// blocks: the small files' last blocks and the directories), counted as
// 1.3 ×; the archive is 0.62 × the Home, counted as 1 × (random bytes do
// not compress). Full sizes: 1.52 GB; quick: 0.30 GB.
func snapshotDiskNeed(s Sizes) int64 {
	home := s.HomeMB * 1000 * 1000
	return int64(1+2*s.Reps)*home*13/10 + home
}

// freeSpace is diskFree; a variable so that tests can give a full disk.
var freeSpace = diskFree

// checkSnapshotSpace refuses to start the snapshot group when dir has
// less free space than it will need, rather than fail in the middle of
// its passes with "no space left on device".
func checkSnapshotSpace(dir string, s Sizes) error {
	need := snapshotDiskNeed(s)
	free, known, err := freeSpace(dir)
	if err != nil {
		return fmt.Errorf("snapshot bench: free space of %s: %w", dir, err)
	}
	if !known || free >= need {
		return nil
	}
	return fmt.Errorf("snapshot bench: %s has %.2f GB free, the snapshot group needs %.2f GB there "+
		"(a %d MB Home, two extracted trees per restore pass × %d passes, kept until the group ends, and the archive); "+
		"free some space, set TMPDIR to a larger file system, or leave the group out with --only",
		dir, float64(free)/1e9, float64(need)/1e9, s.HomeMB, s.Reps)
}

// wantsGroup reports whether the configuration measures group name.
func (c Config) wantsGroup(name string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, name)
}

// benchTempDir is where StartEnv makes each run's directory.
func benchTempDir() string { return os.TempDir() }
