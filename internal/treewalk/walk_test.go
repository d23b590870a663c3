//go:build linux

package treewalk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openTop opens dir as a walk's top.
func openTop(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func write(t *testing.T, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// visitAll is a Visit that records each path and enters every directory.
func visitAll(seen *[]string) func(e *Entry) (bool, error) {
	return func(e *Entry) (bool, error) {
		*seen = append(*seen, e.Path)
		return e.Type.IsDir(), nil
	}
}

// Links are entries, never followed: a link to a directory outside is
// reported as a link, and a directory swapped for such a link between
// its listing and its opening (what a job does in a loop) is not entered:
// the open fails (ELOOP) and nothing outside is visited.
func TestNoFollow(t *testing.T) {
	base := t.TempDir()
	top, outside := filepath.Join(base, "top"), filepath.Join(base, "outside")
	write(t, filepath.Join(outside, "secret"), "s")
	write(t, filepath.Join(top, "dir", "f"), "f")
	write(t, filepath.Join(top, "swapped", "g"), "g")
	if err := os.Symlink(outside, filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}

	var seen []string
	types := map[string]fs.FileMode{}
	var failed []error
	w := &Walker{
		MaxDepth: 10,
		Sorted:   true,
		Visit: func(e *Entry) (bool, error) {
			seen = append(seen, e.Path)
			types[e.Path] = e.Type
			if e.Path == "swapped" {
				// Listed as a directory; now a link to outside.
				if err := os.Rename(filepath.Join(top, "swapped"), filepath.Join(base, "moved")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(top, "swapped")); err != nil {
					t.Fatal(err)
				}
				return true, nil
			}
			// A careless visitor that asks to enter the link too.
			return e.Type.IsDir() || e.Path == "link", nil
		},
		Enter: func(e *Entry, fd int, st *unix.Stat_t) (bool, error) {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				t.Errorf("%s entered but is not a directory", e.Path)
			}
			return true, nil
		},
		Failed: func(e *Entry, op string, err error) error {
			if op != "open directory" || !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
				t.Errorf("%s: %s: %v, want ELOOP or ENOTDIR", e.Path, op, err)
			}
			failed = append(failed, err)
			return nil
		},
	}
	if err := w.Walk(openTop(t, top)); err != nil {
		t.Fatal(err)
	}
	want := []string{"dir", "dir/f", "link", "swapped"}
	if !slices.Equal(seen, want) {
		t.Errorf("visited %q, want %q (nothing of outside)", seen, want)
	}
	if types["link"] != fs.ModeSymlink || types["dir"] != fs.ModeDir || types["dir/f"] != 0 {
		t.Errorf("types %v", types)
	}
	if len(failed) != 2 {
		t.Errorf("%d opens failed, want 2 (the link and the swapped directory)", len(failed))
	}
}

// makeChain makes root/d/d/…/d, depth levels, one descriptor held at a
// time (its path is longer than PATH_MAX), and removes it at the end.
func makeChain(t *testing.T, root string, depth int) {
	t.Helper()
	fd := openTop(t, root)
	fd, _ = unix.Dup(fd)
	for range depth {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	t.Cleanup(func() {
		// Move each level's child up beside it, then remove the level.
		rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		defer unix.Close(rfd)
		cur := "d"
		for i := 0; ; i++ {
			fd, err := unix.Openat(rfd, cur, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return
			}
			next := fmt.Sprint("up", i)
			moved := unix.Renameat(fd, "d", rfd, next) == nil
			unix.Close(fd)
			unix.Unlinkat(rfd, cur, unix.AT_REMOVEDIR)
			if !moved {
				return
			}
			cur = next
		}
	})
}

// openFiles counts the process's open descriptors.
func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A 12 000-deep chain of directories, walked under a limit of 512
// descriptors: the walk stops opening at MaxDepth, holds at most
// MaxDepth+1 descriptors of its own, and counts (not visits) the one
// entry past the bound. Without the bound it runs out of descriptors.
func TestDepthBoundsDescriptors(t *testing.T) {
	const chain, maxDepth = 12000, 256
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = min(512, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })

	root := t.TempDir()
	makeChain(t, root, chain)
	top := openTop(t, root)
	base := openFiles(t)
	most, deepest, entered := 0, 0, 0
	ws := &Warnings{Max: 10}
	w := &Walker{
		MaxDepth: maxDepth,
		Warnings: ws,
		Visit: func(e *Entry) (bool, error) {
			deepest = max(deepest, e.Depth)
			return true, nil
		},
		Enter: func(e *Entry, fd int, st *unix.Stat_t) (bool, error) {
			entered++
			if e.Depth > maxDepth-3 {
				most = max(most, openFiles(t)-base)
			}
			return true, nil
		},
		Failed: func(e *Entry, op string, err error) error {
			return fmt.Errorf("%s at depth %d: %w", op, e.Depth, err)
		},
	}
	if err := w.Walk(top); err != nil {
		t.Fatalf("walk: %v", err)
	}
	if deepest != maxDepth || entered != maxDepth {
		t.Errorf("visited down to depth %d, entered %d directories; want %d and %d", deepest, entered, maxDepth, maxDepth)
	}
	// The walk's own descriptors: the top's and one per level entered
	// (the directory listing /proc/self/fd costs one more).
	if most > maxDepth+2 {
		t.Errorf("%d descriptors held at the deepest level, want at most %d", most, maxDepth+2)
	}
	if n, first := ws.Count(KindTooDeep), ws.First(KindTooDeep); n != 1 || first != strings.Repeat("d/", maxDepth)+"d" {
		t.Errorf("too deep: %d, first %.40q…, want 1, the entry at level %d", n, first, maxDepth+1)
	}
}

// The budget bounds the entries read: once spent, nothing more is read,
// it is reported once with the first entry not read, what was read is
// still visited and the directories among it still entered (empty).
func TestBudget(t *testing.T) {
	top := t.TempDir()
	for _, d := range []string{"a", "b", "c"} {
		for i := range 10 {
			write(t, filepath.Join(top, d, fmt.Sprint("f", i)), "x")
		}
	}
	var seen []string
	entered := 0
	ws := &Warnings{Max: 5}
	w := &Walker{
		MaxDepth:   5,
		MaxVisited: 15,
		Sorted:     true,
		Warnings:   ws,
		Visit:      visitAll(&seen),
		Enter:      func(*Entry, int, *unix.Stat_t) (bool, error) { entered++; return true, nil },
	}
	if err := w.Walk(openTop(t, top)); err != nil {
		t.Fatal(err)
	}
	// a, b, c, then a's 10 files, then 2 of b's: 15.
	if len(seen) != 15 || entered != 3 {
		t.Errorf("visited %d (%q), entered %d; want 15 and 3", len(seen), seen, entered)
	}
	if ws.Count(KindBudget) != 1 || !strings.HasPrefix(ws.First(KindBudget), "b/f") || slices.Contains(seen, ws.First(KindBudget)) {
		t.Errorf("budget warnings %d, first %q", ws.Count(KindBudget), ws.First(KindBudget))
	}
}

// A directory larger than one getdents buffer is visited whole, each entry
// once, in its own order when not sorted and in byte order when sorted;
// Listed sees every name before any of them is visited.
func TestBatchesAndOrder(t *testing.T) {
	top := t.TempDir()
	const n = 3000 // about 10 getdents buffers of 8 KiB
	for i := range n {
		write(t, filepath.Join(top, fmt.Sprintf("file-with-a-longer-name-%05d", (i*7919)%n)), "")
	}
	for _, sorted := range []bool{false, true} {
		var seen, listed []string
		w := &Walker{
			MaxDepth: 1,
			Sorted:   sorted,
			Listed: func(dir string, names []string) {
				if len(listed) != len(seen) {
					t.Errorf("Listed called after %d of %d listed names were visited", len(seen), len(listed))
				}
				listed = append(listed, names...)
			},
			Visit: visitAll(&seen),
		}
		if err := w.Walk(openTop(t, top)); err != nil {
			t.Fatal(err)
		}
		if len(seen) != n || !slices.Equal(seen, listed) {
			t.Fatalf("sorted=%v: %d visited, %d listed, want %d", sorted, len(seen), len(listed), n)
		}
		if uniq := slices.Compact(slices.Sorted(slices.Values(seen))); len(uniq) != n {
			t.Errorf("sorted=%v: %d distinct of %d", sorted, len(uniq), n)
		}
		if sorted != slices.IsSorted(seen) {
			t.Errorf("sorted=%v: visit order sorted=%v", sorted, slices.IsSorted(seen))
		}
	}
}

// The filter comes first: what it leaves out is neither visited nor
// counted past the depth bound; SkipAll ends the walk without an error.
func TestFilterAndSkipAll(t *testing.T) {
	top := t.TempDir()
	write(t, filepath.Join(top, "keep", "deep", "x"), "")
	write(t, filepath.Join(top, "keep", "deep", "skip-me"), "")
	write(t, filepath.Join(top, "z", "y"), "")
	var seen []string
	ws := &Warnings{}
	w := &Walker{
		MaxDepth: 2,
		Sorted:   true,
		Warnings: ws,
		Filter:   func(e *Entry) bool { return e.Name != "skip-me" },
		Visit: func(e *Entry) (bool, error) {
			if e.Path == "z" {
				return false, SkipAll
			}
			seen = append(seen, e.Path)
			return e.Type.IsDir(), nil
		},
	}
	if err := w.Walk(openTop(t, top)); err != nil {
		t.Fatalf("walk: %v", err)
	}
	if !slices.Equal(seen, []string{"keep", "keep/deep"}) {
		t.Errorf("visited %q", seen)
	}
	if ws.Count(KindTooDeep) != 1 || ws.First(KindTooDeep) != "keep/deep/x" {
		t.Errorf("too deep: %d, %q; want 1, keep/deep/x", ws.Count(KindTooDeep), ws.First(KindTooDeep))
	}
}
