//go:build linux && amd64

package isolation

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The direct start: the runner's own child becomes the job, with no stage
// process in between.
//
// A stage is a Go program: on a machine where a page fault costs tens of
// microseconds its start alone (the runtime's, about 160 page faults) was
// a third of a job's CPU. Here the runner clones a child that shares its
// memory and suspends the cloning thread until the child calls execve
// (CLONE_VM|CLONE_VFORK, as Go's own os/exec does), and the child does
// what the stage did after it got its job: the job's descriptors, its
// process group or session and terminal, its working directory, then
// no_new_privs and the job's Landlock domain, and execve. It runs only
// raw system calls on values made before the clone (childPlan): no Go
// runtime, no allocation, no stack growth, every signal blocked until its
// dispositions are back to their defaults.
//
// The walls are the stage's: the domain is made by the child itself, the
// one task in it until execve, which replaces the shared memory with the
// job's own before the job's first instruction; no thread of the runner
// is ever in it. The ruleset is built before the clone, in the runner (a
// ruleset confines nothing until a task restricts itself with it), from
// the same handles (cwd, HOME) as before. Every descriptor but the job's
// three is close-on-exec by the time the child execs.

// DirectSupported reports whether this build starts jobs directly
// (Direct); elsewhere a stage process does it (StartStage).
const DirectSupported = true

// vforkSyscall is the clone that shares our memory (direct_linux_amd64.s).
func vforkSyscall(trap, a1, a2 uintptr) (r1, errno uintptr)

// The runtime's hooks around a fork, as package syscall calls them: block
// every signal on this thread and spoil its stack guard (so any stack
// growth in the child is caught, not done), and undo both in the parent.
// The child does not call the runtime's own undoing
// (syscall.runtime_AfterForkInChild: its handlers back to the defaults,
// then the thread's mask back): childMain puts every disposition back
// itself and clears the mask, which covers both.
//
//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

// Steps of the child, as it reports the one that failed.
const (
	stepEarly      = iota + 1 // the reason was known before the clone
	stepDup                   // the job's stdin, stdout, stderr
	stepGroup                 // its own process group (pty)
	stepForeground            // the terminal's foreground (pty)
	stepSession               // its own session (stdio)
	stepChdir                 // its working directory
	stepCloexec               // every other descriptor close-on-exec
	stepNoNewPrivs
	stepRestrict // landlock_restrict_self
	stepExec
	// stepWalls plus a step of walls_linux.go: the job's capabilities
	// and its seccomp filter, after its Landlock domain.
	stepWalls = 32
)

// childPlan is everything the child needs, made before the clone. The
// child only reads it: its own variables live on its stack, below the
// suspended parent's.
type childPlan struct {
	stdin, stdout, stderr uintptr // the job's descriptors, ours (≥ 3)
	tty                   bool
	cwd                   uintptr // the job's working directory, a handle
	ruleset               int     // the job's Landlock ruleset; -1: no domain
	report                uintptr // the write end of the failure pipe
	earlyCode             uintptr // != 0: exit with this code at once
	prog                  *byte
	argv, envv            **byte
	busyTries             int
	busyPause             syscall.Timespec
	noSignals             uint64          // the empty signal set
	dfl                   kernelSigaction // SIG_DFL, no flags, empty mask

	walls *wallPlan // capabilities and the seccomp filter; nil: none
}

// cloneArgs is struct clone_args up to its cgroup field (clone3(2)).
type cloneArgs struct {
	flags      uint64
	pidFD      uint64
	childTID   uint64
	parentTID  uint64
	exitSignal uint64
	stack      uint64
	stackSize  uint64
	tls        uint64
	setTID     uint64
	setTIDSize uint64
	cgroup     uint64
}

// Direct starts the job: a child of the calling process, born in the
// cgroup cgroupFD (-1: ours) when there is one, becomes it, as a stage
// does (Stage.Assign). A job that could not start has had the reason
// written to its stdout (and its stderr, when that differs) as
// "shellctl: …", and its process exits with Started.Code, so its exit is
// the job's: the caller reaps Started.PID. PID 0 (with Err) means no
// process was made: nothing to reap, nothing written.
func Direct(cfg *JobConfig, f Files, tty bool, cgroupFD int) (st Started) {
	plan := &childPlan{ruleset: -1, busyTries: textBusyTries, busyPause: syscall.NsecToTimespec(int64(textBusyPause)), tty: tty}
	var early error
	earlyCode := 0
	setEarly := func(code int, err error) {
		if early == nil {
			early, earlyCode = err, code
		}
	}
	applied := Applied{}
	appliedJSON := noneApplied

	cwd, home, done, err := jobDirs(cfg, f)
	defer done()
	if err != nil {
		setEarly(ExitSetupFailed, err)
	}
	for i, s := range f.Stdio {
		if s == nil {
			return Started{Code: ExitSetupFailed, Applied: noneApplied, Err: fmt.Errorf("the job's descriptor %d is missing", i)}
		}
	}
	// Through SyscallConn, not Fd: Fd would make a polled descriptor (a
	// pipe's end, say) blocking for the runner too.
	stdio := [3]uintptr{}
	for i, s := range f.Stdio {
		fd, err := rawFD(s)
		if err != nil || fd < 3 {
			return Started{Code: ExitSetupFailed, Applied: noneApplied, Err: fmt.Errorf("the job's descriptor %d: %d, %v", i, fd, err)}
		}
		stdio[i] = uintptr(fd)
	}
	plan.stdin, plan.stdout, plan.stderr = stdio[0], stdio[1], stdio[2]
	// The job's descriptors are blocking, as a shell's are: a pipe made
	// by os.Pipe is non-blocking for the runtime's poller, and the flag
	// belongs to the pipe's end, which the job gets.
	for i, fd := range stdio {
		if err := unix.SetNonblock(int(fd), false); err != nil {
			return Started{Code: ExitSetupFailed, Applied: noneApplied, Err: fmt.Errorf("make the job's descriptor %d blocking: %w", i, err)}
		}
	}

	if early == nil {
		cwdFD, err := rawFD(cwd)
		if err != nil {
			return Started{Code: ExitSetupFailed, Applied: noneApplied, Err: fmt.Errorf("the job's cwd handle: %w", err)}
		}
		plan.cwd = uintptr(cwdFD)
		homeFD := -1
		if home != nil {
			if homeFD, err = rawFD(home); err != nil {
				return Started{Code: ExitSetupFailed, Applied: noneApplied, Err: fmt.Errorf("the job's home handle: %w", err)}
			}
		}
		a, rs, err := directDomain(cfg, cwdFD, homeFD)
		applied = a
		if err != nil {
			applied.Enabled, applied.Error = false, err.Error()
			setEarly(ExitSetupFailed, err)
		} else {
			plan.ruleset = rs
			defer unix.Close(rs)
			if wp, err := planWalls(&cfg.Walls); err != nil {
				applied.Enabled, applied.Error = false, err.Error()
				setEarly(ExitSetupFailed, err)
			} else {
				plan.walls = wp
				wp.applied(&cfg.Walls, &applied)
			}
		}
		appliedJSON = string(appendApplied(nil, &applied))
	}
	var prog string
	if early == nil {
		p, err := lookProgram(cfg.Argv[0], cfg.Env)
		if err != nil {
			setEarly(ExitNotFound, err)
		}
		prog = p
	}
	if early == nil {
		var err error
		if plan.prog, err = syscall.BytePtrFromString(prog); err == nil {
			var argv, envv []*byte
			if argv, err = syscall.SlicePtrFromStrings(cfg.Argv); err == nil {
				if envv, err = syscall.SlicePtrFromStrings(cfg.Env); err == nil {
					plan.argv, plan.envv = &argv[0], &envv[0]
				}
			}
		}
		if err != nil {
			// A NUL byte in the program, an argument or the environment:
			// execve could not be asked, as a shell's would fail.
			setEarly(ExitCannotExec, fmt.Errorf("exec %s: %w", prog, syscall.EINVAL))
		}
	}
	if early != nil {
		plan.earlyCode = uintptr(earlyCode)
	}

	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		return Started{Code: ExitSetupFailed, Applied: appliedJSON, Err: fmt.Errorf("make the job's start report pipe: %w", err)}
	}
	// Our end is read without waiting (below); the child's end stays
	// blocking (its one write of 8 bytes to an empty pipe never waits).
	if err := unix.SetNonblock(pipe[0], true); err != nil {
		unix.Close(pipe[0])
		unix.Close(pipe[1])
		return Started{Code: ExitSetupFailed, Applied: appliedJSON, Err: fmt.Errorf("make the job's start report pipe: %w", err)}
	}
	plan.report = uintptr(pipe[1])
	args := &cloneArgs{flags: unix.CLONE_VM | unix.CLONE_VFORK, exitSignal: uint64(unix.SIGCHLD)}
	if cgroupFD >= 0 {
		args.flags |= unix.CLONE_INTO_CGROUP
		args.cgroup = uint64(cgroupFD)
	}
	if cfg.Walls.NewIPC && early == nil {
		// The job's own SysV IPC and POSIX message queues: made by the
		// clone itself, no system call more in the child.
		args.flags |= unix.CLONE_NEWIPC
	}
	pid, errno := startChild(plan, args)
	unix.Close(pipe[1])
	runtime.KeepAlive(plan)
	runtime.KeepAlive(f)
	runtime.KeepAlive(cwd)
	runtime.KeepAlive(home)
	if errno != 0 {
		unix.Close(pipe[0])
		return Started{Code: ExitSetupFailed, Applied: appliedJSON, Err: fmt.Errorf("start the job's process: clone: %w", syscall.Errno(errno))}
	}
	st.PID = int(pid)

	// The child has exec'd or exited by now (the clone waited for it to
	// let go of our memory, which a child does at execve or at its exit):
	// a failure's report, written before either, is in the pipe whole
	// (one write of 8 bytes), or there is none. The read does not wait:
	// the child's end of the pipe closes a little after it let go, in its
	// execve, and waiting for that end of file cost a cross-CPU wake-up
	// on every job's start (0.6–0.8 ms p50 on the development VM).
	var rec [8]byte
	n := 0
	for {
		m, err := unix.Read(pipe[0], rec[:])
		if err == unix.EINTR {
			continue
		}
		if err == nil && m > 0 {
			n = m
		}
		break
	}
	unix.Close(pipe[0])
	if n == len(rec) {
		step := *(*uint32)(unsafe.Pointer(&rec[0]))
		e := syscall.Errno(*(*uint32)(unsafe.Pointer(&rec[4])))
		st.Code, st.Err = stepFailure(cfg, prog, int(step), e, early, earlyCode)
		switch step {
		case stepDup, stepGroup, stepForeground, stepSession, stepChdir, stepCloexec:
			appliedJSON = noneApplied // failed before anything confined it
		case stepNoNewPrivs, stepRestrict:
			applied.Enabled, applied.Error = false, st.Err.Error()
			applied.Capabilities, applied.Seccomp = nil, "" // not reached
			appliedJSON = string(appendApplied(nil, &applied))
		}
		if step > stepWalls && step < stepWalls+uint32(len(wallStepWhat)) {
			applied.Enabled, applied.Error = false, st.Err.Error()
			appliedJSON = string(appendApplied(nil, &applied))
		}
	} else if n != 0 {
		st.Code, st.Err = ExitSetupFailed, fmt.Errorf("the job's start report: %d bytes, not %d", n, len(rec))
	}
	st.Applied = appliedJSON
	if st.Err != nil {
		// Where the job's output goes, as a stage says it.
		msg := []byte("shellctl: " + st.Err.Error() + "\n")
		_, _ = f.Stdio[1].Write(msg)
		if !tty && f.Stdio[2] != f.Stdio[1] {
			_, _ = f.Stdio[2].Write(msg)
		}
	}
	return st
}

// stepWhat says what each step of the child does, for its failure.
var stepWhat = [...]string{
	stepDup:        "set up the job's descriptors",
	stepGroup:      "make the job's process group",
	stepForeground: "put the job in its terminal's foreground",
	stepSession:    "make the job's session",
	stepCloexec:    "mark the runner's descriptors close-on-exec",
	stepNoNewPrivs: "apply Landlock filesystem isolation: prctl(PR_SET_NO_NEW_PRIVS)",
	stepRestrict:   "apply Landlock filesystem isolation: landlock_restrict_self",
}

// stepFailure is the code and error of a child that reported step failed
// with e.
func stepFailure(cfg *JobConfig, prog string, step int, e syscall.Errno, early error, earlyCode int) (int, error) {
	switch {
	case step == stepEarly:
		if early == nil {
			return ExitSetupFailed, errors.New("the job's start failed early with no reason kept")
		}
		return earlyCode, early
	case step == stepChdir:
		return ExitSetupFailed, fmt.Errorf("change to cwd %s: %w", cfg.Cwd, e)
	case step == stepExec:
		code := ExitCannotExec
		if e == syscall.ENOENT {
			code = ExitNotFound
		}
		return code, fmt.Errorf("exec %s: %w", prog, e)
	case step > stepWalls && step < stepWalls+len(wallStepWhat):
		return ExitSetupFailed, wallFailure(uintptr(step-stepWalls), e)
	case step > 0 && step < len(stepWhat) && stepWhat[step] != "":
		return ExitSetupFailed, fmt.Errorf("%s: %w", stepWhat[step], e)
	}
	return ExitSetupFailed, fmt.Errorf("the job's start failed at an unknown step %d: %w", step, e)
}

// directDomain is confine's decision, with the ruleset kept for the child
// to restrict itself with instead of enforced here: -1 when isolation is
// off. An error means the job must not run.
func directDomain(cfg *JobConfig, cwdFD, homeFD int) (Applied, int, error) {
	kept := -1
	a, err := confine(cfg, cwdFD, homeFD, func(fd int) error {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return fmt.Errorf("keep the ruleset for the job: %w", err)
		}
		kept = d
		return nil
	})
	if err != nil {
		if kept >= 0 {
			unix.Close(kept)
		}
		return a, -1, err
	}
	return a, kept, nil
}

// rawFD is f's descriptor, read without Fd (which makes it blocking).
func rawFD(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(d uintptr) { fd = int(d) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// startChild clones the child and, in it, runs childMain, which never
// returns. In the parent it returns the child's pid once the child has
// exec'd or exited, or the clone's errno.
//
//go:noinline
//go:norace
//go:nocheckptr
func startChild(p *childPlan, args *cloneArgs) (pid, errno uintptr) {
	runtimeBeforeFork()
	if args.flags&unix.CLONE_INTO_CGROUP != 0 {
		pid, errno = vforkSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args))
	} else {
		pid, errno = vforkSyscall(unix.SYS_CLONE, uintptr(args.flags|args.exitSignal), 0)
	}
	if errno != 0 || pid != 0 {
		runtimeAfterFork()
		return pid, errno
	}
	childMain(p)
	return 0, 0
}

// childMain is the child between the clone and execve (see the top of
// this file). nosplit: the stack must not grow (the runtime's stack guard
// is spoiled, and the stack is the suspended parent's).
//
//go:nosplit
//go:norace
//go:nocheckptr
func childMain(p *childPlan) {
	var e syscall.Errno
	var pgrp int32
	if p.earlyCode != 0 {
		childFail(p, stepEarly, 0)
	}
	if _, _, e = syscall.RawSyscall(unix.SYS_DUP3, p.stdin, 0, 0); e != 0 {
		childFail(p, stepDup, e)
	}
	if _, _, e = syscall.RawSyscall(unix.SYS_DUP3, p.stdout, 1, 0); e != 0 {
		childFail(p, stepDup, e)
	}
	if _, _, e = syscall.RawSyscall(unix.SYS_DUP3, p.stderr, 2, 0); e != 0 {
		childFail(p, stepDup, e)
	}
	if p.tty {
		// A process group of its own, in the runner's session, in the
		// foreground of the terminal that session owns (SIGTTOU, which
		// a background group setting it would get, is blocked).
		if _, _, e = syscall.RawSyscall(unix.SYS_SETPGID, 0, 0, 0); e != 0 {
			childFail(p, stepGroup, e)
		}
		r, _, _ := syscall.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
		pgrp = int32(r)
		if _, _, e = syscall.RawSyscall(unix.SYS_IOCTL, 0, unix.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
			childFail(p, stepForeground, e)
		}
	} else if _, _, e = syscall.RawSyscall(unix.SYS_SETSID, 0, 0, 0); e != 0 {
		// A stdio job has no terminal: a session of its own without one.
		childFail(p, stepSession, e)
	}
	if _, _, e = syscall.RawSyscall(unix.SYS_FCHDIR, p.cwd, 0, 0); e != 0 {
		childFail(p, stepChdir, e)
	}
	if _, _, e = syscall.RawSyscall(unix.SYS_CLOSE_RANGE, 3, ^uintptr(0)>>32, unix.CLOSE_RANGE_CLOEXEC); e != 0 {
		childFail(p, stepCloexec, e)
	}
	if p.ruleset >= 0 {
		if _, _, e = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
			childFail(p, stepNoNewPrivs, e)
		}
		if _, _, e = syscall.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(p.ruleset), 0, 0); e != 0 {
			childFail(p, stepRestrict, e)
		}
	}
	if p.walls != nil {
		// Capabilities cut and the seccomp filter, last before execve.
		if step, e := applyWalls(p.walls); e != 0 {
			childFail(p, stepWalls+step, e)
		}
	}
	// Every signal disposition back to its default while every signal is
	// still blocked: the runtime's handlers, and one ignored since whoever
	// started us (an ignored signal stays ignored across execve). The
	// child's handlers are its own (a clone without CLONE_SIGHAND): the
	// runner's stay as they are. Then no signal blocked: the job starts
	// with none (a signal that comes now takes its default action on the
	// job-to-be). This is all the runtime's undoing of a fork does in a
	// child (its handlers, then the mask), which is not called as well.
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig != uintptr(unix.SIGKILL) && sig != uintptr(unix.SIGSTOP) {
			syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&p.dfl)), 0, 8, 0, 0)
		}
	}
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&p.noSignals)), 0, 8, 0, 0)
	for i := 0; ; i++ {
		_, _, e = syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(p.prog)), uintptr(unsafe.Pointer(p.argv)), uintptr(unsafe.Pointer(p.envv)))
		// ETXTBSY: some process still holds the script open for writing
		// (see textBusyTries); a few short tries.
		if e != syscall.ETXTBSY || i >= p.busyTries {
			break
		}
		syscall.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&p.busyPause)), 0, 0)
	}
	childFail(p, stepExec, e)
}

// childFail reports step and e on the failure pipe and ends the child
// with the code that says what failed.
//
//go:nosplit
//go:norace
//go:nocheckptr
func childFail(p *childPlan, step uintptr, e syscall.Errno) {
	var rec [2]uint32
	rec[0], rec[1] = uint32(step), uint32(e)
	syscall.RawSyscall(unix.SYS_WRITE, p.report, uintptr(unsafe.Pointer(&rec)), 8)
	code := uintptr(ExitSetupFailed)
	switch step {
	case stepEarly:
		code = p.earlyCode
	case stepExec:
		code = ExitCannotExec
		if e == syscall.ENOENT {
			code = ExitNotFound
		}
	}
	for {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, code, 0, 0)
	}
}
