package runner

// The end: the exit taken after the drain (and after the ladder, when the
// job was being ended), published to the server and recorded — by the
// runner itself, retried, when no server confirms it.

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shellctl/shellctl/internal/jobstate"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"golang.org/x/sys/unix"
)

// finishFailed publishes a job that could not be started.
func (r *Runner) finishFailed(err error) {
	r.log.Error("start failed", "err", err)
	m := &proto.Msg{T: proto.TExit, Status: jobstate.StatusFailed, Reason: ReasonStartFailed + ": " + err.Error(), EndedAt: time.Now().UnixNano(), Done: true,
		Size: r.size.Load()}
	r.publishExit(m)
}

// exitOf turns a wait status into the exit code of the API: the status, or
// 128 + signal for a signal death.
func exitOf(ws unix.WaitStatus) (code, sig int) {
	switch {
	case ws.Exited():
		return ws.ExitStatus(), 0
	case ws.Signaled():
		return 128 + int(ws.Signal()), int(ws.Signal())
	}
	return 128, 0
}

func (r *Runner) running() {
	r.mu.Lock()
	m := &proto.Msg{T: proto.TRunning, Frames: true, Status: jobstate.StatusRunning, PID: r.pid, StartedAt: r.startedAt.UnixNano(), Isolation: r.isolation, Cgroup: r.cgroupPath,
		Pgid: r.pgid, Limits: r.limits}
	r.mu.Unlock()
	r.broadcast(m)
}

// waitAndFinish waits for the process to end and its output to drain, then
// publishes the exit. The order matters: the exit is recorded only after the
// last byte is on disk, so a client that sees "done" reads all output.
func (r *Runner) waitAndFinish() {
	ws := <-r.mainState
	// No input reaches a job whose process ended; what it left running
	// reads end of file on the stdin pipe (stdin.go), as from a closed
	// terminal, instead of holding it open with no writer to come.
	r.endStdin()
	code, sig := exitOf(ws)
	r.releaseForeground()
	r.drain()
	// A job being ended (terminate, forced delete, a limit) is over only
	// when the ladder has emptied its tree: its end is not published, and
	// the runner does not leave, while any process of it lives.
	r.mu.Lock()
	ladder := r.ladder
	r.mu.Unlock()
	if ladder != nil {
		<-ladder
	}
	m := &proto.Msg{T: proto.TExit, Status: jobstate.StatusExited, ExitCode: &code, Signal: sig, EndedAt: time.Now().UnixNano(), Done: true}
	m.Reason = ReasonExited
	if sig != 0 {
		m.Reason = ReasonSignal
	}
	r.mu.Lock()
	if r.launchReason != "" {
		m.Reason = r.launchReason
	}
	if r.terminating != "" {
		m.Status = jobstate.StatusTerminated
		m.Reason = r.terminating
	}
	// The facts of the start travel with the exit, so its record is whole
	// even when the running event was never recorded.
	m.PID, m.StartedAt, m.Isolation = r.pid, unixNano(r.startedAt), r.isolation
	m.Pgid, m.Limits = r.pgid, r.limits
	r.mu.Unlock()
	// The tree is reaped (the ladder emptied it, or its processes ended
	// by themselves; what a job leaves running is not counted).
	m.Usage = treeUsage()
	if r.tracker.OOMKilled() {
		m.Reason = ReasonOOM
	}
	m.Size = r.size.Load()
	if err := r.outputFailed(); err != nil && r.terminating == "" {
		m.Reason = fmt.Sprintf("%s: %v (%d bytes of output on disk, the rest dropped)", ReasonOutputFailed, err, m.Size)
	}
	r.publishExit(m)
}

// publishExit tells the connected server(s) and waits for one to confirm
// it recorded the exit; with no server there (stopped, crashed, upgrading),
// the runner records it itself. Both use compare-and-set, so whichever comes
// second changes nothing.
func (r *Runner) publishExit(m *proto.Msg) {
	r.mu.Lock()
	r.exit = m
	n := len(r.conns)
	r.mu.Unlock()
	close(r.done)
	if n > 0 {
		r.broadcast(m)
		select {
		case <-r.exitAck:
			return
		case <-time.After(exitAckTimeout):
		}
	}
	// Held and retried until the database takes it (a full disk, a
	// locked database): an exit is never lost, and a server that comes
	// back meanwhile may take it first (then the compare-and-set here
	// changes nothing and succeeds).
	wait := exitRetryMin
	for {
		err := r.recordExit(m)
		if err == nil {
			return
		}
		if r.jobDir != nil && r.jobDir.Removed() {
			// The job's directory (its row's files, the database's
			// state dir) was deleted: no server can ever read this exit,
			// and a runner waiting for one would be left running.
			r.log.Error("record exit: the job's directory was removed; giving up", "err", err)
			return
		}
		r.log.Error("record exit: will retry", "err", err, "in", wait)
		select {
		case <-r.exitAck:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, exitRetryMax)
	}
}

// exitRetryMin and exitRetryMax bound the back-off between attempts to
// record an exit no server heard.
const (
	exitRetryMin = 200 * time.Millisecond
	exitRetryMax = 5 * time.Second
)

// recordExit records m through shellctl-runner-exit, beside this binary
// (opened as a handle, with the checks of openExecutable). It is only on
// the path when no server heard the exit, so the runner itself carries no
// database code and starts fast.
func (r *Runner) recordExit(m *proto.Msg) error {
	args := []string{"--state-dir", r.spec.StateDir, "--job-id", r.spec.ID, "--status", m.Status,
		"--ended-at", time.Unix(0, m.EndedAt).UTC().Format(time.RFC3339Nano), "--reason", m.Reason}
	if m.ExitCode != nil {
		args = append(args, "--exit-code", strconv.Itoa(*m.ExitCode), "--signal", strconv.Itoa(m.Signal))
	}
	if m.Pgid != 0 {
		args = append(args, "--pgid", strconv.Itoa(m.Pgid))
	}
	if m.Usage != "" {
		args = append(args, "--usage", m.Usage)
	}
	if m.Limits != "" {
		args = append(args, "--limits-applied", m.Limits)
	}
	exe, err := openBeside(RunnerExitBinary)
	if err != nil {
		return err
	}
	defer exe.Close()
	return r.runHelper(exe, RunnerExitBinary, args)
}

// RunnerExitBinary records an exit in the database (cmd/shellctl-runner-exit).
const RunnerExitBinary = "shellctl-runner-exit"

// helperOutput bounds what is kept of a helper's output, for its error.
const helperOutput = 64 << 10

// runHelper runs exe (named name) with args and waits for it: nil when
// it exits 0, else an error with its status and output. The runner's
// reaper collects every child (wait4 of any pid), so exec.Cmd.Wait could
// lose the helper's status to it and call a recorded exit failed; the
// helper is started under rmu and registered before the reaper can look
// at it, and the reaper hands its status over.
func (r *Runner) runHelper(exe *os.File, name string, args []string) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	defer pr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		return fmt.Errorf("run %s: %w", name, err)
	}
	defer null.Close()
	ch := make(chan unix.WaitStatus, 1)
	r.rmu.Lock()
	proc, err := os.StartProcess(fdPath(exe), append([]string{name}, args...), &os.ProcAttr{
		Env: os.Environ(), Files: []*os.File{null, pw, pw},
	})
	if err == nil {
		if r.helpers == nil {
			r.helpers = map[int]chan unix.WaitStatus{}
		}
		r.helpers[proc.Pid] = ch
	}
	r.rmu.Unlock()
	pw.Close()
	if err != nil {
		return fmt.Errorf("run %s: %w", exe.Name(), err)
	}
	defer proc.Release()
	out, _ := io.ReadAll(io.LimitReader(pr, helperOutput))
	_, _ = io.Copy(io.Discard, pr) // to its end: the helper never blocks on its output
	ws := <-ch
	if ws.Exited() && ws.ExitStatus() == 0 {
		return nil
	}
	how := fmt.Sprintf("exit status %d", ws.ExitStatus())
	if ws.Signaled() {
		how = "killed by " + ws.Signal().String()
	}
	return fmt.Errorf("%s: %s: %s", exe.Name(), how, strings.TrimSpace(string(out)))
}
