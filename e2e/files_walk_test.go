//go:build linux

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A job makes a 12 000-deep chain of directories under the archived path:
// the archive holds what lies within 256 levels (the snapshot's bound, the
// one walker both use), leaves out the entries past them and names them in
// too_deep warnings, with the server's descriptors limited to 1 024.
func TestFilesArchiveDeepChain(t *testing.T) {
	s := startServer(t, serverOpts{})
	// Removed by rm, which keeps few descriptors; os.RemoveAll, the temp
	// dir's cleanup, would hold one per level.
	t.Cleanup(func() { exec.Command("rm", "-rf", filepath.Join(s.Home, "t")).Run() })
	var lim unix.Rlimit
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = min(lim.Cur, 1024)
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	// A file f at levels 256 and 257 below t, the chain's directory d at
	// every level down to 12 000.
	jobDo(t, s, `cd "$HOME" && mkdir t && cd t && perl -e '
for my $d (1..12000) {
	if ($d == 256 || $d == 257) { open my $f, ">", "f" or die; print $f "at $d" }
	mkdir "d" or die "mkdir at $d: $!"; chdir "d" or die "chdir at $d: $!";
}'`)
	r := fcall(t, s, "GET", "/v1/files/archive", qp("path", "t"), nil, nil)
	want(t, "archive", r, 200, "")
	if st := r.trailer.Get("X-Archive-Status"); st != "ok" {
		t.Errorf("status %q, trailers %v", st, r.trailer)
	}
	ents := untarEntries(t, r.body)
	if e := ents[strings.Repeat("d/", 255)+"f"]; e.body != "at 256" {
		t.Errorf("the file at level 256: %+v", e)
	}
	if _, ok := ents[strings.Repeat("d/", 256)]; !ok {
		t.Errorf("the directory at level 256 is not in the archive")
	}
	for name := range ents {
		if n := strings.Count(strings.TrimSuffix(name, "/"), "/") + 1; n > 256 {
			t.Errorf("an entry %d levels deep is in the archive", n)
		}
	}
	deep := 0
	for _, w := range archiveWarnings(t, r) {
		if w.Kind == "too_deep" {
			deep++
			if w.Count != 2 || !strings.HasPrefix(w.Path, "d/d/d/") || len(w.Path) > 520 {
				t.Errorf("too_deep warning %+v (%d bytes), want a count of 2 (the directory and the file at level 257)", w, len(w.Path))
			}
		}
	}
	if deep != 2 || len(ents) != 256+1 {
		t.Errorf("%d too_deep warnings, %d entries (want 2, and 256 directories and one file)", deep, len(ents))
	}
}
