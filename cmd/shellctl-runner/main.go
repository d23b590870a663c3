// Command shellctl-runner supervises one job: shellctl serve starts it
// detached (a few ahead of need), hands it a job over its control channel,
// and the runner starts the job confined, copies its output, ends its
// process tree on request or at a limit and publishes how it ended.
package main

import (
	"os"
	"runtime"

	"github.com/shellctl/shellctl/internal/runner"
)

// init keeps the main goroutine on the main thread for good, so no other
// goroutine ever runs there. A job is started from a thread confined for it
// (isolation.Start), and the main thread must never be that thread: a
// process is known to the kernel's signal checks by its main thread, so a
// confined main thread would let the job signal its runner.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(runner.Main(os.Args[1:]))
}
