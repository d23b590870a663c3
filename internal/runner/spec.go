// Package runner is what shellctl-runner does for one job: start the job's
// process (in a terminal or with pipes), confined for it, copy its
// output to disk, end its process tree on request or at a limit, and publish
// how it ended — to the server over the control channel, and to the database
// itself when no server is there to hear it.
package runner

import (
	"path/filepath"

	"github.com/shellctl/shellctl/internal/isolation"
)

// Files of a job directory.
const (
	ScriptFile = "script"
	OutputFile = "output.log"
	StderrFile = "stderr.log"
	SocketFile = "ctl.sock"
)

// Spec is everything a runner needs to run one job, sent by the server in
// the assign message. Every default is already
// filled in: the runner decides nothing the server could have decided.
type Spec struct {
	ID       string `json:"id"`
	StateDir string `json:"state_dir"`
	Dir      string `json:"dir"`
	Mode     string `json:"mode"` // "pty" or "stdio"
	// ControlKey authenticates connections to the control socket.
	ControlKey string   `json:"control_key"`
	Argv       []string `json:"argv"` // what the job executes
	Env        []string `json:"env"`
	Cwd        string   `json:"cwd"`
	Home       string   `json:"home"`
	Cols       int      `json:"cols"`
	Rows       int      `json:"rows"`

	Policy isolation.Policy `json:"policy"`
	// ForceIsolationFail makes the job's confinement fail with this message
	// (a test hook set only from the server's own configuration).
	ForceIsolationFail string `json:"force_isolation_fail,omitempty"`

	MaxRuntimeSeconds float64 `json:"max_runtime_seconds,omitempty"` // 0 = no limit
	MaxOutputBytes    int64   `json:"max_output_bytes,omitempty"`    // 0 = no limit
}

// JobDir is the directory of job id under stateDir.
func JobDir(stateDir, id string) string { return filepath.Join(stateDir, "jobs", id) }
