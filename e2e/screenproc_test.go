package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
	"golang.org/x/sys/unix"
)

// landlockHere reports whether this kernel has Landlock.
func landlockHere() bool {
	v, _, e := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return e == 0 && v >= 1
}

// runnerPID is the runner of a running job: the parent of its process.
func (s *server) runnerPID(t *testing.T, id string) int {
	t.Helper()
	rec := s.getRecord(t, id)
	if rec.PID == nil {
		t.Fatalf("job %s: no pid in the record", id)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", *rec.PID))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// screenProcs are the children of pid that run shellctl-screen.
func screenProcs(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, tf := range tasks {
		b, _ := os.ReadFile(tf)
		for _, c := range strings.Fields(string(b)) {
			if exe, err := os.Readlink("/proc/" + c + "/exe"); err == nil && filepath.Base(exe) == "shellctl-screen" {
				n, _ := strconv.Atoi(c)
				out = append(out, n)
			}
		}
	}
	return out
}

func procField(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// sessionOf is a process's session id (stat field 6).
func sessionOf(t *testing.T, pid int) string {
	st := procField(t, pid, "stat")
	return strings.Fields(st[strings.LastIndexByte(st, ')')+2:])[3]
}

// gone waits until pid is no longer a live process (a zombie counts as
// gone), at most 10 s: its pidfd turns readable when it exits.
func gone(pid int) bool { return exitsWithin(pid, 10*time.Second) }

// exitsWithin waits on pid's pidfd for its exit, at most d; a pid already
// gone (no such process) has exited.
func exitsWithin(pid int, d time.Duration) bool {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// TestScreenProcessOnlyWhenNeeded: a pty job that prints plain lines has
// no screen process; one that draws gets one, outside the job (its own
// session, not in the job's cgroup, not in the tree the ladder ends in
// subreaper mode), which ends with the job and leaves the last screen
// behind, whether the job ended by itself or was terminated.
func TestScreenProcessOnlyWhenNeeded(t *testing.T) {
	for _, mode := range []struct {
		name string
		args []string
	}{{"cgroup", nil}, {"subreaper", []string{"--no-cgroup"}}} {
		t.Run(mode.name, func(t *testing.T) {
			s := startServer(t, serverOpts{args: mode.args})
			plain := runPTY(t, s, "echo plain; read x", 80, 24)
			s.screenShows(t, plain, "plain")
			if p := screenProcs(s.runnerPID(t, plain)); len(p) != 0 {
				t.Errorf("a job that printed one line has screen processes %v", p)
			}
			s.c.Terminate(ctx(t), plain, 1)

			// Lines scroll through the runner's own screen (screen.Lines):
			// thousands of them start no screen process either, and the
			// screen and scrollback are those of a terminal.
			plain = runPTY(t, s, "seq 1 5000; echo plain; read x", 80, 24)
			s.screenShows(t, plain, "plain")
			if p := screenProcs(s.runnerPID(t, plain)); len(p) != 0 {
				t.Errorf("a job that printed 5001 lines has screen processes %v", p)
			}
			sc := s.screen(t, plain, 1000)
			if sb := *sc.Scrollback; sc.Lines[21] != "5000" || sc.Lines[22] != "plain" || sc.Cursor.Row != 23 || len(sb) != 1000 || sb[0] != "3979" || sb[999] != "4978" {
				t.Errorf("after 5000 lines: screen rows 21–22 %q %q, cursor %+v, %d scrollback rows", sc.Lines[21], sc.Lines[22], sc.Cursor, len(sb))
			}
			s.c.Terminate(ctx(t), plain, 1)

			drawn := runPTY(t, s, `printf '\033[2J\033[5;5Hdrawn'; read x; printf '\033[6;1Hbye'`, 80, 24)
			sc = s.screenShows(t, drawn, "drawn")
			if sc.Lines[4] != "    drawn" {
				t.Fatalf("screen row 4 is %q, want %q", sc.Lines[4], "    drawn")
			}
			rec := s.getRecord(t, drawn)
			runner := s.runnerPID(t, drawn)
			procs := screenProcs(runner)
			if len(procs) != 1 {
				t.Fatalf("runner %d has screen processes %v, want one", runner, procs)
			}
			sp := procs[0]
			if a, b := sessionOf(t, sp), sessionOf(t, *rec.PID); a == b {
				t.Errorf("the screen process shares the job's session %s", a)
			}
			if mode.name == "cgroup" {
				if a, b := procField(t, sp, "cgroup"), procField(t, *rec.PID, "cgroup"); a == b {
					t.Errorf("the screen process is in the job's cgroup %s", a)
				}
			}
			// Confined to no files (isolation.ConfineNoFiles: no_new_privs
			// comes with its Landlock domain); a race build has cgo and
			// cannot confine every thread.
			if os.Getenv("SHELLCTL_E2E_RACE") == "" && landlockHere() {
				if st := procField(t, sp, "status"); !strings.Contains(st, "NoNewPrivs:\t1") {
					t.Errorf("the screen process is not confined (no no_new_privs):\n%s", st)
				}
			}
			// The job ends by itself: in subreaper mode the screen process,
			// a descendant of the runner, must not count as the job's.
			if _, err := s.c.Input(ctx(t), drawn, "\n", client.WaitRequest{}); err != nil {
				t.Fatal(err)
			}
			r, err := s.c.Wait(ctx(t), drawn, client.WaitRequest{Timeout: f64(10)})
			for deadline := time.Now().Add(20 * time.Second); err == nil && !r.Done && time.Now().Before(deadline); {
				r, err = s.c.Wait(ctx(t), drawn, client.WaitRequest{Offset: r.Offset, Timeout: f64(10)})
			}
			if err != nil || !r.Done {
				t.Fatalf("the job did not end by itself: %+v %v", r, err)
			}
			if !gone(sp) {
				t.Fatalf("screen process %d still runs after its job ended", sp)
			}
			if !gone(runner) {
				t.Fatalf("runner %d still runs after its job ended", runner)
			}
			last := s.screen(t, drawn, 0)
			if last.Lines[4] != "    drawn" || last.Lines[5] != "bye" {
				t.Fatalf("last screen rows 4–5: %q %q", last.Lines[4], last.Lines[5])
			}

			// Terminated: the ladder ends the job's tree, not its screen
			// process (in subreaper mode that is exempted from the tree), so
			// the last screen is still kept.
			ended := runPTY(t, s, `printf '\033[2J\033[3;3Hkept'; sleep 600`, 80, 24)
			s.screenShows(t, ended, "kept")
			sp2 := screenProcs(s.runnerPID(t, ended))
			if len(sp2) != 1 {
				t.Fatalf("screen processes %v, want one", sp2)
			}
			if st, err := s.c.Terminate(ctx(t), ended, 1); err != nil || st.Status != "terminated" {
				t.Fatalf("terminate: %+v %v", st, err)
			}
			if !gone(sp2[0]) {
				t.Fatalf("screen process %d still runs after its job was terminated", sp2[0])
			}
			if last := s.screen(t, ended, 0); last.Lines[2] != "  kept" {
				t.Fatalf("last screen of the terminated job, row 2: %q", last.Lines[2])
			}
		})
	}
}

// TestScreenProcessKilledJobGoesOn: when the screen process dies (killed
// here), the screen answers 409 screen_unavailable saying so, and the job,
// its input and its output go on to a recorded exit.
func TestScreenProcessKilledJobGoesOn(t *testing.T) {
	s := startServer(t, serverOpts{})
	id := runPTY(t, s, `printf '\033[2J\033[Hfirst'; read x; echo "second-$x"; read y; exit 7`, 80, 24)
	s.screenShows(t, id, "first")
	procs := screenProcs(s.runnerPID(t, id))
	if len(procs) != 1 {
		t.Fatalf("screen processes %v, want one", procs)
	}
	if err := syscall.Kill(procs[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !gone(procs[0]) {
		t.Fatal("the screen process survived SIGKILL")
	}
	// The runner learns of it at its next write or request: output first.
	if _, err := s.c.Input(ctx(t), id, "abc\n", client.WaitRequest{}); err != nil {
		t.Fatal(err)
	}
	var off int64
	var out strings.Builder
	s.waitFor(t, id, &off, &out, "second-abc")
	_, err := s.c.Screen(ctx(t), id, 0)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "screen_unavailable" || !strings.Contains(ae.Message, "screen process") {
		t.Fatalf("screen after its process died: %v, want 409 screen_unavailable naming the screen process", err)
	}
	if _, err := s.c.Input(ctx(t), id, "\n", client.WaitRequest{}); err != nil {
		t.Fatal(err)
	}
	// A wait may come back early, the job waiting for input again.
	done, err := s.c.Wait(ctx(t), id, client.WaitRequest{Timeout: f64(10)})
	for deadline := time.Now().Add(20 * time.Second); err == nil && !done.Done && time.Now().Before(deadline); {
		done, err = s.c.Wait(ctx(t), id, client.WaitRequest{Offset: done.Offset, Timeout: f64(10)})
	}
	if err != nil || !done.Done || done.ExitCode == nil || *done.ExitCode != 7 {
		t.Fatalf("end: %+v %v, want done with exit 7", done, err)
	}
}
