package isolation

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Started is how a confined start went.
type Started struct {
	// PID is the job's process; 0 when it did not start.
	PID int
	// Applied is what confines it (or, with Err, why nothing does).
	Applied Applied
	// Code is, when the job did not start, the exit code that says why, as
	// a shell would: ExitSetupFailed, ExitCannotExec or ExitNotFound.
	Code int
	// Err says why the job did not start.
	Err error
}

// Start starts cfg's job confined. The job is forked from an OS thread of
// the caller that is confined for it first — HOME made, Landlock domain and
// no_new_privs set on that thread only — so the job is inside its domain
// from its first instruction while every other thread of the caller stays
// unrestricted. The thread is never released: it ends with its goroutine,
// and nothing else ever runs confined. This is the child stage of the
// design without a process of its own, so a job's start costs one fork.
//
// stdio become the job's fds 0–2 and nothing else reaches it (the caller
// keeps its own descriptors close-on-exec). attr sets process attributes
// (process group, foreground terminal, cgroup); argv, env and cwd are cfg's.
// The job starts with no signal blocked; signals the caller ignores stay
// ignored, so the caller resets them first (ResetIgnoredSignals). The
// caller reaps the process, and keeps its main goroutine on the main thread
// (runtime.LockOSThread in an init function), which Start never confines.
func Start(cfg *JobConfig, stdio [3]*os.File, attr *syscall.SysProcAttr) Started {
	ch := make(chan Started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		ch <- start(cfg, stdio, attr)
	}()
	return <-ch
}

// start is Start on the calling thread, which the caller has locked.
func start(cfg *JobConfig, stdio [3]*os.File, attr *syscall.SysProcAttr) (st Started) {
	notStarted := func(code int, err error) Started {
		st.Code, st.Err = code, err
		st.Applied.Enabled, st.Applied.Error = false, err.Error()
		return st
	}
	if unix.Gettid() == unix.Getpid() {
		// The main thread stands for the whole process in the kernel's
		// signal checks: confined, it would let the job signal the caller.
		// Callers keep the main goroutine on it (runtime.LockOSThread in an
		// init function).
		return notStarted(ExitSetupFailed, errors.New("refusing to confine the main thread: lock the main goroutine to it first"))
	}
	// The child takes this thread's signal mask: nothing blocked.
	var none unix.Sigset_t
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil)
	a, err := confineThread(cfg)
	st.Applied = a
	if err != nil {
		return notStarted(ExitSetupFailed, err)
	}
	prog, err := lookProgram(cfg.Argv[0], cfg.Env)
	if err != nil {
		st.Code, st.Err = ExitNotFound, err
		return st
	}
	cmd := &exec.Cmd{Path: prog, Args: cfg.Argv, Env: cfg.Env, Dir: cfg.Cwd,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2], SysProcAttr: attr}
	if err := cmd.Start(); err != nil {
		st.Code, st.Err = ExitCannotExec, fmt.Errorf("exec %s: %w", prog, errors.Unwrap(err))
		if errors.Is(err, syscall.ENOENT) {
			st.Code = ExitNotFound
		}
		return st
	}
	st.PID = cmd.Process.Pid
	return st
}

// confineThread makes the job's HOME and confines the calling thread in
// the job's Landlock domain. An error means the job must not run.
func confineThread(cfg *JobConfig) (Applied, error) {
	var a Applied
	if cfg.ForceFail != "" {
		return a, errors.New(cfg.ForceFail)
	}
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return a, errors.New("no program to run")
	}
	if cfg.Home != "" {
		if err := ensureHome(cfg.Home); err != nil {
			return a, err
		}
	}
	if cfg.Cwd != "" {
		if fi, err := os.Stat(cfg.Cwd); err != nil {
			return a, fmt.Errorf("change to cwd: %w", err)
		} else if !fi.IsDir() {
			return a, fmt.Errorf("change to cwd: %s is not a directory", cfg.Cwd)
		}
	}
	if !cfg.Policy.Enabled {
		a.Reason = reasonDisabled
		return a, nil
	}
	if (cfg.Home != "" && !filepath.IsAbs(cfg.Home)) || !filepath.IsAbs(cfg.Cwd) {
		return a, fmt.Errorf("path isolation needs an absolute home and cwd (home %q, cwd %q)", cfg.Home, cfg.Cwd)
	}
	// Landlock binds each rule to the directory its path named now: a
	// path component swapped later (a symlink) does not move the rule.
	a, err := applyLandlock(cfg)
	if err != nil {
		return a, fmt.Errorf("path isolation is on but Landlock could not be applied: %w", err)
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
