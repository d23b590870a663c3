//go:build !linux

package isolation

import (
	"fmt"
	"os"
)

// StageMain fails on systems without Landlock: the stage exists to confine
// a job, and a job must not run unconfined by accident.
func StageMain() {
	fmt.Fprintln(os.Stderr, "shellctl: the job stage needs Linux")
	os.Exit(ExitSetupFailed)
}
