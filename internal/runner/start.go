package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/sanitize"
)

// stdioBuffer is the copy buffer for stdio output: large enough that a job
// printing hundreds of megabytes costs few system calls, small enough to
// keep a runner's memory flat.
const stdioBuffer = 256 << 10

// stdioPipeSize is the size asked for the stdout pipe: 1 MiB is Linux's
// default cap for unprivileged pipes (/proc/sys/fs/pipe-max-size).
const stdioPipeSize = 1 << 20

// start launches the job's process, confined for it. An error means the
// job did not start and will not: nothing of it runs (its stage is
// killed), and the caller reports a start failure.
func (r *Runner) start() error {
	s := r.spec
	// output.log is made before the job is handed to its stage: a job
	// whose output could not be kept never starts, and the server never
	// hears that it runs. The same one file made per job as when it was
	// made just after the start, but now ahead of the hand-over (about
	// 10 µs on the path, where it overlapped the job's own start).
	w := &outWriter{r: r, max: s.MaxOutputBytes}
	if err := r.openOutput(w); err != nil {
		r.dropTerminal()
		r.dropStage()
		return err
	}
	cfg := isolation.JobConfig{
		Argv:      s.Argv,
		Env:       s.Env,
		Cwd:       s.Cwd,
		Home:      s.Home,
		Script:    filepath.Join(s.Dir, ScriptFile),
		Policy:    s.Policy,
		ForceFail: s.ForceIsolationFail,
		Walls:     s.Walls,
	}
	var err error
	if s.Mode == "pty" {
		err = r.startPTY(cfg, w)
	} else {
		err = r.startStdio(cfg, w)
	}
	if err != nil {
		r.dropStage()
		// Its output says why, as it does when the stage itself fails.
		msg := "shellctl: " + err.Error() + "\n"
		if n, _ := w.f.WriteAt([]byte(msg), r.size.Load()); n > 0 {
			r.grew(int64(n))
		}
		w.f.Close()
	}
	return err
}

// dropStage ends the stage of a job that will not run: one never handed
// its job, or one that refused it. Through the tracker (its cgroup, or
// the runner's descendants), never by a pid its reaper may have freed.
func (r *Runner) dropStage() {
	if r.stage != nil {
		r.stage.Close()
	}
	if r.tracker != nil {
		_ = r.tracker.Kill()
	} else if r.stage != nil {
		r.stage.Kill() // by its pidfd
	}
}

func (r *Runner) startPTY(cfg isolation.JobConfig, w *outWriter) error {
	s := r.spec
	master, slave := r.ptyMaster, r.ptySlave
	r.ptyMaster, r.ptySlave = nil, nil
	if err := setWinsize(master, s.Cols, s.Rows); err != nil {
		master.Close()
		slave.Close()
		return fmt.Errorf("set terminal size %dx%d: %w", s.Cols, s.Rows, err)
	}
	cfg.TTY = slave.Name()
	l, err := r.launch(cfg, [3]*os.File{slave, slave, slave}, true)
	if err != nil {
		master.Close()
		slave.Close()
		return err
	}
	// Under mu: a terminate or resize may arrive while the job starts.
	r.mu.Lock()
	r.master = master
	r.cols, r.rows = s.Cols, s.Rows
	r.mu.Unlock()
	// The job's process has exec'd (a stage's channel, or the direct
	// start's report pipe, closed at execve): the job runs, and
	// the server hears so before anything else the runner does for it.
	r.afterStart(l)
	r.pumpDone = make(chan struct{})
	// The pump reads the master itself (the input-wait flush needs the
	// descriptor); the raw bytes reach the screen through w.ObserveRead.
	if !s.BenchNoScreen {
		w.screen = r.startScreen() // screen.go
	}
	go func() {
		defer close(r.pumpDone)
		// A master the drain closed ends the pump's wait in the poller
		// with an error of its own ("use of closed file"): not a failure.
		if err := sanitize.Pump(master, w, sanitize.DefaultIdle, nil); err != nil && !errors.Is(err, os.ErrClosed) && !r.masterClosed.Load() {
			r.log.Warn("copy terminal output", "err", err)
		}
		r.saveScreen()
		r.saveRaw() // raw.go
	}()
	r.watchInputWait(master, slave) // input-wait: identifies the terminal by slave
	// Only the job may hold the terminal's slave side: once it and its
	// descendants close it, reading the master ends with EIO, which is how
	// the runner knows the output is complete.
	slave.Close()
	go r.writeInput()
	return nil
}

func (r *Runner) startStdio(cfg isolation.JobConfig, w *outWriter) error {
	// The terminal made ahead is not this job's: the job's process leaves the
	// runner's session (so the job has no controlling terminal), and the
	// terminal goes once the job is on its way.
	defer r.dropTerminal()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("make stdout pipe: %w", err)
	}
	// A bigger pipe means fewer wake-ups of the job and of us per megabyte
	// (the default holds 64 KiB). Best effort: the system's cap may be lower.
	if rc, err := outR.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdioPipeSize) })
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("make stderr pipe: %w", err)
	}
	stdin := devNull
	if r.spec.Stdin == StdinPipe {
		// stdin.go: the job reads a pipe whose other end the runner holds.
		if stdin, err = r.openStdinPipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return err
		}
		defer stdin.Close() // the job has its own copy once started
	}
	l, err := r.launch(cfg, [3]*os.File{stdin, outW, errW}, false)
	// Our copies of the write ends must go, or the pipes never reach end
	// of file.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		r.closeStdin(true)
		return err
	}
	// The job runs (its process exec'd): the server hears so first.
	r.afterStart(l)
	r.startStdinWriter()
	r.pumpDone = make(chan struct{})
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		defer errR.Close()
		errLog, err := r.jobDir.Open(StderrFile, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			// Drain it anyway, or the job blocks on a full pipe.
			r.log.Error("open stderr log", "err", err)
			_, _ = io.Copy(io.Discard, errR)
			return
		}
		defer errLog.Close()
		// A write error (disk full) drops the rest rather than stop
		// draining: the job must never block on a full stderr pipe.
		_, _ = io.CopyBuffer(&droppingWriter{&errCounter{r: r, w: errLog}}, errR, make([]byte, 64<<10))
	}()
	go func() {
		defer close(r.pumpDone)
		if err := copyStdout(w, outR); err != nil {
			r.log.Warn("copy stdout", "err", err)
		}
		outR.Close()
		// Done means both streams reached end of file: output of a
		// descendant still holding stderr is never cut off.
		<-errDone
	}()
	return nil
}

// openOutput makes output.log for w, before the job is started: a job
// whose output would have nowhere to go is not started.
func (r *Runner) openOutput(w *outWriter) error {
	// The empty file the server made with the job's directory (off the
	// job's path: a new inode is among the dearer file system operations),
	// or made here, exclusively, beneath the job's directory handle:
	// nothing else already there, a link least of all, is written through.
	f, err := r.jobDir.OpenFresh(OutputFile, 0o600)
	if err != nil {
		// err names the file and the cause.
		return fmt.Errorf("make the job's output log (the job was not started): %w", err)
	}
	w.f = f
	return nil
}

// afterStart records what isolation was applied and reports "running"
// when the process became the job.
func (r *Runner) afterStart(l isolation.Started) {
	r.mu.Lock()
	r.isolation = l.Applied
	// The job's process made its own group (setpgid or setsid) before it
	// exec'd; one that failed before that may have left it in ours.
	if l.Err == nil {
		r.pgid = l.PID
	} else if g, err := unix.Getpgid(l.PID); err == nil && g != unix.Getpgrp() {
		r.pgid = g
	}
	r.limits = r.appliedLimits()
	r.mu.Unlock()
	// A process that failed to become the job (its confinement or its
	// exec) never ran it: the server is not told it runs, only its exit,
	// which says why. A client waiting for the start (run -d) sees the
	// failure, not a start followed by an exit it may read too early.
	if l.Err == nil {
		r.running()
	}
	r.watchRuntime()
}

// openTerminal opens a terminal ahead of need and makes it the controlling
// terminal of the runner's session, before the job's process is forked (a
// stage ahead, or the direct start's child): a process takes its
// session's controlling terminal when it is forked, and the job's process
// must have it to put the job in the terminal's foreground. A stdio
// job drops it (dropTerminal).
func (r *Runner) openTerminal() error {
	master, slave, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open terminal: %w", err)
	}
	// The master is read through the Go poller (creack/pty's ioctls,
	// through Fd, left it blocking): the pump then waits parked, and the
	// runner's one P is free the moment it does. A thread asleep in
	// read(2) keeps the P until the runtime's monitor takes it back, and
	// the size event of the read just done waited for that: 0.2–0.5 ms of
	// an attach round trip. Made so here, ahead of the job; the size is
	// set through the raw descriptor (setWinsize), which keeps it so.
	if rc, err := master.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetNonblock(int(fd), true) })
	}
	if err := r.claimTerminal(slave); err != nil {
		master.Close()
		slave.Close()
		return err
	}
	r.ptyMaster, r.ptySlave = master, slave
	return nil
}

// dropTerminal closes a terminal made ahead that no job uses. The hangup
// this causes reaches the runner's own group only (its SIGHUP is caught).
func (r *Runner) dropTerminal() {
	if r.ptyMaster != nil {
		r.ptyMaster.Close()
		r.ptySlave.Close()
		r.ptyMaster, r.ptySlave = nil, nil
	}
}

// claimTerminal makes slave the controlling terminal of the runner's
// session (the server started the runner as a session leader without one);
// the job's process group then puts itself in the terminal's foreground, so
// it reads and writes the terminal as a foreground job and ^C reaches it.
//
// The session, not the job, leads the terminal because the end of a
// session's leader hangs up its terminal's foreground group: were the job's
// process the leader (setsid and TIOCSCTTY in it), its end would SIGHUP the
// work it leaves in the background (`nohup server &` before nohup ignores
// the signal; a plain `server &` always). The price: the job may hand the
// foreground to the runner's group (tcsetpgrp). So the runner drops every
// signal a terminal sends (Main), and nothing signals the foreground group
// by its number (Runner.signal, proctree.Ladder: proctree.SignalGroup).
func (r *Runner) claimTerminal(slave *os.File) error {
	if err := unix.IoctlSetInt(int(slave.Fd()), unix.TIOCSCTTY, 0); err != nil {
		return fmt.Errorf("make the job's terminal the runner's controlling terminal: %w", err)
	}
	return nil
}

// releaseForeground gives the terminal's foreground back to the runner once
// the job's own process has exited. The runner leads the session that owns
// the terminal, and when a session leader exits the kernel sends SIGHUP to
// the terminal's foreground group: that would be the job's group, where
// whatever the job left running in the background still is — such as a
// `nohup cmd &` that has not yet got as far as ignoring SIGHUP. Work a job
// leaves behind when it ends by itself is left alone.
func (r *Runner) releaseForeground() {
	if r.master == nil {
		return
	}
	rc, err := r.master.SyscallConn()
	if err != nil {
		return
	}
	// The runner's group is in the background now, and a background group
	// that sets the foreground gets SIGTTOU (or EIO, its group being
	// orphaned) unless the signal is blocked: block it on this thread only,
	// for the one call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	set.Val[0] = 1 << (uint(unix.SIGTTOU) - 1)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		r.log.Warn("block SIGTTOU", "err", err)
		return
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	_ = rc.Control(func(fd uintptr) {
		err := unix.IoctlSetPointerInt(int(fd), unix.TIOCSPGRP, unix.Getpgrp())
		// ENOTTY: the job and all it started closed the terminal, which
		// ended the session's hold on it; nothing is left to protect.
		if err != nil && err != unix.ENOTTY {
			r.log.Warn("take back the terminal's foreground", "err", err)
		}
	})
}

// drain waits until all output of the job is on disk.
func (r *Runner) drain() {
	if r.master == nil {
		<-r.pumpDone
		return
	}
	// A terminal still held by a background process never reports end of
	// file: read it until quiet, then close it (which hangs the terminal up
	// for the holders, as a closing terminal window would).
	deadline := time.Now().Add(ptyDrainMax)
	for {
		last := time.Unix(0, r.lastWrite.Load())
		wait := time.Until(last.Add(ptyQuiet))
		if wait < ptyQuiet/4 {
			wait = ptyQuiet / 4
		}
		t := time.NewTimer(wait)
		select {
		case <-r.pumpDone:
			t.Stop()
			return
		case <-t.C:
		}
		hup, in := masterPending(r.master)
		if hup {
			// Every holder closed the terminal: what is left in it is
			// finite and the pump reaches its end (EIO) after reading
			// it, however long a loaded machine takes to run the pump.
			<-r.pumpDone
			return
		}
		quiet := time.Since(time.Unix(0, r.lastWrite.Load())) >= ptyQuiet && !in
		if quiet || time.Now().After(deadline) {
			break
		}
	}
	r.masterClosed.Store(true)
	r.master.Close()
	<-r.pumpDone
}

// masterPending polls the terminal's master without waiting: hup when no
// process holds the terminal any more, in when output waits to be read.
// (Through SyscallConn: Fd would put the master back in blocking mode.)
func masterPending(master *os.File) (hup, in bool) {
	sc, err := master.SyscallConn()
	if err != nil {
		return false, false
	}
	_ = sc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, 0); err == nil && n > 0 {
			hup = pfd[0].Revents&unix.POLLHUP != 0
			in = pfd[0].Revents&unix.POLLIN != 0
		}
	})
	return hup, in
}

// writeInput writes queued input to the terminal in order.
func (r *Runner) writeInput() {
	for {
		select {
		case in := <-r.inputCh:
			r.iw.beforeWrite() // input-wait: readers blocked now have not read it
			if _, err := r.master.Write(in.b); err != nil {
				r.log.Warn("write input", "err", err)
			}
			in.release()
			r.iw.event()
		case <-r.done:
			return
		}
	}
}

// foregroundGroup is the terminal's foreground process group (0 for stdio
// jobs or when it cannot be read).
func (r *Runner) foregroundGroup() int {
	master := r.terminal()
	if master == nil {
		return 0
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return 0
	}
	pgrp := 0
	_ = rc.Control(func(fd uintptr) {
		if n, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
			pgrp = n
		}
	})
	return pgrp
}

func (r *Runner) resize(cols, rows int) string {
	master := r.terminal()
	if master == nil {
		return "input_unsupported"
	}
	// One at a time: the screen and the terminal take the sizes in the
	// same order, and a failed one puts back the size it found.
	r.resizeMu.Lock()
	defer r.resizeMu.Unlock()
	r.mu.Lock()
	oldCols, oldRows := r.cols, r.rows
	r.mu.Unlock()
	// The screen takes the new size before the terminal does: the
	// program redraws on SIGWINCH, and a redraw read before the screen
	// knew the size would be drawn at the old one (less scrolled six
	// lines up in TestScreenResizeRedraws).
	r.resizeScreen(cols, rows)
	if err := setWinsize(master, cols, rows); err != nil {
		// The terminal kept its size: so does the screen.
		r.resizeScreen(oldCols, oldRows)
		return fmt.Sprintf("set the terminal's size to %dx%d: %v (it stays %dx%d)", cols, rows, err, oldCols, oldRows)
	}
	r.mu.Lock()
	r.cols, r.rows = cols, rows
	r.mu.Unlock()
	return ""
}

// spliceChunk is the most one splice moves: the stdout pipe's size.
const spliceChunk = stdioPipeSize

// copyStdout moves a stdio job's stdout from its pipe into output.log.
// splice(2) moves the bytes pipe → file inside the kernel, saving the copy
// out to us and back that read+write costs (a job printing hundreds of
// MB/s is otherwise bound by that copy). Where splice cannot be used, and
// once --max-output-bytes is reached (the rest is read and dropped), it
// falls back to plain copying through w.
func copyStdout(w *outWriter, src *os.File) error {
	rc, err := src.SyscallConn()
	if err != nil {
		return err
	}
	frc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var dst int
	_ = frc.Control(func(fd uintptr) { dst = int(fd) })
	for {
		n := spliceChunk
		if w.max > 0 {
			room := w.max - w.r.size.Load()
			if room <= 0 {
				break
			}
			n = int(min(int64(n), room))
		}
		var moved int
		var serr error
		err := rc.Read(func(fd uintptr) bool {
			off := w.r.size.Load()
			var m int64
			m, serr = unix.Splice(int(fd), nil, dst, &off, n, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MORE)
			moved = int(m)
			return serr != unix.EAGAIN
		})
		if err != nil {
			return err
		}
		if serr != nil {
			if serr == unix.EINVAL || serr == unix.ENOSYS {
				break // not spliceable here: copy instead
			}
			if serr != unix.EINTR {
				// Disk full, I/O error: w records it and drops the rest.
				w.r.failOutput(serr)
				break
			}
			continue
		}
		if moved == 0 {
			return nil // end of file
		}
		w.r.grew(int64(moved))
	}
	_, err = io.CopyBuffer(w, src, make([]byte, stdioBuffer))
	return err
}

// launch hands the job to its stage (started ahead of need by prestart:
// in a process group of its own, born in the job's cgroup when there is
// one, since moving a running process into a cgroup waits for the
// kernel's RCU machinery), which confines itself and becomes the job.
// tty: stdio[0] is the job's terminal, whose foreground its group takes.
// A stage that could not start the job has said why in the job's output
// and exits with the code that says what failed (125 isolation or setup,
// 126 not executable, 127 not found), as a shell would; that exit is the
// job's, reaped like any other. The runner reaps the job (and every
// orphan of the tree) itself; an exit before setMainPID is kept for it.
//
// An error: the stage neither became the job nor failed as the job would
// (it is of another build, or it ended without a word); the job did not
// start, and nothing was reported for it.
func (r *Runner) launch(cfg isolation.JobConfig, stdio [3]*os.File, tty bool) (isolation.Started, error) {
	files := isolation.Files{Stdio: stdio, Cwd: r.cwdHandle, Home: r.homeHandle}
	if testHookBeforeLaunch != nil {
		testHookBeforeLaunch()
	}
	if r.direct {
		return r.launchDirect(cfg, files, tty)
	}
	st := r.stage.Assign(&cfg, files, tty)
	if errors.Is(st.Err, isolation.ErrStageGone) {
		// The stage made ahead died while it waited (a fork storm beside
		// it left its runtime no thread, or it was killed) and read
		// nothing of the job: the job gets a stage started now.
		r.log.Warn("the waiting stage was gone: starting another for the job", "pid", st.PID, "err", st.Err)
		if err := r.startStage(); err != nil {
			return st, fmt.Errorf("start another stage for the job: %w", err)
		}
		st = r.stage.Assign(&cfg, files, tty)
	}
	if err := r.stageFailure(st); err != nil {
		r.log.Error("job did not start", "err", err)
		return st, err
	}
	r.launched(st)
	return st, nil
}

// launched records the job's process, which the runner reaps from here
// on: the job's, or one that failed to become it (its exit says why).
func (r *Runner) launched(st isolation.Started) {
	r.setMainPID(st.PID)
	r.mu.Lock()
	r.pid = st.PID
	r.startedAt = time.Now()
	r.mu.Unlock()
	if st.Err != nil {
		reason := ReasonSetupFailed
		if st.Code != isolation.ExitSetupFailed {
			reason = ReasonExecFailed
		}
		r.log.Warn("job did not start", "err", st.Err)
		r.launchReason = reason + ": " + st.Err.Error()
	}
}

// launchDirect starts the job as a child of the runner that becomes it
// (isolation.Direct: no stage process), born in the job's cgroup when
// there is one. As with a stage, a job that could not start has said why
// in its output and exits with the code that says what failed.
func (r *Runner) launchDirect(cfg isolation.JobConfig, files isolation.Files, tty bool) (isolation.Started, error) {
	st := isolation.Direct(&cfg, files, tty, r.cgroupFD)
	if st.PID == 0 {
		// No process was made (no pid was free: a fork storm beside it).
		r.log.Error("job did not start", "err", st.Err)
		return st, fmt.Errorf("start the job: %w", st.Err)
	}
	if r.cgroupFD < 0 {
		if err := r.tracker.Add(st.PID); err != nil {
			r.log.Warn("track job process", "pid", st.PID, "err", err)
		}
	}
	r.launched(st)
	return st, nil
}

// stageFailure is the start error of a stage that never got as far as
// the job: one of another build, or one that ended without a word (its
// exit, 0 for a stage that could not read its request, is no job's).
// A stage killed by a terminate that came while the job started is the
// job's end, not this.
func (r *Runner) stageFailure(st isolation.Started) error {
	if st.Err == nil {
		return nil
	}
	if r.stageBin == "" {
		// The runner's own binary is the stage (none beside it).
		r.stageBin, _ = os.Executable()
	}
	var pe *isolation.StageProtocolError
	if errors.As(st.Err, &pe) {
		return fmt.Errorf("%s at %s is from another build (stage protocol %d, runner wants %d): install the %s built with this runner",
			StageBinary, r.stageBin, pe.Stage, pe.Runner, StageBinary)
	}
	if errors.Is(st.Err, isolation.ErrStageSilent) {
		r.mu.Lock()
		ending := r.terminating != ""
		r.mu.Unlock()
		if !ending {
			return fmt.Errorf("the job's stage %s (pid %d) ended before it answered: killed, or from another build that cannot read this runner's request (install the %s built with this runner)",
				r.stageBin, st.PID, StageBinary)
		}
	}
	return nil
}

// startStage starts the stage that will become the job (see launch).
func (r *Runner) startStage() error {
	if testHookStartStage != nil {
		if err := testHookStartStage(); err != nil {
			return err
		}
	}
	// No process group of its own yet: a stage for a stdio job leaves
	// the runner's session (setsid), which a group leader cannot do.
	attr := &syscall.SysProcAttr{}
	if r.cgroupFD >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, r.cgroupFD
	}
	exe := "/proc/self/exe" // the runner's binary, with isolation.StageArg
	bin, err := openBeside(StageBinary)
	if err != nil {
		// Still a stage of its own, only a slower one to start.
		r.log.Warn("the job's stage is the runner's own binary (a slower start)", "err", err)
	} else {
		defer bin.Close()
		exe = fdPath(bin)
		r.stageBin = bin.Name()
	}
	st, err := isolation.StartStage(exe, attr)
	if err != nil {
		return err
	}
	if r.cgroupFD < 0 {
		if err := r.tracker.Add(st.PID); err != nil {
			r.log.Warn("track job process", "pid", st.PID, "err", err)
		}
	}
	r.stage = st
	return nil
}

// testHookStartStage, when set (tests), runs first in startStage; its
// error is startStage's.
var testHookStartStage func() error

// testHookBeforeLaunch, when set (tests), runs just before the job's
// process is made: a terminate can then come while the job starts.
var testHookBeforeLaunch func()

// StageBinary is the stage's own binary, beside the runner's: it carries
// only what a stage needs, so its start costs no initialisation of the
// runner's packages. Without it the runner's binary is the stage.
const StageBinary = "shellctl-stage"

// openBeside opens name in the directory of the runner's binary, as a
// handle (O_PATH): what is started is the file opened here, whatever
// the name points to by the time it is started (fdPath).
func openBeside(name string) (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the runner's own binary: %w", err)
	}
	return openExecutable(filepath.Dir(self), name, self)
}

// openExecutable opens dir/name as a handle to an executable file; self
// names the binary it is looked up beside, for the error. What it opens
// runs as the runner, unconfined, so only a file no one but root or the
// runner's own user can have changed is taken: owned by one of them, and
// writable by its owner alone.
func openExecutable(dir, name, self string) (*os.File, error) {
	p := filepath.Join(dir, name)
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w (install it beside %s)", p, err, self)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is not an executable file (mode %o): install %s beside %s", p, st.Mode, name, self)
	}
	if err := trustedFile(p, &st, unix.Geteuid()); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// trustedFile refuses a binary (p, as st tells) that someone other than
// root or uid could have written: owned by another user, or writable by
// its group or by others.
func trustedFile(p string, st *unix.Stat_t, uid int) error {
	if st.Uid != 0 && int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by root or by the runner's uid %d: install it owned by root (chown root %s)", p, st.Uid, uid, p)
	}
	if perm := st.Mode & 0o7777; perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by its group or by others (mode %04o): make it writable by its owner only (chmod go-w %s)", p, perm, p)
	}
	return nil
}

// fdPath names an open file by its descriptor: a child started with it
// as its program runs exactly that file (the descriptor, close-on-exec,
// is still open in the child when execve resolves the name).
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// droppingWriter writes to w until a write fails, then drops everything:
// a reader that must never stop draining (a job's stderr pipe) uses it.
type droppingWriter struct{ w io.Writer }

func (d *droppingWriter) Write(p []byte) (int, error) {
	if d.w != nil {
		if _, err := d.w.Write(p); err != nil {
			d.w = nil
		}
	}
	return len(p), nil
}

// terminal is the job's terminal (nil for stdio jobs, or before it starts).
func (r *Runner) terminal() *os.File {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.master
}

// setWinsize sets the terminal's size through the master's raw descriptor
// (pty.Setsize goes through Fd, which would put the master back in
// blocking mode).
func setWinsize(master *os.File, cols, rows int) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	}); err != nil {
		return err
	}
	return serr
}
