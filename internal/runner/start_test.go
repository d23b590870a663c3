package runner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/statedir"
	"golang.org/x/sys/unix"
)

// fakeStageFile, beside a shellctl-stage that is a copy of this test
// binary, makes it a stage of another build: "refuse" answers as a stage
// of the next protocol does, "silent" ends without a word as a stage from
// before the protocol check does, both once they read the request.
const fakeStageFile = "fake-stage"

// stageForTest is the stage: the real one, or a fake one (fakeStageFile).
func stageForTest() int {
	self, err := os.Executable()
	if err != nil {
		return isolation.ExitSetupFailed
	}
	how, err := os.ReadFile(filepath.Join(filepath.Dir(self), fakeStageFile))
	if err != nil {
		return isolation.StageMain()
	}
	// Read the request whole, as any stage does, whatever its protocol.
	var hdr [8]byte
	oob := make([]byte, unix.CmsgSpace(5*4))
	if _, _, _, _, err := unix.Recvmsg(isolation.StageFD, hdr[:], oob, unix.MSG_CMSG_CLOEXEC); err != nil {
		return 0
	}
	if _, err := io.ReadFull(os.NewFile(isolation.StageFD, "stage"), make([]byte, binary.LittleEndian.Uint64(hdr[:]))); err != nil {
		return 0
	}
	if string(how) == "silent" {
		return 0
	}
	next := isolation.StageProtocol + 1
	pe := &isolation.StageProtocolError{Stage: next, Runner: isolation.StageProtocol}
	line, _ := json.Marshal(map[string]any{"code": isolation.ExitSetupFailed, "err": pe.Error(), "stage_protocol": next})
	_, _ = unix.Write(isolation.StageFD, append(line, '\n'))
	return isolation.ExitSetupFailed
}

// throughStage, in a test runner's environment, makes it start its job
// through a stage process (the tests of the stage's own failures).
const throughStage = JobStartEnv + "=" + JobStartStage

// realRunner is a runner started as the server starts one (its own
// session, its channel as fd 3), from a copy of this test binary in its
// own directory (so what lies beside it is the test's to choose).
type realRunner struct {
	t     *testing.T
	dir   string // the runner's binary's directory
	state string // its state dir
	job   string // the job's directory
	cmd   *exec.Cmd
	ctl   *proto.Conn
	wire  *wireTap // what went over ctl, both ways
	log   bytes.Buffer
}

func startRealRunner(t *testing.T, beside func(dir string), env ...string) *realRunner {
	t.Helper()
	base := t.TempDir()
	rr := &realRunner{t: t, dir: filepath.Join(base, "bin"), state: filepath.Join(base, "state")}
	rr.job = JobDir(rr.state, "job1")
	for _, d := range []string{rr.dir, rr.job, filepath.Join(base, "home"), filepath.Join(base, "work")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	binaryThatSucceeds(t, filepath.Join(rr.dir, "shellctl-runner"))
	if beside != nil {
		beside(rr.dir)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "ctl-runner")
	defer theirs.Close()
	ours := os.NewFile(uintptr(fds[0]), "ctl-server")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	rr.wire = &wireTap{UnixConn: c.(*net.UnixConn)}
	rr.ctl = proto.NewConn(rr.wire)
	rr.cmd = exec.Command(filepath.Join(rr.dir, "shellctl-runner"), runnerArg, "--state-dir", rr.state, "--ctl-fd", "3", "--no-cgroup")
	rr.cmd.ExtraFiles = []*os.File{theirs}
	rr.cmd.Stdout, rr.cmd.Stderr = &rr.log, &rr.log
	rr.cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	rr.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := rr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rr.ctl.Close()
		_ = rr.cmd.Process.Kill()
		_ = rr.cmd.Wait()
		if t.Failed() {
			t.Logf("runner's log:\n%s", rr.log.String())
		}
	})
	return rr
}

// assign hands the runner its job (mode, running script), as the server
// does, but for frames: a server that reads them says so (assignFrames).
func (rr *realRunner) assign(mode, script string, change ...func(*Spec)) {
	rr.assignAs(false, mode, script, change...)
}

// assignFrames is assign from a server that reads frames, as shellctl's.
func (rr *realRunner) assignFrames(mode, script string, change ...func(*Spec)) {
	rr.assignAs(true, mode, script, change...)
}

func (rr *realRunner) assignAs(frames bool, mode, script string, change ...func(*Spec)) {
	rr.t.Helper()
	base := filepath.Dir(rr.dir)
	spec := &Spec{ID: "job1", StateDir: rr.state, Dir: rr.job, Mode: mode, ControlKey: "key",
		Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
		Cwd: filepath.Join(base, "work"), Home: filepath.Join(base, "home"), Cols: 80, Rows: 24}
	for _, f := range change {
		f(spec)
	}
	jobDir, err := statedir.OpenDir(rr.job)
	if err != nil {
		rr.t.Fatal(err)
	}
	defer jobDir.Close()
	cwd, err := isolation.OpenDir(spec.Cwd)
	if err != nil {
		rr.t.Fatal(err)
	}
	defer cwd.Close()
	home, err := isolation.OpenDir(spec.Home)
	if err != nil {
		rr.t.Fatal(err)
	}
	defer home.Close()
	raw, _ := json.Marshal(spec)
	if err := rr.ctl.SendWithFDs(&proto.Msg{T: proto.TAssign, Spec: raw, Frames: frames}, []int{jobDir.Fd(), int(cwd.Fd()), int(home.Fd())}); err != nil {
		rr.t.Fatal(err)
	}
}

// end reads what the runner says until its job's end, which it confirms
// (as the server does once it recorded it), and waits for the runner to
// leave: every message, the exit last.
func (rr *realRunner) end() []*proto.Msg {
	rr.t.Helper()
	var got []*proto.Msg
	rr.ctl.SetDeadline(time.Now().Add(30 * time.Second))
	for {
		m, err := rr.ctl.Recv()
		if err != nil {
			rr.t.Fatalf("read the runner's messages: %v (got %d)", err, len(got))
		}
		got = append(got, m)
		if m.T == proto.TExit {
			break
		}
	}
	if err := rr.ctl.Send(&proto.Msg{T: proto.TExitAck}); err != nil {
		rr.t.Fatal(err)
	}
	_ = rr.cmd.Wait()
	return got
}

// startFailed checks msgs are those of a job that never started: no
// "running", an exit "failed" whose reason is a start failure with all of
// want, and nothing of the job ran (marker, which its script makes, is
// not there once its runner left: the runner leaves after its tree).
func startFailed(t *testing.T, msgs []*proto.Msg, marker string, want ...string) *proto.Msg {
	t.Helper()
	for _, m := range msgs {
		if m.T == proto.TRunning || (m.T == proto.TState && m.Status == "running") {
			t.Errorf("the server was told the job runs (%s, pid %d) before it failed to start", m.T, m.PID)
		}
	}
	exit := msgs[len(msgs)-1]
	if exit.Status != "failed" || !strings.HasPrefix(exit.Reason, ReasonStartFailed+": ") || exit.ExitCode != nil {
		code := "none"
		if exit.ExitCode != nil {
			code = fmt.Sprint(*exit.ExitCode)
		}
		t.Errorf("exit: status %q, reason %q, exit code %s: want a start failure", exit.Status, exit.Reason, code)
	}
	for _, w := range want {
		if !strings.Contains(exit.Reason, w) {
			t.Errorf("reason %q does not say %q", exit.Reason, w)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the job ran")
	}
	return exit
}

// A job whose output.log cannot be made is never started, and the
// server never hears that it runs: it ends as a start failure that names
// the file and the cause. (output.log was made after the job started and
// "running" was sent.)
func TestOutputLogFailureNeverStartsTheJob(t *testing.T) {
	for _, mode := range []string{"pty", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			rr := startRealRunner(t, nil)
			out := filepath.Join(rr.job, OutputFile)
			// Already there with bytes: not the empty file made ahead, so
			// the runner refuses it.
			if err := os.WriteFile(out, []byte("planted"), 0o600); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(rr.job, "ran")
			rr.assign(mode, "echo hi; : > "+marker)
			startFailed(t, rr.end(), marker, out, "not the empty file made for it", "not started")
			if b, _ := os.ReadFile(out); string(b) != "planted" {
				t.Errorf("output.log that was there became %q", b)
			}
		})
	}
}

// A shellctl-stage of another build is refused as a start failure that
// names it, both protocols and what to do; so is one that ends without a
// word (a stage from before the protocol check, given a request it cannot
// read, exits 0: that is no job's exit). The job never runs, and its
// output says why.
func TestStageOfAnotherBuildIsAStartFailure(t *testing.T) {
	for _, c := range []struct {
		how  string
		want []string
	}{
		{"refuse", []string{"is from another build", fmt.Sprintf("(stage protocol %d, runner wants %d)", isolation.StageProtocol+1, isolation.StageProtocol),
			"install the shellctl-stage built with this runner"}},
		{"silent", []string{"ended before it answered", "install the shellctl-stage built with this runner"}},
	} {
		for _, mode := range []string{"pty", "stdio"} {
			t.Run(c.how+"/"+mode, func(t *testing.T) {
				var stage string
				rr := startRealRunner(t, func(dir string) {
					stage = filepath.Join(dir, StageBinary)
					binaryThatSucceeds(t, stage)
					if err := os.WriteFile(filepath.Join(dir, fakeStageFile), []byte(c.how), 0o600); err != nil {
						t.Fatal(err)
					}
				}, throughStage)
				marker := filepath.Join(rr.job, "ran")
				rr.assign(mode, "echo hi; : > "+marker)
				exit := startFailed(t, rr.end(), marker, append(c.want, stage)...)
				b, err := os.ReadFile(filepath.Join(rr.job, OutputFile))
				if err != nil || string(b) != "shellctl: "+strings.TrimPrefix(exit.Reason, ReasonStartFailed+": ")+"\n" {
					t.Errorf("output.log %q (%v): want the reason", b, err)
				}
			})
		}
	}
}

// A job whose confinement could not be set up never ran: the server is
// never told it runs (a client waiting for the start, such as run -d,
// would take it for a job that started and see no failure), and its exit
// says why. Both starts, both modes.
func TestSetupFailureIsNeverReportedRunning(t *testing.T) {
	for _, start := range []string{"direct", JobStartStage} {
		for _, mode := range []string{"pty", "stdio"} {
			t.Run(mode+"/"+start, func(t *testing.T) {
				rr := startRealRunner(t, nil, JobStartEnv+"="+start)
				marker := filepath.Join(rr.job, "ran")
				rr.assign(mode, "echo hi; : > "+marker, func(s *Spec) { s.ForceIsolationFail = "forced by the test" })
				msgs := rr.end()
				for _, m := range msgs {
					if m.T == proto.TRunning || (m.T == proto.TState && m.Status == "running") {
						t.Errorf("the server was told the job runs (%s, pid %d), though its confinement failed", m.T, m.PID)
					}
				}
				exit := msgs[len(msgs)-1]
				if exit.ExitCode == nil || *exit.ExitCode != isolation.ExitSetupFailed || !strings.HasPrefix(exit.Reason, ReasonSetupFailed+": ") ||
					!strings.Contains(exit.Reason, "forced by the test") {
					t.Errorf("exit %+v: want code %d and reason %s with the cause", exit, isolation.ExitSetupFailed, ReasonSetupFailed)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Error("the job ran")
				}
			})
		}
	}
}

// The runner's own stage (no fake beside it) starts the job: the tests
// above fail for what they set up, not for how the runner is started.
func TestRealRunnerRunsAJob(t *testing.T) {
	for _, c := range []struct{ mode, start string }{{"pty", "direct"}, {"stdio", "direct"}, {"pty", JobStartStage}, {"stdio", JobStartStage}} {
		mode := c.mode
		t.Run(mode+"/"+c.start, func(t *testing.T) {
			rr := startRealRunner(t, nil, JobStartEnv+"="+c.start)
			rr.assign(mode, "echo hi")
			msgs := rr.end()
			running := false
			for _, m := range msgs {
				running = running || m.T == proto.TRunning
			}
			exit := msgs[len(msgs)-1]
			if !running || exit.Status != "exited" || exit.ExitCode == nil || *exit.ExitCode != 0 {
				t.Fatalf("running %v, exit %+v", running, exit)
			}
			if b, _ := os.ReadFile(filepath.Join(rr.job, OutputFile)); strings.TrimSpace(string(b)) != "hi" {
				t.Fatalf("output %q", b)
			}
		})
	}
}

// The runner writes through the empty output.log and screen.json the
// server made with the job's directory (the same files: no new inode on
// the job's path), and makes them only when they are missing
// (TestRealRunnerRunsAJob).
func TestRunnerWritesThroughTheFilesMadeAhead(t *testing.T) {
	rr := startRealRunner(t, nil)
	ino := map[string]uint64{}
	for _, name := range []string{OutputFile, ScreenFile} {
		p := filepath.Join(rr.job, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		ino[name] = st.Ino
	}
	rr.assign("pty", "echo made-ahead")
	if exit := rr.end(); exit[len(exit)-1].ExitCode == nil || *exit[len(exit)-1].ExitCode != 0 {
		t.Fatalf("exit %+v", exit[len(exit)-1])
	}
	for name, want := range ino {
		p := filepath.Join(rr.job, name)
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Ino != want {
			t.Errorf("%s: inode %d (%v), want the one made ahead, %d", name, st.Ino, err, want)
		}
		if b, _ := os.ReadFile(p); !strings.Contains(string(b), "made-ahead") {
			t.Errorf("%s holds %q", name, b)
		}
	}
}

// A stage that died while it waited (killed; a fork storm that left its
// runtime no thread) is replaced when the job comes: the job runs, in a
// stage started for it, instead of failing to be handed over.
func TestDeadWaitingStageIsReplaced(t *testing.T) {
	rr := startRealRunner(t, nil, throughStage)
	runner := rr.cmd.Process.Pid
	// The stage is the runner's child; its start is not announced, so it
	// is looked for.
	var stage int
	deadline := time.Now().Add(10 * time.Second)
	for stage == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no stage among the children of runner %d", runner)
		}
		// children lists a thread's own: any of the runner's threads may
		// have started it.
		var b []byte
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", runner))
		for _, task := range tasks {
			c, _ := os.ReadFile(task)
			b = append(append(b, c...), ' ')
		}
		for _, f := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile("/proc/" + f + "/cmdline")
			if strings.Contains(string(cmdline), isolation.StageArg) {
				stage, _ = strconv.Atoi(f)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Killed through a pidfd, which then says when it has exited (its
	// end of the socket is closed by then).
	pfd, err := unix.PidfdOpen(stage, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	if err := unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 10_000)
	for err == unix.EINTR { // a signal of this test process's own runtime
		n, err = unix.Poll(fds, 10_000)
	}
	if err != nil || n != 1 {
		t.Fatalf("stage %d did not exit after SIGKILL: %d %v", stage, n, err)
	}
	rr.runsHi("the waiting stage was gone")
}

// runsHi hands the runner `echo hi` (stdio) and checks it ran to exit 0
// with its output, the runner's log saying logged.
func (rr *realRunner) runsHi(logged string) {
	rr.t.Helper()
	rr.assign("stdio", "echo hi")
	msgs := rr.end()
	exit := msgs[len(msgs)-1]
	if exit.Status != "exited" || exit.ExitCode == nil || *exit.ExitCode != 0 {
		rr.t.Fatalf("exit %+v (reason %q), want exited 0", exit, exit.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(rr.job, OutputFile)); strings.TrimSpace(string(b)) != "hi" {
		rr.t.Fatalf("output %q", b)
	}
	if !strings.Contains(rr.log.String(), logged) {
		rr.t.Errorf("the runner's log does not say %q:\n%s", logged, rr.log.String())
	}
}

// A runner that could not start its stage ahead (no pid free: a fork storm
// beside it) starts one when the job comes, and the job runs.
func TestStageNotStartedAheadIsStartedForTheJob(t *testing.T) {
	rr := startRealRunner(t, nil, failFirstStageEnv+"=1", throughStage)
	rr.runsHi("the job's stage was started when the job came")
}

// A terminate that comes while the job starts, before its process exists,
// ends the job once it does: a ladder over a tree with no process yet
// ended nothing, the job then started, and the terminate was never
// answered (the job ran on, and a second terminate hung as well). Both
// starts, both modes.
func TestTerminateWhileTheJobStarts(t *testing.T) {
	for _, start := range []string{"direct", JobStartStage} {
		for _, mode := range []string{"pty", "stdio"} {
			t.Run(mode+"/"+start, func(t *testing.T) {
				rr := startRealRunner(t, nil, JobStartEnv+"="+start, slowLaunchEnv+"=1")
				rr.assign(mode, "exec sleep 300")
				if err := rr.ctl.Send(&proto.Msg{T: proto.TTerminate, ID: 7, Grace: 5}); err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				msgs := rr.end() // fails after 30 s without the exit
				exit := msgs[len(msgs)-1]
				if exit.Status != "terminated" || exit.Reason != ReasonTerminate {
					t.Errorf("exit %+v: want terminated by the terminate request", exit)
				}
				t.Logf("ended %v after the terminate", time.Since(t0).Round(time.Millisecond))
			})
		}
	}
}

// A signal that comes while the job starts reaches the job once its
// process exists, instead of being refused ("the job has not started
// yet"): a run answered after a short timeout can be signalled before its
// process is made, which a loaded machine makes likely (TestSignalErrors
// failed so).
func TestSignalWhileTheJobStarts(t *testing.T) {
	for _, start := range []string{"direct", JobStartStage} {
		t.Run(start, func(t *testing.T) {
			rr := startRealRunner(t, nil, JobStartEnv+"="+start, slowLaunchEnv+"=1")
			rr.assign("stdio", "exec sleep 300")
			if err := rr.ctl.Send(&proto.Msg{T: proto.TSignal, ID: 9, Signal: 9, Target: TargetGroup}); err != nil {
				t.Fatal(err)
			}
			// The signal's answer and the exit it causes come in either
			// order (the answer goes once the signal is sent, the exit
			// once the job is reaped): both are read before the exit is
			// confirmed. Fails after 30 s if the signal never reached
			// the job.
			var ack, exit *proto.Msg
			rr.ctl.SetDeadline(time.Now().Add(30 * time.Second))
			for ack == nil || exit == nil {
				m, err := rr.ctl.Recv()
				if err != nil {
					t.Fatalf("read the runner's messages: %v (answer %+v, exit %+v)", err, ack, exit)
				}
				switch {
				case m.T == proto.TAck && m.ID == 9:
					ack = m
				case m.T == proto.TExit:
					exit = m
				}
			}
			if err := rr.ctl.Send(&proto.Msg{T: proto.TExitAck}); err != nil {
				t.Fatal(err)
			}
			_ = rr.cmd.Wait()
			if ack.Err != "" {
				t.Errorf("signal's answer %+v: want it done", ack)
			}
			if exit.Signal != 9 || exit.Reason != ReasonSignal {
				t.Errorf("exit %+v: want ended by SIGKILL", exit)
			}
		})
	}
}
