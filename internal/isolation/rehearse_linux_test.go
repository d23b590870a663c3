package isolation

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRehearsalBuildsTheDomainAndConfinesNothing: the stage's rehearsal
// runs a job's start for real — the default lists' rules are made — but
// enforces nothing on the thread that ran it (a file outside every list
// stays readable, no_new_privs stays off) and leaves no descriptor open.
func TestRehearsalBuildsTheDomainAndConfinesNothing(t *testing.T) {
	requireLandlock(t)
	runtime.LockOSThread() // Landlock and no_new_privs are per thread
	defer runtime.UnlockOSThread()
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fdsBefore := openFDs(t)
	a, err := rehearse()
	if err != nil {
		t.Fatalf("rehearse: %v", err)
	}
	if !a.Enabled || len(a.Rules) == 0 {
		t.Fatalf("the rehearsal built no domain: %+v", a)
	}
	var paths []string
	for _, r := range a.Rules {
		paths = append(paths, r.Path)
	}
	for _, want := range []string{"/usr", "/etc", "/dev/null"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the rehearsal has no rule for %s: %v", want, paths)
		}
	}
	if _, err := os.ReadFile(outside); err != nil {
		t.Fatalf("after the rehearsal a file outside its lists cannot be read: %v (the domain was enforced)", err)
	}
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 0 {
		t.Fatalf("after the rehearsal no_new_privs is %d (%v): want 0", nnp, err)
	}
	if after := openFDs(t); !slices.Equal(after, fdsBefore) {
		t.Fatalf("the rehearsal left descriptors open: before %v, after %v", fdsBefore, after)
	}
}

// openFDs lists this process's open descriptors.
func openFDs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	// The directory read itself held one descriptor, closed again: drop
	// names that no longer resolve.
	var open []string
	for _, n := range names {
		if _, err := os.Readlink("/proc/self/fd/" + n); err == nil {
			open = append(open, n)
		}
	}
	return open
}

// A stage whose job is already waiting (started when the job came) does
// not rehearse; one that waits for its job does.
func TestRehearsalOnlyWhileWaiting(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	runtime.LockOSThread() // as the stage: a rehearsal's thread stays unconfined
	defer runtime.UnlockOSThread()
	if !rehearseUnlessAsked(fds[1]) {
		t.Fatal("a stage with nothing to read did not rehearse")
	}
	if _, err := unix.Write(fds[0], []byte{0}); err != nil {
		t.Fatal(err)
	}
	if rehearseUnlessAsked(fds[1]) {
		t.Fatal("a stage whose job was already waiting rehearsed")
	}
}
