package runner

import (
	"runtime"
	"sync"
	"testing"
)

// A runner runs on one P: no threads started for a second one (each
// costs its start and the TLB shootdowns of every unmapping and the exit)
// until its job's output passes busyOutput; then it has the runtime's
// usual Ps again.
func TestTuneRuntimeOnePUntilBusy(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer func() { usualProcs, usualProcsOnce = 1, sync.Once{} }()
	usualProcs, usualProcsOnce = 1, sync.Once{}
	runtime.GOMAXPROCS(2)
	tuneRuntime()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS after tuneRuntime = %d, want 1", n)
	}
	r := &Runner{sizeCh: make(chan struct{}, 1)}
	r.grew(busyOutput)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS with %d bytes of output = %d, want 1", busyOutput, n)
	}
	r.grew(1)
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("GOMAXPROCS past busyOutput = %d, want the usual 2", n)
	}
}
