package reaper

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Every child started through Start gets its own exit status, while the
// reaper also collects orphans (here: grandchildren adopted because the
// test process is a child subreaper) that end at the same time.
func TestStartGetsItsOwnStatusAmidOrphans(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	before := Orphans()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each leaves an orphan that ends about when it does.
			cmd := exec.Command("/bin/sh", "-c", "sleep 0.05 & exit "+strconv.Itoa(i%100))
			done, err := Start(cmd)
			if err != nil {
				errs <- err.Error()
				return
			}
			pid := cmd.Process.Pid
			select {
			case ex := <-done:
				cmd.Process.Release()
				if ex.Pid != pid || !ex.Status.Exited() || ex.Status.ExitStatus() != i%100 {
					errs <- "child " + strconv.Itoa(i) + " got pid " + strconv.Itoa(ex.Pid) + " status " + strconv.Itoa(int(ex.Status))
				}
			case <-time.After(10 * time.Second):
				errs <- "child " + strconv.Itoa(i) + ": no exit in 10 s"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// The orphans were reaped: none of this process's children is left,
	// zombie or not.
	deadline := time.Now().Add(5 * time.Second)
	for {
		kids := children(t)
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children left 5 s after the orphans ended: %v", kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := Orphans() - before; got < n {
		t.Errorf("reaped %d orphans, want at least %d", got, n)
	}
}

// A child that fails to start is no one's: Start says so and nothing waits.
func TestStartFails(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/program")); err == nil {
		t.Fatal("Start of a missing program did not fail")
	}
}

// children lists this process's children, with their state.
func children(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == self {
			out = append(out, e.Name()+":"+f[0])
		}
	}
	return out
}
