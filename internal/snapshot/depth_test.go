//go:build linux

package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// chainDepth is the depth of the chain a job made to break every save.
const chainDepth = 12000

// makeChain makes root/d/d/…/d, depth directories deep, one mkdirat and
// openat per level and one descriptor held at a time, as a job would (a
// path that long cannot be named in one call). filesAt lists the depths
// of the directories that get a file "f" (0 is root).
func makeChain(t *testing.T, root string, depth int, filesAt ...int) {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeChain(t, root) })
	for d := 0; ; d++ {
		for _, at := range filesAt {
			if at == d {
				f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				unix.Write(f, []byte(fmt.Sprint("at depth ", d)))
				unix.Close(f)
			}
		}
		if d == depth {
			break
		}
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatalf("mkdir at depth %d: %v", d, err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
}

// removeChain removes root/d/d/… without a descriptor per level (which
// os.RemoveAll would hold): the top link is moved up under a new name,
// its directory emptied and removed, level after level.
func removeChain(t *testing.T, root string) {
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
		next := fmt.Sprintf("up%d", i)
		moved := unix.Renameat(fd, "d", rfd, next) == nil
		unix.Unlinkat(fd, "f", 0)
		unix.Close(fd)
		if err := unix.Unlinkat(rfd, cur, unix.AT_REMOVEDIR); err != nil {
			t.Errorf("remove chain level %d: %v", i, err)
			return
		}
		if !moved {
			return
		}
		cur = next
	}
}

// withFileLimit lowers the soft limit of open files for the test, so that
// a walk holding a descriptor per level fails the same way on every
// machine, whatever its hard limit.
func withFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = min(n, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// chainName is the name of an entry of the chain at depth (the directory
// at that depth, or with f its file).
func chainName(depth int, f bool) string {
	n := strings.TrimSuffix(strings.Repeat("d/", depth), "/")
	if f {
		if n == "" {
			return "f"
		}
		return n + "/f"
	}
	return n
}

// A chain of directories 12 000 deep no longer fails every save with "too
// many open files" (the walk held two descriptors per level): what lies
// within MaxDepth levels is saved, the rest left out, counted and named
// once in one short log line, and the archive restores.
func TestSaveDeepChain(t *testing.T) {
	withFileLimit(t, 2048)
	home := t.TempDir()
	makeChain(t, home, chainDepth, 0, 10, MaxDepth-1, MaxDepth, MaxDepth+5, chainDepth)

	var logs bytes.Buffer
	_, srv, _ := newServer(t, Config{Home: home, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	resp, body, err := saveRaw(t, srv, "")
	if err != nil || resp.StatusCode != 200 || resp.Trailer.Get(TrailerStatus) != "ok" {
		t.Fatalf("save: %v, status %d, trailer %q, log:\n%.2000s", err, resp.StatusCode, resp.Trailer.Get(TrailerStatus), logs.String())
	}
	hdrs := listArchive(t, body)
	for _, want := range []string{"f", chainName(10, true), chainName(MaxDepth-1, true), chainName(MaxDepth, false) + "/"} {
		if hdrs[want] == nil {
			t.Errorf("%.80s… (%d levels) is not in the archive", want, strings.Count(want, "/")+1)
		}
	}
	for name := range hdrs {
		if depth := strings.Count(strings.TrimSuffix(name, "/"), "/") + 1; depth > MaxDepth {
			t.Errorf("an entry %d levels deep is in the archive", depth)
		}
	}
	if len(hdrs) != MaxDepth+3 { // every level's directory, f at 0, 10, MaxDepth-1
		t.Errorf("%d entries in the archive, want %d", len(hdrs), MaxDepth+3)
	}

	// One warning: the count (the directory and the file at MaxDepth+1,
	// whichever the directory lists first) and the first name, shortened.
	var warn []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") {
			warn = append(warn, line)
		}
	}
	if len(warn) != 1 {
		t.Fatalf("%d warnings, want 1:\n%.2000s", len(warn), logs.String())
	}
	w := warn[0]
	if len(w) > 600 || !strings.Contains(w, "left_out=2 ") || !strings.Contains(w, fmt.Sprint("max_depth=", MaxDepth)) ||
		!strings.Contains(w, "first=d/d/d/") || !strings.Contains(w, "…") {
		t.Errorf("warning (%d bytes): %.2000s", len(w), w)
	}

	// The library says the same.
	st, err := Save(context.Background(), &bytes.Buffer{}, home, SaveOptions{})
	if err != nil || st.TooDeep != 2 || len(st.FirstTooDeep) > maxNameInMessage ||
		!strings.HasPrefix(st.FirstTooDeep, "d/d/") || !strings.Contains(st.FirstTooDeep, "…") ||
		(!strings.HasSuffix(st.FirstTooDeep, "/d/d") && !strings.HasSuffix(st.FirstTooDeep, "/d/f")) {
		t.Errorf("Save: %+v, %v", st, err)
	}

	// What was saved restores, within the same limit of descriptors.
	dst := t.TempDir()
	rst, err := Restore(context.Background(), bytes.NewReader(body), dst, RestoreOptions{})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if rst.Entries != int64(len(hdrs)) {
		t.Errorf("restored %d entries, want %d", rst.Entries, len(hdrs))
	}
	deepest := filepath.Join(dst, filepath.FromSlash(chainName(MaxDepth-1, true)))
	// Opened level by level: the path is longer than PATH_MAX.
	if b, err := readBeneath(dst, chainName(MaxDepth-1, true)); err != nil || string(b) != fmt.Sprint("at depth ", MaxDepth-1) {
		t.Errorf("%.60s…: %q, %v", deepest, b, err)
	}
	if _, err := readBeneath(dst, chainName(MaxDepth, false)+"/d"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("a level past the bound was restored: %v", err)
	}
}

// readBeneath reads the file rel below root, one component at a time.
func readBeneath(root, rel string) ([]byte, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY
		}
		next, err := unix.Openat(fd, p, flags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd = next
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

// An archive deeper than MaxDepth is refused as malformed, with a short
// message, before any descriptor is spent on it (restore holds one per
// level: a 12 000-deep name ran out of them).
func TestRestoreRefusesTooDeep(t *testing.T) {
	withFileLimit(t, 2048)
	for _, depth := range []int{MaxDepth + 1, chainDepth} {
		home := t.TempDir()
		name := chainName(depth-1, true)
		_, err := Restore(context.Background(), bytes.NewReader(makeArchive(t, file("ok", "fine"), file(name, "deep"))), home, RestoreOptions{})
		if !errors.Is(err, ErrMalformed) || len(err.Error()) > 600 ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d levels below Home, deeper than the %d", depth, MaxDepth)) {
			t.Errorf("depth %d: %.1000v", depth, err)
		}
		if _, err := os.Stat(filepath.Join(home, "d")); !os.IsNotExist(err) {
			t.Errorf("depth %d: a directory of the refused entry was made: %v", depth, err)
		}
	}
	// The bound itself is accepted.
	home := t.TempDir()
	if _, err := Restore(context.Background(), bytes.NewReader(makeArchive(t, file(chainName(MaxDepth-1, true), "deep"))), home, RestoreOptions{}); err != nil {
		t.Errorf("depth %d: %v", MaxDepth, err)
	}
}
