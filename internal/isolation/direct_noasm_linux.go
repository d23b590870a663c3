//go:build linux && !amd64

package isolation

import "errors"

// DirectSupported reports whether this build starts jobs directly
// (Direct): only linux/amd64 has the clone it needs
// (direct_linux_amd64.s); elsewhere a stage process starts every job.
const DirectSupported = false

// Direct is not built here: the runner uses its stage.
func Direct(cfg *JobConfig, f Files, tty bool, cgroupFD int) Started {
	return Started{Code: ExitSetupFailed, Applied: noneApplied, Err: errors.New("the direct start is only built for linux/amd64: use the stage")}
}
