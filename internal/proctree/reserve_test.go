package proctree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReserveThreads brings the process to at least that many threads.
func TestReserveThreads(t *testing.T) {
	before, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skipf("no /proc/self/task: %v", err)
	}
	want := len(before) + 6
	ReserveThreads(want)
	after, _ := os.ReadDir("/proc/self/task")
	if len(after) < want || len(after) > 2*want+2 {
		t.Fatalf("%d threads after ReserveThreads(%d), from %d", len(after), want, len(before))
	}
	ReserveThreads(want - 3) // already there: none made
	if again, _ := os.ReadDir("/proc/self/task"); len(again) > len(after)+1 {
		t.Fatalf("%d threads after asking for fewer than there were (%d)", len(again), len(after))
	}
}

// SharedPidsLimit, called from a process in a group whose pids.max is
// 77, finds that limit.
func TestSharedPidsLimit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	// The probe's answer is written before the script says it is ready.
	script := helperRole + `=sharedpids "$PT_SELF" > "$PT_OUT"; touch "$PT_READY"; sleep 60`
	r := startRunner(t, KindCgroup2, script, "PT_PIDS_MAX=77", "PT_SELF="+os.Args[0], "PT_OUT="+out)
	if !r.info.PidsLimitApplied {
		t.Skipf("no pids limit on the job's group here: %s", r.info.Why)
	}
	r.waitReady()
	b, _ := os.ReadFile(out)
	if got := strings.TrimSpace(string(b)); got != "77 true" {
		t.Fatalf("inside a group of pids.max 77: %q", got)
	}
}
