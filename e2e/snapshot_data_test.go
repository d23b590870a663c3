package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
)

// snapshotCLI runs `shellctl snapshot …` against s.
func snapshotCLI(t *testing.T, s *server, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "shellctl"), append([]string{"--server", s.URL, "snapshot"}, args...)...)
	cmd.Env = []string{"SHELLCTL_AUTH_TOKEN=" + s.Token, "PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// What a job leaves in Home comes back from a save and a restore through
// real servers as it was: every mtime (files whose contents span several
// restore batches came back dated 1901-12-13), and the holes of a sparse
// file (restored as its whole apparent size of real disk).
func TestSnapshotKeepsMtimesAndHoles(t *testing.T) {
	parallel(t)
	src := startServer(t, serverOpts{token: "snap-token"})
	script := `set -e
cd "` + src.Home + `"
mkdir -p proj/sub
head -c 100 /dev/urandom > proj/small
head -c 200000 /dev/urandom > proj/sub/mid
head -c 3000000 /dev/urandom > proj/sub/big
ln -s big proj/sub/link
truncate -s 1G proj/disk.img
printf 'boot' | dd of=proj/disk.img conv=notrunc status=none
printf 'end!' | dd of=proj/disk.img bs=1 seek=1073741820 conv=notrunc status=none
touch -h -d @1500000000 proj/small proj/sub/mid proj/sub/big proj/sub/link proj/disk.img
touch -d @1400000000 proj/sub
touch -d @1300000000 proj
`
	if res, out := src.runDone(t, client.RunRequest{Script: script}); code(res) != 0 {
		t.Fatalf("job: exit %d: %s", code(res), out)
	}
	archive := filepath.Join(t.TempDir(), "home.tar.zst")
	if out, err := snapshotCLI(t, src, "save", "-o", archive); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	dst := startServer(t, serverOpts{token: "snap-token"})
	if out, err := snapshotCLI(t, dst, "restore", archive); err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	for name, want := range map[string]int64{
		"proj/small": 1500000000, "proj/sub/mid": 1500000000, "proj/sub/big": 1500000000,
		"proj/sub/link": 1500000000, "proj/disk.img": 1500000000, "proj/sub": 1400000000, "proj": 1300000000,
	} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dst.Home, name), &st); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if st.Mtim.Sec != want {
			t.Errorf("%s: mtime %s, want %s", name, time.Unix(st.Mtim.Sec, 0).UTC(), time.Unix(want, 0).UTC())
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst.Home, "proj/disk.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<30 || st.Blocks*512 > 4<<20 {
		t.Errorf("disk.img: %d bytes, %d allocated: want 1 GiB in a few blocks", st.Size, st.Blocks*512)
	}
	f, err := os.Open(filepath.Join(dst.Home, "proj/disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head, tail := make([]byte, 4), make([]byte, 4)
	f.ReadAt(head, 0)
	f.ReadAt(tail, 1<<30-4)
	if string(head) != "boot" || string(tail) != "end!" {
		t.Errorf("disk.img: begins %q, ends %q", head, tail)
	}
}

// A job that makes a 12 000-deep chain of directories in Home (mkdir d;
// cd d in a loop) no longer makes every save fail with "too many open
// files": the save succeeds with what lies within 256 levels, the server
// logs one short warning naming what it left out, and the archive
// restores.
func TestSnapshotDeepChainFromJob(t *testing.T) {
	parallel(t)
	src := startServer(t, serverOpts{token: "snap-token", home: scratchHome(t)})
	// Removed level by level (rm keeps few descriptors); os.RemoveAll,
	// the temp dir's cleanup, would hold one per level.
	t.Cleanup(func() { exec.Command("rm", "-rf", filepath.Join(src.Home, "d")).Run() })
	// A limit of descriptors the server may well run with, so the walk's
	// old need (two per level, 24 000) fails on any machine.
	var lim unix.Rlimit
	if err := unix.Prlimit(src.cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = min(lim.Cur, 4096)
	if err := unix.Prlimit(src.cmd.Process.Pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	script := `cd "` + src.Home + `" && perl -e '
for my $d (1..12000) {
	mkdir "d" or die "mkdir at $d: $!"; chdir "d" or die "chdir at $d: $!";
	if ($d == 100 || $d == 12000) { open my $f, ">", "f" or die; print $f "at $d" }
}'`
	if res, out := src.runDone(t, client.RunRequest{Script: script}); code(res) != 0 {
		t.Fatalf("job: exit %d: %s", code(res), out)
	}
	archive := filepath.Join(t.TempDir(), "home.tar.zst")
	if out, err := snapshotCLI(t, src, "save", "-o", archive); err != nil {
		t.Fatalf("snapshot save: %v\n%.2000s", err, out)
	}
	warn := src.waitStderr(t, "warning of the entries left out", func(l string) bool {
		return strings.Contains(l, "left out entries deeper than the depth bound")
	})
	if len(warn) > 600 || !strings.Contains(warn, "left_out=1 ") || !strings.Contains(warn, "…") {
		t.Errorf("warning (%d bytes): %.2000s", len(warn), warn)
	}
	for _, l := range src.allStderr() {
		if len(l) > 2000 {
			t.Errorf("a log line of %d bytes: %.300s…", len(l), l)
		}
	}

	dst := startServer(t, serverOpts{token: "snap-token"})
	t.Cleanup(func() { exec.Command("rm", "-rf", filepath.Join(dst.Home, "d")).Run() })
	if out, err := snapshotCLI(t, dst, "restore", archive); err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	at100 := filepath.Join(dst.Home, strings.Repeat("d/", 100)+"f")
	if b, err := os.ReadFile(at100); err != nil || string(b) != "at 100" {
		t.Errorf("file 100 levels down: %q, %v", b, err)
	}
	// The chain comes back to the bound (256 levels), no further: its
	// deepest directory is opened one level at a time, as the path is
	// longer than the kernel takes at once once past a few thousand bytes.
	fd, err := unix.Open(dst.Home, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for {
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			break
		}
		fd, depth = next, depth+1
	}
	if depth != 256 {
		t.Errorf("restored chain is %d deep, want %d", depth, 256)
	}
}
