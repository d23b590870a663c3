package isolation

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Started is how a confined start went.
type Started struct {
	// PID is the job's process; 0 when it did not start.
	PID int
	// Applied is what confines it (or, with Err, why nothing does): the
	// JSON of an Applied, as the stage wrote it. The runner passes it on
	// to the job's record as it is, without decoding it.
	Applied string
	// Code is, when the job did not start, the exit code that says why, as
	// a shell would: ExitSetupFailed, ExitCannotExec or ExitNotFound.
	Code int
	// Err says why the job did not start.
	Err error
}

// DecodeApplied is st.Applied decoded.
func (st *Started) DecodeApplied() (Applied, error) {
	a, ok := decodeApplied([]byte(st.Applied))
	if !ok {
		return a, fmt.Errorf("decode what was applied: %d bytes that are not an Applied", len(st.Applied))
	}
	return a, nil
}

// ResetIgnoredSignals puts every signal this process inherited as ignored
// back to its default: an ignored signal stays ignored across fork and
// exec, and a job must not start deaf to signals because of how an
// ancestor of the server was started (nohup, a CI harness). Signals Go
// handles reset by themselves at exec.
func ResetIgnoredSignals() {
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		if old.handler != sigIgn {
			continue
		}
		var dfl kernelSigaction // SIG_DFL, no flags, empty mask
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
}
