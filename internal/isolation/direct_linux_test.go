//go:build linux && amd64

package isolation

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// The child the runner clones is the job: the process that runs the job's
// program is the one Direct reports (no fork between them, so no other
// process ever holds the domain), it leads a session of its own (stdio),
// and it starts with nothing of the runner but its three descriptors: no
// other descriptor, no signal blocked or ignored.
func TestDirectIsTheJob(t *testing.T) {
	requireLandlock(t)
	// A descriptor of ours that is not close-on-exec must not reach it.
	leak, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	if _, err := fcntlClearCloexec(leak); err != nil {
		t.Fatal(err)
	}
	// A signal ignored by whoever started us must not stay ignored in the
	// job (an ignored signal survives execve).
	signal.Ignore(syscall.SIGUSR2)
	defer signal.Reset(syscall.SIGUSR2)
	run := func(argv ...string) (int, string) {
		t.Helper()
		l := newJobLayout(t)
		l.writeScript(t, "true\n")
		cfg := l.config(nil)
		cfg.Argv = argv
		outR, outW, _ := os.Pipe()
		devNull, _ := os.Open(os.DevNull)
		defer devNull.Close()
		st := Direct(&cfg, Files{Stdio: [3]*os.File{devNull, outW, outW}}, false, -1)
		outW.Close()
		out, _ := io.ReadAll(outR)
		if st.PID == 0 {
			t.Fatalf("no process: %v", st.Err)
		}
		var ws syscall.WaitStatus
		syscall.Wait4(st.PID, &ws, 0, nil)
		if st.Err != nil || ws.ExitStatus() != 0 {
			t.Fatalf("start: %v, exit %d: %s", st.Err, ws.ExitStatus(), out)
		}
		if a, err := st.DecodeApplied(); err != nil || !a.Enabled {
			t.Errorf("applied %+v, %v: want a domain", a, err)
		}
		return st.PID, string(out)
	}
	// Its process (the pid the program itself reads), the leader of a
	// session of its own.
	pid, out := run("/bin/cut", "-d", " ", "-f", "1,6", "/proc/self/stat")
	if want := fmt.Sprintf("%d %d", pid, pid); strings.TrimSpace(out) != want {
		t.Errorf("pid and session: %q, want %q", strings.TrimSpace(out), want)
	}
	// Its descriptors: 0, 1, 2, and the one ls opens to list them.
	_, out = run("/bin/ls", "/proc/self/fd")
	if fds := strings.Fields(out); len(fds) != 4 || fds[0] != "0" || fds[1] != "1" || fds[2] != "2" || fds[3] != "3" {
		t.Errorf("the job's descriptors: %q, want 0 1 2 and ls's own", fds)
	}
	// Its output is blocking, though the pipe was made non-blocking (as
	// os.Pipe makes it, for the runtime's poller).
	_, out = run("/bin/grep", "^flags:", "/proc/self/fdinfo/1")
	var flags int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "flags: %o", &flags); err != nil || flags&syscall.O_NONBLOCK != 0 {
		t.Errorf("the job's stdout: %q (%v): want it blocking", out, err)
	}
	// No signal blocked or ignored; no_new_privs set.
	_, out = run("/bin/grep", "-E", "^(SigBlk|SigIgn|NoNewPrivs):", "/proc/self/status")
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kv[k] = strings.TrimSpace(v)
	}
	checkKV(t, kv, map[string]string{"SigBlk": "0000000000000000", "SigIgn": "0000000000000000", "NoNewPrivs": "1"})
}

// fcntlClearCloexec makes f's descriptor inheritable across exec.
func fcntlClearCloexec(f *os.File) (int, error) {
	fd, err := rawFD(f)
	if err != nil {
		return 0, err
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0)
	if e != 0 {
		return 0, e
	}
	return fd, nil
}

// Each step the child reports turns into the code and reason a stage
// gives for the same failure.
func TestDirectStepFailures(t *testing.T) {
	cfg := &JobConfig{Cwd: "/work"}
	early := fmt.Errorf("early reason")
	for _, c := range []struct {
		step int
		e    syscall.Errno
		code int
		msg  string
	}{
		{stepEarly, 0, ExitNotFound, "early reason"},
		{stepDup, syscall.EBADF, ExitSetupFailed, "set up the job's descriptors: bad file descriptor"},
		{stepGroup, syscall.EPERM, ExitSetupFailed, "make the job's process group: operation not permitted"},
		{stepForeground, syscall.ENOTTY, ExitSetupFailed, "put the job in its terminal's foreground: inappropriate ioctl for device"},
		{stepSession, syscall.EPERM, ExitSetupFailed, "make the job's session: operation not permitted"},
		{stepChdir, syscall.ENOENT, ExitSetupFailed, "change to cwd /work: no such file or directory"},
		{stepCloexec, syscall.ENOSYS, ExitSetupFailed, "mark the runner's descriptors close-on-exec: function not implemented"},
		{stepNoNewPrivs, syscall.EINVAL, ExitSetupFailed, "apply Landlock filesystem isolation: prctl(PR_SET_NO_NEW_PRIVS): invalid argument"},
		{stepRestrict, syscall.EPERM, ExitSetupFailed, "apply Landlock filesystem isolation: landlock_restrict_self: operation not permitted"},
		{stepExec, syscall.ENOENT, ExitNotFound, "exec /bin/prog: no such file or directory"},
		{stepExec, syscall.EACCES, ExitCannotExec, "exec /bin/prog: permission denied"},
		{99, syscall.EIO, ExitSetupFailed, "the job's start failed at an unknown step 99: input/output error"},
	} {
		code, err := stepFailure(cfg, "/bin/prog", c.step, c.e, early, ExitNotFound)
		if code != c.code || err == nil || err.Error() != c.msg {
			t.Errorf("step %d, %v: %d %v, want %d %q", c.step, c.e, code, err, c.code, c.msg)
		}
	}
}

// A clone that fails (here: into a "cgroup" that is not one; in life, no
// pid free) makes no process: PID 0, the reason, nothing written to the
// job's output, which the runner then ends start_failed.
func TestDirectCloneFailureMakesNoProcess(t *testing.T) {
	requireLandlock(t)
	l := newJobLayout(t)
	l.writeScript(t, "echo ran\n")
	cfg := l.config(nil)
	notCgroup, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer notCgroup.Close()
	fd, err := rawFD(notCgroup)
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, _ := os.Pipe()
	devNull, _ := os.Open(os.DevNull)
	defer devNull.Close()
	st := Direct(&cfg, Files{Stdio: [3]*os.File{devNull, outW, outW}}, false, fd)
	outW.Close()
	out, _ := io.ReadAll(outR)
	if st.PID != 0 || st.Err == nil || !strings.Contains(st.Err.Error(), "start the job's process: clone") {
		t.Fatalf("Direct into a non-cgroup: pid %d, %v: want no process and the clone's error", st.PID, st.Err)
	}
	if len(out) != 0 {
		t.Errorf("the job's output: %q, want nothing", out)
	}
	if _, err := st.DecodeApplied(); err != nil {
		t.Errorf("applied %q: %v", st.Applied, err)
	}
}
