package isolation

// Exit codes of a job that never ran, as a shell gives them.
const (
	// ExitSetupFailed: the job could not be set up (isolation on but
	// Landlock unusable, bad config, forced failure, missing cwd).
	ExitSetupFailed = 125
	// ExitCannotExec: the program exists but could not be executed
	// (permission, format), as in the shell.
	ExitCannotExec = 126
	// ExitNotFound: the program does not exist, as in the shell.
	ExitNotFound = 127
)

// JobConfig is everything needed to start a job confined (Start). It comes
// from the job's spec, which the server built; nothing in it comes from any
// process's environment.
type JobConfig struct {
	// Argv[0] is the path to execute: the script itself for a "#!" script,
	// or the shell. A name without '/' is looked up in Env's PATH.
	Argv []string `json:"argv"`
	// Env is the job's complete environment (BuildEnv).
	Env []string `json:"env"`
	// Cwd is the job's working directory; it must exist.
	Cwd string `json:"cwd"`
	// Home is the job's HOME, created 0755 when missing (before Landlock).
	Home string `json:"home"`
	// Script is the job's script file, allowed read + execute.
	Script string `json:"script"`
	// TTY is the job's pty slave path, allowed read-write as a device.
	TTY    string `json:"tty,omitempty"`
	Policy Policy `json:"policy"`
	// ForceFail is a test hook: when non-empty the start fails with this
	// message (exit 125) before anything else. Only the server/runner can
	// set it; the job's env has no way to.
	ForceFail string `json:"force_fail,omitempty"`
	// Walls: capabilities, the seccomp filter, the IPC namespace.
	Walls Walls `json:"walls"`
}

// Applied records what was applied to one job.
type Applied struct {
	// Enabled: a Landlock domain is in force for the job.
	Enabled bool `json:"enabled"`
	// Reason says why Enabled is false when isolation was not asked for.
	Reason string `json:"reason,omitempty"`
	// Error is set when setup failed: the job exits 125 and never runs.
	Error string `json:"error,omitempty"`
	// ABI is the kernel's Landlock ABI version (0: none); Errata the
	// kernel's fixed-errata bit set.
	ABI    int `json:"abi,omitempty"`
	Errata int `json:"errata,omitempty"`
	// HandledFS are the filesystem rights the domain restricts.
	HandledFS []string `json:"handled_fs,omitempty"`
	// ScopeSignal / ScopeAbstractUnix: the job cannot signal, or connect
	// to abstract unix sockets of, processes outside its domain.
	ScopeSignal       bool `json:"scope_signal"`
	ScopeAbstractUnix bool `json:"scope_abstract_unix"`
	// IoctlDev: ioctl on device files is restricted (and granted on the
	// allowed devices only).
	IoctlDev bool `json:"ioctl_dev"`
	// Rules are the rules actually added.
	Rules []AppliedRule `json:"rules,omitempty"`
	// Skipped are the paths that were asked for but not added.
	Skipped []SkippedPath `json:"skipped,omitempty"`
	// Notes are other things left out, and why.
	Notes []string `json:"notes,omitempty"`
	// Capabilities are what the job keeps of its capabilities (its
	// permitted and effective sets; also its bounding and inheritable
	// sets where the server could cut them): an empty list when it keeps
	// none (any job of a non-root server), null when they were not
	// limited (a config without Walls.LimitCaps), or the start failed
	// before they were.
	Capabilities []string `json:"capabilities"`
	// Seccomp is the job's seccomp filter: "default", or "off" when the
	// server was started with --job-seccomp=off; absent when the start
	// failed before it.
	Seccomp string `json:"seccomp,omitempty"`
	// IPCNamespace: the job has an IPC namespace of its own.
	IPCNamespace bool `json:"ipc_namespace,omitempty"`
}

// AppliedRule is one Landlock rule that was added.
type AppliedRule struct {
	Path   string   `json:"path"`
	Access []string `json:"access"`
}

// SkippedPath is a path that was not added, and why.
type SkippedPath struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}
