package runner

import (
	"runtime"
	"testing"
)

// A runner runs on one P: no threads started for a second one (each
// costs its start and the TLB shootdowns of every unmapping and the exit).
func TestTuneRuntimeOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)
	tuneRuntime()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS after tuneRuntime = %d, want 1", n)
	}
}
