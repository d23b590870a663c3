package isolation

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The stage is the process that becomes the job. Its runner starts it
// ahead of need (warm: born in the job's cgroup, in a process group of its
// own, unconfined and running none of the job's code) and hands it the job
// when there is one. The stage then sets up the job's terminal or pipes and
// working directory, makes the job's Landlock domain and no_new_privs on
// the thread that then calls execve, and becomes the job. So nothing but
// the job is ever inside the job's domain: Landlock lets a process ptrace,
// signal and read the memory of every process in its own domain, and a
// runner thread confined for the job would be open to all of that (it was
// exploited: a job attached to such a thread during its first microseconds
// and wrote code into the runner). Between landlock_restrict_self and
// execve only the stage's own code runs, and execve ends every other
// thread of the stage before the job's first instruction.
//
// The channel between runner and stage is a stream socketpair, the
// stage's end inherited as fd StageFD:
//
//	runner → stage: an 8-byte little-endian length carrying the job's
//	                descriptors (SCM_RIGHTS: stdin, stdout, stderr, cwd,
//	                home), then that many bytes of the request
//	                (stageRequest, in the format of stagewire_linux.go).
//	stage → runner: JSON lines: what was applied, sent just before
//	                execve, and a failure when something did not work.
//	                The stage's end is close-on-exec, so end of file with
//	                no failure means the job's program runs.
//
// The request starts with the protocol both were built with
// (StageProtocol): a stage refuses a request of another protocol with an
// answer that says so, and runs nothing. The check is a byte of the one
// message that carries the job: it costs the start nothing.

// textBusyTries and textBusyPause bound how long a stage retries an exec
// that failed with ETXTBSY (see becomeJob): 100 ms in all.
const (
	textBusyTries = 50
	textBusyPause = 2 * time.Millisecond
)

// StageArg, the first argument of a stage (cmd/shellctl-stage, or the
// runner's binary: cmd/shellctl-runner), makes it one; the socket to its
// runner is fd StageFD.
const StageArg = "__stage"

// StageFD is the descriptor of a stage's socket to its runner.
const StageFD = 3

// stageComm is a stage's process name (comm, NUL-terminated).
var stageComm = []byte("shellctl-stage\x00")

// maxStageRequest bounds a request a stage reads. The request holds the
// job's environment, which a run request bounds; this only guards the
// stage against a broken peer.
const maxStageRequest = 1 << 30

// stageEnv is the stage's own environment: the Go runtime's settings for
// a process that lives for a few system calls and then execs. One P (no
// threads started for idle Ps, fewer threads for execve to end), and no
// collector (it allocates a few KiB). The job's environment is not this:
// execve gets JobConfig.Env.
var stageEnv = []string{"GOMAXPROCS=1", "GOGC=off"}

// Stage is a started stage waiting for its job.
type Stage struct {
	// PID is the stage's process, which becomes the job's.
	PID   int
	sock  *os.File
	pidfd int // the handle of its start (-1 where the kernel gives none)
}

// StartStage starts a stage: exe (shellctl-stage, or the runner's binary) with StageArg,
// with attr's process attributes (its process group, its cgroup). The
// caller reaps it: it is the job's process from here on.
//
// Through syscall.ForkExec, not os/exec: a process's first os.StartProcess
// first probes the kernel for pidfds by starting (and waiting for) a
// process of its own, which cost a runner about 1 ms of its start on a
// machine where a process is slow to make; ForkExec asks for the pidfd
// with the stage itself.
func StartStage(exe string, attr *syscall.SysProcAttr) (*Stage, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("make the stage's socketpair: %w", err)
	}
	// Our end is non-blocking, so waiting on it parks a goroutine in the
	// runtime's poller rather than a thread in the kernel (a thread so
	// blocked makes the runtime start another for everything else).
	// The stage's end stays blocking: it reads it with plain system calls.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("make the stage's socketpair non-blocking: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "stage")
	defer unix.Close(fds[1])
	devNull, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("open %s for the stage: %w", os.DevNull, err)
	}
	defer unix.Close(devNull)
	sys := *attr // ours to change: the caller's stays as it was
	pidfd := -1
	sys.PidFD = &pidfd
	pid, err := syscall.ForkExec(exe, []string{"shellctl-stage", StageArg}, &syscall.ProcAttr{
		Env: stageEnv,
		// Its socket is StageFD (3); stdin, stdout and stderr /dev/null.
		Files: []uintptr{uintptr(devNull), uintptr(devNull), uintptr(devNull), uintptr(fds[1])},
		Sys:   &sys,
	})
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("start stage %s: %w", exe, err)
	}
	return &Stage{PID: pid, sock: ours, pidfd: pidfd}, nil
}

// Close lets a stage that was never assigned go (it exits on end of file).
func (s *Stage) Close() {
	if s.sock != nil {
		s.sock.Close()
		s.sock = nil
	}
}

// Kill ends a stage that was never assigned at once, through the handle
// its start gave (a pidfd): a stage that already ended and was reaped is
// not mistaken for whatever process got its pid since. (Without a pidfd,
// on kernels that have none, by its pid, as os.Process did.)
func (s *Stage) Kill() {
	if s.pidfd >= 0 {
		_ = unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0)
		return
	}
	_ = unix.Kill(s.PID, unix.SIGKILL)
}

// Files are the descriptors a job starts with. Cwd and Home are open
// directory handles (O_PATH is enough): the job's working directory and
// its read-write rules are made from them, never from names. Nil means
// "open cfg's path now" (tests and tools; the server always passes
// handles it checked).
type Files struct {
	Stdio [3]*os.File
	Cwd   *os.File
	Home  *os.File
}

// stageRequest is what a runner sends its stage (stagewire_linux.go).
type stageRequest struct {
	Config JobConfig
	// TTY: fd 0 is the job's terminal, whose foreground its group takes.
	TTY bool
	// HasHome: a home handle follows the cwd handle.
	HasHome bool
	// Fail: the job cannot start, for this reason, found before it was
	// handed over; the stage says so in its output and exits FailCode.
	// Only the stdio descriptors come with it.
	Fail     string
	FailCode int
}

// Assign hands the job to the stage and waits until the stage has become
// it, or failed to. A stage that failed has already written the reason
// ("shellctl: …") to the job's stdout (and stderr, when that differs) and
// exits with Started.Code, so its exit is the job's. Started.PID is the
// stage's process whenever the stage was reached: the caller reaps it.
func (s *Stage) Assign(cfg *JobConfig, f Files, tty bool) Started {
	defer s.Close()
	req := stageRequest{Config: *cfg, TTY: tty}
	cwd, home, done, err := jobDirs(cfg, f)
	defer done()
	if err != nil {
		req.Fail = err.Error()
	}
	fds := []int{int(f.Stdio[0].Fd()), int(f.Stdio[1].Fd()), int(f.Stdio[2].Fd())}
	if req.Fail != "" {
		req.FailCode = ExitSetupFailed
	} else {
		fds = append(fds, int(cwd.Fd()))
		if home != nil {
			fds = append(fds, int(home.Fd()))
			req.HasHome = true
		}
	}
	st := s.handOver(fds, encodeStageRequest(&req))
	// The descriptors stay open until they were sent.
	runtime.KeepAlive(f)
	runtime.KeepAlive(cwd)
	runtime.KeepAlive(home)
	return st
}

// jobDirs are the job's cwd and HOME handles: f's, or opened now from
// cfg's paths (tests and tools; the server always passes handles it
// checked). done closes what was opened here. An error is why the job
// cannot start (exit 125), as its output says it.
func jobDirs(cfg *JobConfig, f Files) (cwd, home *os.File, done func(), err error) {
	var opened []*os.File
	done = func() {
		for _, h := range opened {
			h.Close()
		}
	}
	cwd, home = f.Cwd, f.Home
	if cwd == nil {
		h, err := OpenDir(cfg.Cwd)
		if err != nil {
			return nil, nil, done, fmt.Errorf("change to cwd: %v", err)
		}
		opened = append(opened, h)
		cwd = h
	}
	if home == nil && cfg.Home != "" {
		if err := EnsureHome(cfg.Home); err != nil {
			return cwd, nil, done, err
		}
		h, err := OpenDir(cfg.Home)
		if err != nil {
			return cwd, nil, done, fmt.Errorf("open home: %v", err)
		}
		opened = append(opened, h)
		home = h
	}
	return cwd, home, done, nil
}

// failed is st with the failure code and err, and what was applied
// saying why nothing confines the job.
func failed(st Started, code int, err error) Started {
	st.Code, st.Err = code, err
	// Only here, on a failure, is what the stage said decoded.
	var a Applied
	if st.Applied != "" {
		a, _ = decodeApplied([]byte(st.Applied))
	}
	if a.Error == "" && !a.Enabled {
		a.Error = err.Error()
	}
	st.Applied = string(appendApplied(nil, &a))
	return st
}

// handOver sends the stage its request (body, in the wire's format) with
// the job's descriptors, and reads its answers until it became the job or
// failed to.
func (s *Stage) handOver(fds []int, body []byte) (st Started) {
	st.PID = s.PID
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(body)))
	// Through SyscallConn: Fd would put our end back in blocking mode.
	rc, err := s.sock.SyscallConn()
	if err != nil {
		return failed(st, ExitSetupFailed, fmt.Errorf("hand the job to its stage (pid %d): %w", s.PID, err))
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), hdr[:], unix.UnixRights(fds...), nil, 0)
		return serr != unix.EAGAIN
	}); err != nil {
		serr = err
	}
	if serr != nil {
		if errors.Is(serr, unix.EPIPE) || errors.Is(serr, unix.ECONNRESET) {
			// Its end is closed: the stage is gone (killed while it
			// waited), and it read nothing of the job.
			serr = fmt.Errorf("%w: %w", ErrStageGone, serr)
		}
		return failed(st, ExitSetupFailed, fmt.Errorf("hand the job to its stage (pid %d): %w", s.PID, serr))
	}
	if _, err := s.sock.Write(body); err != nil {
		return failed(st, ExitSetupFailed, fmt.Errorf("hand the job to its stage (pid %d): %w", s.PID, err))
	}
	// Replies until end of file: the stage's end closes at execve.
	sc := bufio.NewScanner(s.sock)
	sc.Buffer(make([]byte, 4<<10), 16<<20)
	got := false
	for sc.Scan() {
		rep, ok := decodeStageAnswer(sc.Bytes())
		if !ok {
			return failed(st, ExitSetupFailed, fmt.Errorf("read the stage's answer: %d bytes that are not a reply of a stage (another build?)", len(sc.Bytes())))
		}
		got = true
		if len(rep.Applied) > 0 && string(rep.Applied) != "null" {
			st.Applied = string(rep.Applied)
		}
		if rep.Err != "" {
			st.Code, st.Err = rep.Code, errors.New(rep.Err)
		}
		if rep.StageProtocol != 0 {
			st.Err = &StageProtocolError{Stage: rep.StageProtocol, Runner: StageProtocol}
		}
	}
	if !got {
		// Gone before it said anything: killed, or it could not read us.
		return failed(st, ExitSetupFailed, fmt.Errorf("the job's stage (pid %d) %w", s.PID, ErrStageSilent))
	}
	if st.Applied == "" {
		// A stage that failed before it applied anything.
		st.Applied = noneApplied
	}
	return st
}

// stageAnswer is a reply line as the runner reads it: what was applied
// stays JSON, to be passed on as it is.
type stageAnswer struct {
	Applied       []byte `json:"applied"`
	Code          int    `json:"code"`
	Err           string `json:"err"`
	StageProtocol int    `json:"stage_protocol"` // a refusal: another protocol
}

// ErrStageGone (wrapped in Started.Err): the stage had ended before the
// job was handed to it, so nothing of the job reached it; another stage may
// be started for it.
var ErrStageGone = errors.New("the stage was gone before it got the job")

// ErrStageSilent (wrapped in Started.Err): the stage ended without a
// word, neither what it applied nor a failure. It was killed, or it could
// not read the request: a shellctl-stage of a build from before stages
// answered a request of another protocol.
var ErrStageSilent = errors.New("ended before it answered (killed, or a shellctl-stage from another build that cannot read this runner's request)")

// noneApplied is the JSON of the zero Applied: nothing was applied.
const noneApplied = `{"enabled":false,"scope_signal":false,"scope_abstract_unix":false,"ioctl_dev":false,"capabilities":null}`

// OpenDir opens path as a directory handle (O_PATH), following symlinks
// once: what it names now is what the job gets.
func OpenDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s is not a directory", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// HandlePath is the path the kernel knows for an open handle: where the
// directory really is, whatever names led to it.
func HandlePath(f *os.File) (string, error) {
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	runtime.KeepAlive(f)
	if err != nil {
		return "", fmt.Errorf("resolve the handle of %s: %w", f.Name(), err)
	}
	return p, nil
}

// StageMain is the stage's whole life; it returns only when the job could
// not be started (the exit code says why), or when its runner let it go.
func StageMain() int {
	// Nothing of ours may be read by another process, the job included:
	// execve makes the job dumpable again for itself.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	runtime.LockOSThread() // everything below happens on this thread
	// Started through a descriptor (its name is the descriptor's number):
	// ps shows what it is until it becomes the job.
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&stageComm[0])), 0, 0, 0)
	sock := StageFD
	if _, err := unix.FcntlInt(uintptr(sock), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return ExitSetupFailed
	}
	rehearseUnlessAsked(sock) // off the job's path: see rehearse
	req, fds, err := readStageRequest(sock)
	if err != nil {
		var pe *StageProtocolError
		if errors.As(err, &pe) {
			// A runner of another build: neither its request nor its
			// descriptors are ours to read. Say so, and run nothing.
			_, _ = unix.Write(sock, appendProtocolReply(nil, pe))
			return ExitSetupFailed
		}
		// The runner went away before it had a job for us, or spoke
		// nonsense: there is no job to tell.
		return 0
	}
	reply := func(a *Applied) { _, _ = unix.Write(sock, appendAppliedReply(nil, a)) }
	code, err := becomeJob(req, fds, reply)
	// Here only when the job did not start: say why where its output goes.
	_, _ = unix.Write(sock, appendFailReply(nil, code, err.Error()))
	msg := []byte("shellctl: " + err.Error() + "\n")
	_, _ = unix.Write(1, msg)
	if !req.TTY {
		_, _ = unix.Write(2, msg)
	}
	return code
}

func readStageRequest(sock int) (*stageRequest, []int, error) {
	var hdr [8]byte
	oob := make([]byte, unix.CmsgSpace(5*4))
	n, oobn, _, _, err := unix.Recvmsg(sock, hdr[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	if n != len(hdr) {
		return nil, nil, fmt.Errorf("short stage header (%d bytes)", n)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	size := binary.LittleEndian.Uint64(hdr[:])
	if size > maxStageRequest {
		return nil, nil, fmt.Errorf("stage request of %d bytes", size)
	}
	// Plain reads on the descriptor: an *os.File over it would close it
	// when collected, and the stage still answers on it later.
	body := make([]byte, size)
	for got := 0; got < len(body); {
		n, err := unix.Read(sock, body[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			return nil, nil, io.ErrUnexpectedEOF
		}
		got += n
	}
	req, err := decodeStageRequest(body)
	if err != nil {
		return nil, nil, err
	}
	want := 4
	switch {
	case req.Fail != "":
		want = 3
	case req.HasHome:
		want = 5
	}
	if len(fds) != want {
		return nil, nil, fmt.Errorf("stage got %d descriptors, want %d", len(fds), want)
	}
	return req, fds, nil
}

// becomeJob sets the job up and execs it; it returns only on failure.
func becomeJob(req *stageRequest, fds []int, reply func(*Applied)) (int, error) {
	cfg := &req.Config
	for i := 0; i < 3; i++ {
		if err := unix.Dup3(fds[i], i, 0); err != nil {
			return ExitSetupFailed, fmt.Errorf("set up the job's fd %d: %w", i, err)
		}
		unix.Close(fds[i])
	}
	if req.Fail != "" {
		return req.FailCode, errors.New(req.Fail)
	}
	cwdFD, homeFD := fds[3], -1
	if req.HasHome {
		homeFD = fds[4]
	}
	if req.TTY {
		// A process group of its own, in the runner's session, in the
		// foreground of the terminal that session owns.
		if err := unix.Setpgid(0, 0); err != nil {
			return ExitSetupFailed, fmt.Errorf("make the job's process group: %w", err)
		}
		if err := takeForeground(); err != nil {
			return ExitSetupFailed, err
		}
	} else if _, err := unix.Setsid(); err != nil {
		// A stdio job has no terminal: a session of its own without one.
		return ExitSetupFailed, fmt.Errorf("make the job's session: %w", err)
	}
	if err := unix.Fchdir(cwdFD); err != nil {
		return ExitSetupFailed, fmt.Errorf("change to cwd %s: %w", cfg.Cwd, err)
	}
	ResetIgnoredSignals()
	if cfg.Walls.NewIPC && cfg.ForceFail == "" {
		// The job's own SysV IPC and POSIX message queues, while the
		// stage still holds CAP_SYS_ADMIN (this thread only: it execs).
		if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
			err = fmt.Errorf("give the job its own IPC namespace: unshare(CLONE_NEWIPC): %w", err)
			reply(&Applied{Error: err.Error()})
			return ExitSetupFailed, err
		}
	}
	a, err := confine(cfg, cwdFD, homeFD, restrictThread)
	if err != nil {
		a.Enabled, a.Error = false, err.Error()
		reply(&a)
		return ExitSetupFailed, err
	}
	if err := applyStageWalls(&cfg.Walls, &a); err != nil {
		a.Enabled, a.Error = false, err.Error()
		reply(&a)
		return ExitSetupFailed, err
	}
	prog, err := lookProgram(cfg.Argv[0], cfg.Env)
	if err != nil {
		reply(&a)
		return ExitNotFound, err
	}
	reply(&a)
	// The job starts with no signal blocked.
	var none unix.Sigset_t
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil)
	err = syscall.Exec(prog, cfg.Argv, cfg.Env)
	// ETXTBSY: some process still holds the script open for writing — a
	// child the server forked while it wrote a large (spooled) script,
	// which closes it at its own execve a moment later. Only on this
	// error path, a few short tries before giving up.
	for i := 0; errors.Is(err, syscall.ETXTBSY) && i < textBusyTries; i++ {
		time.Sleep(textBusyPause)
		err = syscall.Exec(prog, cfg.Argv, cfg.Env)
	}
	code := ExitCannotExec
	if errors.Is(err, syscall.ENOENT) {
		code = ExitNotFound
	}
	return code, fmt.Errorf("exec %s: %w", prog, err)
}

// takeForeground puts the stage's process group in the foreground of its terminal, fd 0, so the job reads
// and writes it as a foreground job and ^C reaches it. A background group
// that sets the foreground gets SIGTTOU unless it blocks it: blocked on
// this thread for the call.
func takeForeground() error {
	var set, old unix.Sigset_t
	set.Val[0] = 1 << (uint(unix.SIGTTOU) - 1)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return fmt.Errorf("block SIGTTOU: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	if err := unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp()); err != nil {
		return fmt.Errorf("put the job in its terminal's foreground: %w", err)
	}
	return nil
}

// confine decides the job's domain and makes it with enforce: on the
// calling thread (restrictThread) for a stage, or kept for the child of a
// direct start (directDomain). One place decides for both starts: a
// forced failure or a config with nothing to run fails closed, isolation
// turned off by the server is recorded with its reason. An error means
// the job must not run.
func confine(cfg *JobConfig, cwdFD, homeFD int, enforce func(rulesetFD int) error) (Applied, error) {
	var a Applied
	if cfg.ForceFail != "" {
		return a, fmt.Errorf("apply Landlock filesystem isolation: %s", cfg.ForceFail)
	}
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return a, errors.New("no program to run")
	}
	if !cfg.Policy.Enabled {
		a.Reason = reasonDisabled
		return a, nil
	}
	a, err := buildDomain(cfg, cwdFD, homeFD, enforce)
	if err != nil {
		return a, fmt.Errorf("apply Landlock filesystem isolation: %w", err)
	}
	return a, nil
}

// applyStageWalls cuts the stage's capabilities and installs the job's
// seccomp filter on the calling thread (the one that execs), as the
// direct start's child does, and says so in a.
func applyStageWalls(w *Walls, a *Applied) error {
	p, err := planWalls(w)
	if err != nil {
		return err
	}
	if step, e := applyWalls(p); e != 0 {
		return wallFailure(step, e)
	}
	p.applied(w, a)
	return nil
}
