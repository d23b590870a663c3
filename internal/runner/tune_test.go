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
	defer func() { usualProcsOnce = sync.Once{} }()
	usualProcsOnce = sync.Once{}
	runtime.SetDefaultGOMAXPROCS()
	usual := runtime.GOMAXPROCS(0)
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
	if n := runtime.GOMAXPROCS(0); n != usual {
		t.Fatalf("GOMAXPROCS past busyOutput = %d, want the runtime's default %d", n, usual)
	}
}
