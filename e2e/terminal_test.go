package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
)

// Attacks on the job's terminal and on its process group numbers (issue 35,
// attacks 3 and 7): a job may choose its terminal's foreground, and a group
// number its processes left is anyone's to take; neither may make a signal
// reach a process that is not the job's.

// handOverScript hands the terminal's foreground to the group of its
// session's leader (tcsetpgrp(0, getsid(0)): the runner's group, where the
// runner leads the terminal's session), says so in the file "handed", and
// with "tiocsti" then types ^C at its own terminal and says so in
// "stuffed" (files, not output: the ^C flushes the terminal's output not
// yet read). The job then sleeps without reading its terminal (a
// background group that reads would only stop itself). It starts once the
// test made the file "go", having found the job's runner.
const handOverScript = `while [ ! -e go ]; do sleep 0.02; done
python3 -c '
import fcntl, os, sys, termios
os.tcsetpgrp(0, os.getsid(0))
open("handed.tmp", "w").write(str(os.tcgetpgrp(0) == os.getsid(0)))
os.rename("handed.tmp", "handed")
if sys.argv[1] == "tiocsti":
    fcntl.ioctl(0, termios.TIOCSTI, b"\x03")
    open("stuffed", "w").close()
' %s
sleep 300`

// TestWallPtyJobCannotHandItsTerminalToItsRunner: a pty job that hands its
// terminal's foreground to its runner's group and then has ^C typed on it
// (by itself through TIOCSTI, by the agent's keys C-c), or is terminated
// (the ladder's SIGINT goes to the terminal's foreground group), must not
// take its runner down: the runner lives, the job is never lost, terminate
// answers 200 with the job terminated. Both starts.
func TestWallPtyJobCannotHandItsTerminalToItsRunner(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH: the hostile job is a python3 program")
	}
	for _, start := range []string{"direct", "stage"} {
		t.Run(start, func(t *testing.T) {
			var args []string
			if start == "stage" {
				args = []string{"--job-start", "stage"}
			}
			s := startServer(t, serverOpts{args: args})
			for _, vector := range []string{"tiocsti", "keys", "signal", "terminate"} {
				t.Run(vector, func(t *testing.T) { handOver(t, s, vector) })
			}
		})
	}
}

func handOver(t *testing.T, s *server, vector string) {
	c := fxCtx(t, 2*time.Minute)
	dir := fxJobDir(t)
	run, err := s.c.Run(c, client.RunRequest{Script: fmt.Sprintf(handOverScript, vector), Mode: "pty", Cwd: dir, Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	// The runner, before the job can have done anything to it (once the
	// job's process is known: the run may answer while it starts).
	fxEventually(t, 20*time.Second, "the job's pid in its record", func() bool { return s.getRecord(t, run.JobID).PID != nil })
	runner := s.runnerPID(t, run.JobID)
	pidfd, err := unix.PidfdOpen(runner, 0)
	if err != nil {
		t.Fatalf("pidfd of runner %d: %v", runner, err)
	}
	defer unix.Close(pidfd)
	// runnerDied waits up to d for the runner's end (its pidfd turns
	// readable when it exits).
	runnerDied := func(d time.Duration) bool {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, int(d/time.Millisecond))
		return n > 0
	}
	fileSays := func(name string) string {
		var got []byte
		fxEventually(t, 20*time.Second, "the job's file "+name, func() bool {
			b, err := os.ReadFile(filepath.Join(dir, name))
			got = b
			return err == nil
		})
		return string(got)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fileSays("handed"); got != "True" {
		t.Fatalf("the job could not hand its terminal's foreground to its session's leader: %q", got)
	}
	switch vector {
	case "tiocsti":
		fileSays("stuffed") // the ^C was typed before this was made
	case "keys":
		if _, err := s.c.Keys(c, run.JobID, client.KeysRequest{Keys: []string{"C-c"}}); err != nil {
			t.Errorf("keys C-c: %v", err)
		}
	case "signal":
		// The foreground is no group of the job's now: refused, nothing
		// sent (the runner's group least of all).
		st, raw, err := s.signal(t, run.JobID, map[string]any{"signal": "INT"})
		if err != nil || st != 409 {
			t.Errorf("signal INT to the foreground the job handed away = %d %s %v, want 409", st, raw, err)
		}
	case "terminate":
		v, err := s.c.Terminate(c, run.JobID, 1)
		if err != nil || v.Status != "terminated" || !v.Done {
			t.Fatalf("terminate of the job that handed its terminal away = %+v %v, want 200 terminated", v, err)
		}
	}
	if vector == "terminate" {
		// Its runner ended with it, having recorded it terminated.
		if st, err := s.c.Status(c, run.JobID); err != nil || st.Status != "terminated" {
			t.Fatalf("terminate: job = %+v %v, want terminated", st, err)
		}
		return
	}
	if runnerDied(300 * time.Millisecond) {
		t.Fatalf("%s: the runner (pid %d) died after the job handed it its terminal's foreground", vector, runner)
	}
	if st, err := s.c.Status(c, run.JobID); err != nil || st.Status != "running" {
		t.Fatalf("%s: job = %+v %v, want still running", vector, st, err)
	}
	v, err := s.c.Terminate(c, run.JobID, 1)
	if err != nil || v.Status != "terminated" || !v.Done {
		t.Fatalf("%s: terminate = %+v %v, want 200 terminated", vector, v, err)
	}
}

// groupThief takes a process group number for a test: it starts a process
// outside every job whose pid is pgrp (ns_last_pid set to the number before
// it, retried while other processes of the machine take pids in between) and
// which then leads a session and a group of that number, as an unrelated
// program that got the number by pid reuse would. Needs root (ns_last_pid);
// it skips the test where the number cannot be had.
type groupThief struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
	start string // the victim's start time (field 22 of its stat)
}

const thiefScript = `
import os, sys, time
target = int(sys.argv[1])
for _ in range(5000):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(target - 1))
    pid = os.fork()
    if pid == 0:
        if os.getpid() != target:
            os._exit(0)
        os.setsid()
        time.sleep(600)
        os._exit(0)
    if pid == target:
        print("took", pid, flush=True)
        sys.stdin.read()
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sys.exit(0)
    os.waitpid(pid, 0)
print("missed", flush=True)
`

func stealGroup(t *testing.T, pgrp int) *groupThief {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("taking a given pid needs root (ns_last_pid)")
	}
	cmd := exec.Command("python3", "-c", thiefScript, strconv.Itoa(pgrp))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &groupThief{cmd: cmd, stdin: in}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	line, _ := bufio.NewReader(outp).ReadString('\n')
	if !strings.HasPrefix(line, "took ") {
		t.Skipf("could not take pid %d for the test's unrelated group (%q): the machine forks too much", pgrp, line)
	}
	g.pid, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "took ")))
	// Its own session and group, of the number: wait for its setsid.
	fxEventually(t, 5*time.Second, "the unrelated process to lead group "+strconv.Itoa(pgrp), func() bool {
		f := statFields(g.pid)
		return len(f) > 20 && f[3] == strconv.Itoa(pgrp) && f[4] == strconv.Itoa(pgrp)
	})
	g.start = statFields(g.pid)[20]
	return g
}

// alive reports whether the unrelated process still runs (the same one: its
// start time; a killed one waits unreaped, a zombie, for its parent).
func (g *groupThief) alive() bool { return (&proc{g.pid, g.start}).alive() }

// proc is one process: its pid and start time. Taking a pid rewinds the
// machine's pid counter, so a pid of the test is soon another process's.
type proc struct {
	pid   int
	start string
}

func procOf(pid int) *proc {
	p := &proc{pid: pid}
	if f := statFields(pid); len(f) > 20 {
		p.start = f[20]
	}
	return p
}

func (p *proc) alive() bool {
	f := statFields(p.pid)
	return p.start != "" && len(f) > 20 && f[20] == p.start && f[1] != "Z" && f[1] != "X"
}

// statFields are the fields of /proc/pid/stat, [0] the pid, [1] the state
// (comm left out), as proc(5) numbers them minus one from [1] on.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return append([]string{strconv.Itoa(pid)}, strings.Fields(s[i+1:])...)
}

// orphanedStdioJob starts a stdio job whose main process exits at once while
// a setsid child keeps its stdout open: the job runs on, its recorded process
// group (the main process's) empty of its processes. It returns the job,
// the group number and the child, once the main process is gone.
func orphanedStdioJob(t *testing.T, s *server) (*client.JobResult, int, *proc) {
	t.Helper()
	dir := fxJobDir(t)
	res, err := s.c.Run(fxCtx(t, time.Minute), client.RunRequest{
		Script: `setsid sh -c 'echo $$ > child; exec sleep 300' & echo $$ > main; echo started`,
		Mode:   "stdio", Cwd: dir, Timeout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	main := fxReadPID(t, filepath.Join(dir, "main"))
	child := procOf(fxReadPID(t, filepath.Join(dir, "child")))
	rec := s.getRecord(t, res.JobID)
	if rec.Pgid == nil || *rec.Pgid != main {
		t.Fatalf("the job's recorded pgid = %v, want its main process %d", rec.Pgid, main)
	}
	// The main process ended and was reaped: its number is free.
	fxEventually(t, 10*time.Second, "the job's main process to be reaped", func() bool { return statFields(main) == nil })
	if st, err := s.c.Status(fxCtx(t, time.Minute), res.JobID); err != nil || st.Status != "running" {
		t.Fatalf("job = %+v %v, want running (its setsid child holds its stdout)", st, err)
	}
	return res, main, child
}

// TestWallSignalReachesOnlyTheJobsProcesses: a stdio job's recorded group
// (its main process's, the default target of /signal and of MCP's
// shell_interrupt for stdio) was left by every process of the job, and an
// unrelated process outside every job took its number. A signal to the
// group reaches no process of it; the job's own processes still get a
// signal to the tree.
func TestWallSignalReachesOnlyTheJobsProcesses(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH: it takes the group number")
	}
	s := startServer(t, serverOpts{})
	res, pgrp, child := orphanedStdioJob(t, s)
	victim := stealGroup(t, pgrp)
	for _, sig := range []string{"TERM", "KILL"} {
		st, raw, err := s.signal(t, res.JobID, map[string]any{"signal": sig})
		if err != nil {
			t.Fatal(err)
		}
		if !victim.alive() {
			t.Fatalf("signal %s to the job's group (answer %d %s) killed process %d, outside the job, which had taken the group number %d", sig, st, raw, victim.pid, pgrp)
		}
		if st != 409 {
			t.Errorf("signal %s to a group with no process of the job = %d %s, want 409", sig, st, raw)
		}
	}
	if !child.alive() {
		t.Fatalf("the job's setsid child %d, in no group the signal named, died", child.pid)
	}
	st, raw, err := s.signal(t, res.JobID, map[string]any{"signal": "TERM", "target": "tree"})
	if err != nil || st != 200 {
		t.Fatalf("signal TERM to the tree = %d %s %v", st, raw, err)
	}
	fxEventually(t, 10*time.Second, "the job's child to end", func() bool { return !child.alive() })
	if !victim.alive() {
		t.Fatalf("a signal to the job's tree killed process %d, outside the job", victim.pid)
	}
}

// TestWallLostJobCleanupSparesAReusedGroup: the same job, without a cgroup
// (the cleanup then goes by the job's family), loses its runner; the
// server ends what is left of it, and an unrelated process that took the
// number of the job's group and session survives.
func TestWallLostJobCleanupSparesAReusedGroup(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH: it takes the group number")
	}
	s := startServer(t, serverOpts{args: []string{"--no-cgroup"}})
	res, pgrp, child := orphanedStdioJob(t, s)
	victim := stealGroup(t, pgrp)
	rpid := fxRunnerPID(s, res.JobID)
	if rpid == 0 {
		t.Fatal("no runner recorded")
	}
	if err := syscall.Kill(rpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c := fxCtx(t, time.Minute)
	fxEventually(t, 20*time.Second, "the job to be lost", func() bool {
		st, err := s.c.Status(c, res.JobID)
		return err == nil && st.Status == "lost"
	})
	// The cleanup ran: the job's own process is gone.
	fxEventually(t, 10*time.Second, "the lost job's child to be ended", func() bool { return !child.alive() })
	if !victim.alive() {
		t.Fatalf("the lost job's cleanup killed process %d, outside the job, which had taken the job's group number %d", victim.pid, pgrp)
	}
}
