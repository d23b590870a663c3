package runner

import (
	"os"
	"os/signal"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunHelperKeepsItsStatusFromTheReaper: the runner's reaper collects
// every child as it ends (wait4 of any pid); a helper the runner waits
// for (shellctl-runner-exit) still gets its own status and output, every
// time, so a recorded exit is never taken for a failed one.
func TestRunHelperKeepsItsStatusFromTheReaper(t *testing.T) {
	sh, err := openExecutable("/bin", "sh", "the test")
	if err != nil {
		t.Skipf("no /bin/sh to run: %v", err)
	}
	defer sh.Close()
	r := &Runner{early: map[int]unix.WaitStatus{}, mainState: make(chan unix.WaitStatus, 1)}
	sigCh := make(chan os.Signal, 16)
	signal.Notify(sigCh, unix.SIGCHLD)
	defer signal.Stop(sigCh)
	go r.reap(sigCh)
	for i := 0; i < 100; i++ {
		if err := r.runHelper(sh, "sh", []string{"-c", "echo fine"}); err != nil {
			t.Fatalf("run %d: a helper that exited 0: %v", i, err)
		}
		err := r.runHelper(sh, "sh", []string{"-c", "echo broken >&2; exit 3"})
		if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "broken") {
			t.Fatalf("run %d: a helper that exited 3: %v", i, err)
		}
	}
	r.rmu.Lock()
	left := len(r.helpers)
	r.rmu.Unlock()
	if left != 0 {
		t.Fatalf("%d helpers left registered", left)
	}
}
