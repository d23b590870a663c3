//go:build !linux

package isolation

import (
	"errors"
	"os"
	"syscall"
)

// Start refuses on systems without Landlock: a job must not run unconfined
// by accident.
func Start(cfg *JobConfig, stdio [3]*os.File, attr *syscall.SysProcAttr) Started {
	return Started{Code: ExitSetupFailed, Err: errors.New("confining a job needs Linux")}
}

// ResetIgnoredSignals does nothing where jobs cannot start.
func ResetIgnoredSignals() {}

// Started is how a confined start went (see the Linux file).
type Started struct {
	PID     int
	Applied Applied
	Code    int
	Err     error
}
