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

// configChannel is a plain pipe where the stage cannot run anyway.
func configChannel() (theirs, ours *os.File, err error) {
	r, w, err := os.Pipe()
	return r, w, err
}
