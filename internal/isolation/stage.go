package isolation

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// StageArg is the hidden first argument that makes the runner's binary act
// as the job's child stage: `shellctl-runner __stage`.
const StageArg = "__stage"

// File descriptors of the stage. exec.Cmd.ExtraFiles[i] becomes fd 3+i.
const (
	stageConfigFD = 3 // the stage's end of the config socket
	stageStatusFD = 4 // write end of the status pipe (one Applied line)
)

// Exit codes of the stage when the script never ran.
const (
	// ExitSetupFailed: the stage could not set the job up (isolation on
	// but Landlock unusable, bad config, forced failure, chdir failed).
	ExitSetupFailed = 125
	// ExitCannotExec: the program exists but could not be executed
	// (permission, format), as in the shell.
	ExitCannotExec = 126
	// ExitNotFound: the program does not exist, as in the shell.
	ExitNotFound = 127
)

// Bounds of the two pipes. Both are far above real sizes and only stop a
// broken peer from making the other side read without end.
const (
	// maxConfigBytes: a run request is at most 2 MiB and the server's
	// environment adds little; 16 MiB leaves room for both many times.
	maxConfigBytes = 16 << 20
	// maxAppliedBytes: one Applied line — a few dozen rules.
	maxAppliedBytes = 1 << 20
)

// StageConfig is everything the stage needs. The runner JSON-encodes it into
// the config pipe; nothing comes from the stage's environment.
type StageConfig struct {
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
	// ForceFail is a test hook: when non-empty the stage fails with this
	// message (exit 125) before anything else. Only the server/runner can
	// set it; the job's env has no way to.
	ForceFail string `json:"force_fail,omitempty"`
	// WorkspaceRoot, when set, is checked against the real working
	// directory once the stage is in it (after every symlink is resolved
	// by the kernel): outside it, the job fails closed.
	WorkspaceRoot string `json:"workspace_root,omitempty"`
}

// Applied records what the stage applied to one job.
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
	// AllThreads: every OS thread of the stage was restricted, not only
	// the one that execs (false in cgo builds, where the Go runtime
	// cannot run a syscall on all threads; the exec'ing thread — the
	// only one the job inherits — is restricted either way).
	AllThreads bool `json:"all_threads"`
	// Rules are the rules actually added.
	Rules []AppliedRule `json:"rules,omitempty"`
	// Skipped are the paths that were asked for but not added.
	Skipped []SkippedPath `json:"skipped,omitempty"`
	// Notes are other things left out, and why.
	Notes []string `json:"notes,omitempty"`
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

// StageCommand prepares `runnerPath __stage` with cfg passed over an
// inherited pipe (fd 3) and a status pipe (fd 4) that carries one Applied
// line back. The stage gets an empty environment of its own: the job's
// environment travels in cfg and is only handed to execve.
//
// The caller sets Stdin/Stdout/Stderr/SysProcAttr, calls cmd.Start() and
// then — whether Start succeeded or not — calls send(), which releases the
// child's ends of the pipes, writes the config and closes the config pipe.
// The caller owns appliedR: read it with ReadApplied, then close it.
func StageCommand(runnerPath string, cfg StageConfig) (cmd *exec.Cmd, send func() error, appliedR *os.File, err error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode stage config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, nil, nil, fmt.Errorf("stage config is %d bytes, more than %d", len(data), maxConfigBytes)
	}
	cfgR, cfgW, err := configChannel()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("config channel: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, nil, nil, fmt.Errorf("status pipe: %w", err)
	}
	cmd = exec.Command(runnerPath, StageArg)
	cmd.Env = []string{} // non-nil: the stage inherits nothing
	cmd.ExtraFiles = []*os.File{cfgR, stW}
	sent := false
	send = func() error {
		if sent {
			return errors.New("stage config already sent")
		}
		sent = true
		// After Start the child holds its own copies; ours would keep
		// the status pipe open past the stage's exec (no EOF).
		cfgR.Close()
		stW.Close()
		defer cfgW.Close()
		if cmd.Process == nil {
			return errors.New("send stage config: stage not started")
		}
		if _, err := cfgW.Write(data); err != nil {
			return fmt.Errorf("send stage config: %w", err)
		}
		if err := cfgW.Close(); err != nil {
			return fmt.Errorf("send stage config: %w", err)
		}
		return nil
	}
	return cmd, send, stR, nil
}

// ErrNoApplied means the stage ended without reporting what it applied (it
// was killed, or is not a stage).
var ErrNoApplied = errors.New("stage reported nothing")

// ReadApplied reads the stage's one Applied line from the status pipe. It
// returns when the line is complete, so it does not wait for the job.
func ReadApplied(r io.Reader) (Applied, error) {
	br := bufio.NewReader(io.LimitReader(r, maxAppliedBytes))
	line, err := br.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			if len(line) == 0 {
				return Applied{}, ErrNoApplied
			}
			return Applied{}, fmt.Errorf("read applied: truncated line (%d bytes): %w", len(line), io.ErrUnexpectedEOF)
		}
		return Applied{}, fmt.Errorf("read applied: %w", err)
	}
	var a Applied
	if err := json.Unmarshal(line, &a); err != nil {
		return Applied{}, fmt.Errorf("decode applied: %w", err)
	}
	return a, nil
}
