//go:build !linux

package isolation

import (
	"encoding/json"
	"errors"
	"os"
	"syscall"
)

// StageArg selects the stage role (see the Linux file).
const StageArg = "__stage"

// Stage cannot exist where jobs cannot be confined.
type Stage struct{ PID int }

// Files are a job's descriptors (see the Linux file).
type Files struct {
	Stdio     [3]*os.File
	Cwd, Home *os.File
}

// StartStage refuses on systems without Landlock: a job must not run
// unconfined by accident.
func StartStage(exe string, attr *syscall.SysProcAttr) (*Stage, error) {
	return nil, errors.New("confining a job needs Linux")
}

// Assign is never reached (StartStage fails).
func (s *Stage) Assign(cfg *JobConfig, f Files, tty bool) Started {
	err := errors.New("confining a job needs Linux")
	b, _ := json.Marshal(Applied{Error: err.Error()})
	return Started{Code: ExitSetupFailed, Err: err, Applied: string(b)}
}

// DirectSupported: jobs start only on Linux.
const DirectSupported = false

// Direct refuses, as StartStage does.
func Direct(cfg *JobConfig, f Files, tty bool, cgroupFD int) Started {
	err := errors.New("confining a job needs Linux")
	b, _ := json.Marshal(Applied{Error: err.Error()})
	return Started{Code: ExitSetupFailed, Err: err, Applied: string(b)}
}

// Close does nothing.
func (s *Stage) Close() {}

// StageMain refuses.
func StageMain() int { return ExitSetupFailed }

// OpenDir opens a directory handle.
func OpenDir(path string) (*os.File, error) { return os.Open(path) }

// HandlePath is the handle's name where /proc is not there to ask.
func HandlePath(f *os.File) (string, error) { return f.Name(), nil }

// EnsureHome makes home.
func EnsureHome(home string) error { return os.MkdirAll(home, 0o755) }

// ResetIgnoredSignals does nothing where jobs cannot start.
func ResetIgnoredSignals() {}

// Started is how a confined start went (see the Linux file).
type Started struct {
	PID     int
	Applied string // JSON of an Applied
	Code    int
	Err     error
}

// ConfineNoFiles is only implemented on Linux (Landlock).
func ConfineNoFiles() (string, error) {
	return "", errors.New("confining a process needs Landlock (Linux)")
}
