package e2e

import (
	"golang.org/x/sys/unix"

	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// trackers are the two ways a runner follows its job's tree: a cgroup of
// its own (where cgroup v2 is writable) and the child-subreaper walk.
var trackers = []struct {
	name string
	args []string
}{{"cgroup", nil}, {"subreaper", []string{"--no-cgroup"}}}

// escapeeScript leaves a process that ignores every catchable signal and
// has left the job's terminal, then waits.
const escapeeScript = `nohup sh -c 'trap "" TERM HUP INT; exec sleep 300' >/dev/null 2>&1 &
echo esc=$!
sleep 300
`

// startEscapee runs escapeeScript and returns the job and the escapee.
func startEscapee(t *testing.T, s *server) (*client.JobResult, int) {
	t.Helper()
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: escapeeScript, Timeout: 5, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pid := atoiOr0(isoParseKV(res.Output)["esc"])
	if pid <= 0 {
		t.Fatalf("no escapee pid in %q", res.Output)
	}
	t.Cleanup(func() {
		if fxAlive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return res, pid
}

// The trapping nohup escapee is gone within grace + 1 s after terminate,
// after forced delete and after --max-job-runtime, with either tracker.
// (The runner used to leave during the grace period and the escapee lived
// on, moved out of the job's group.)
func TestEndTrappingEscapeeIsGone(t *testing.T) {
	parallel(t)
	for _, tr := range trackers {
		t.Run(tr.name, func(t *testing.T) {
			s := startServer(t, serverOpts{args: tr.args})
			t.Run("terminate", func(t *testing.T) {
				res, pid := startEscapee(t, s)
				t0 := time.Now()
				if _, err := s.c.Terminate(ctx(t), res.JobID, 1); err != nil {
					t.Fatal(err)
				}
				fxEventually(t, 2*time.Second-time.Since(t0), "the escapee to be gone after terminate", func() bool { return !fxAlive(pid) })
				t.Logf("terminate answered after %v; escapee gone", time.Since(t0))
			})
			t.Run("forced-delete", func(t *testing.T) {
				res, pid := startEscapee(t, s)
				t0 := time.Now()
				st, raw, err := s.c.Do(ctx(t), "DELETE", "/v1/jobs/"+res.JobID+"?force=true&grace_seconds=1", nil)
				if err != nil || st != 200 {
					t.Fatalf("delete: %d %s %v", st, raw, err)
				}
				fxEventually(t, 2*time.Second-time.Since(t0), "the escapee to be gone after forced delete", func() bool { return !fxAlive(pid) })
			})
		})
		t.Run(tr.name+"/max-job-runtime", func(t *testing.T) {
			s := startServer(t, serverOpts{args: append([]string{"--max-job-runtime", "1"}, tr.args...)})
			res, pid := startEscapee(t, s)
			done, _ := fxFollow(t, s, res.JobID, res.Offset)
			if done.Status != "terminated" {
				t.Fatalf("status %s, want terminated", done.Status)
			}
			if fxAlive(pid) {
				t.Fatalf("escapee %d alive when the job was reported terminated by its runtime limit", pid)
			}
			fxWantReason(t, s, res.JobID, "max_job_runtime")
		})
	}
}

// A job whose runner is SIGKILLed becomes lost and its processes — those
// in its group, one in a session of its own, its main process — are gone
// within a few seconds; terminate and forced delete of the lost job then
// answer, with nothing left to kill.
func TestLostRunnerEndsItsJob(t *testing.T) {
	parallel(t)
	for _, tr := range trackers {
		t.Run(tr.name, func(t *testing.T) {
			s := startServer(t, serverOpts{args: tr.args})
			// Work another job left running when it ended by itself is not
			// the lost job's, and must survive its end.
			_, kept := s.runDone(t, client.RunRequest{Script: "nohup sleep 303 >/dev/null 2>&1 & echo keep=$!", Cwd: t.TempDir()})
			keep := atoiOr0(isoParseKV(kept)["keep"])
			if keep <= 0 {
				t.Fatalf("no kept pid in %q", kept)
			}
			t.Cleanup(func() { syscall.Kill(keep, syscall.SIGKILL) })
			script := "sleep 300 & echo a=$!\nsetsid sleep 301 & echo b=$!\necho main=$$ runner=$PPID\nsleep 302\n"
			res, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Timeout: 2, Cwd: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			kv := isoParseKV(strings.ReplaceAll(res.Output, " ", "\n"))
			var pids []int
			for _, k := range []string{"a", "b", "main"} {
				p := atoiOr0(kv[k])
				if p <= 0 {
					t.Fatalf("no %s pid in %q", k, res.Output)
				}
				pids = append(pids, p)
				t.Cleanup(func() {
					if fxAlive(p) {
						syscall.Kill(p, syscall.SIGKILL)
					}
				})
			}
			runner := atoiOr0(kv["runner"])
			if runner <= 0 || runner != fxRunnerPID(s, res.JobID) {
				t.Fatalf("runner %d is not the job's recorded runner %d", runner, fxRunnerPID(s, res.JobID))
			}
			syscall.Kill(runner, syscall.SIGKILL)
			fxEventually(t, 5*time.Second, "the job to be lost", func() bool {
				v, err := s.c.Status(ctx(t), res.JobID)
				return err == nil && v.Status == "lost"
			})
			fxEventually(t, 3*time.Second, "every process of the lost job to be gone: "+fmt.Sprint(pids), func() bool { return !fxAnyAlive(pids) })
			if !fxAlive(keep) {
				t.Errorf("the nohup'd work of another, finished job (pid %d) was killed with the lost job", keep)
			}
			if v, err := s.c.Terminate(ctx(t), res.JobID, 1); err != nil || v.Status != "lost" {
				t.Fatalf("terminate of the lost job: %+v %v", v, err)
			}
			if st, raw, err := s.c.Do(ctx(t), "DELETE", "/v1/jobs/"+res.JobID+"?force=true", nil); err != nil || st != 200 {
				t.Fatalf("forced delete of the lost job: %d %s %v", st, raw, err)
			}
		})
	}
}

// With the state dir on a full file system, a job that writes more than
// fits and exits 3 ends done with its exit kept (reason
// output_write_failed), terminate on it is answered, and once space is
// freed the end is recorded in the database and new jobs run.
func TestFullDiskKeepsTheExit(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	state := filepath.Join(mnt, "state")
	for _, mode := range []string{"stdio", "pty"} {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t, serverOpts{stateDir: state, args: []string{"--warm-runners", "0"}})
			ballast := filepath.Join(mnt, "ballast")
			if err := os.WriteFile(ballast, make([]byte, 4<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := s.c.Run(ctx(t), client.RunRequest{Script: "head -c 60000000 /dev/zero | tr '\\0' a; exit 3", Mode: mode, Timeout: 60})
			if err != nil {
				t.Fatal(err)
			}
			done, _ := fxFollow(t, s, res.JobID, res.Offset)
			if done.Status != "exited" || code(done) != 3 {
				t.Fatalf("job on a full disk: status %s code %d, want exited 3", done.Status, code(done))
			}
			if v, err := s.c.Terminate(ctx(t), res.JobID, 1); err != nil || v.Status != "exited" {
				t.Fatalf("terminate after the end: %+v %v", v, err)
			}
			os.Remove(ballast)
			fxEventually(t, 15*time.Second, "the end to be recorded once space is freed", func() bool {
				r, err := fxRowOf(s.StateDir, res.JobID)
				return err == nil && r.status == "exited" && r.code.Valid && r.code.Int64 == 3
			})
			if r := fxReadRow(t, s.StateDir, res.JobID); !strings.HasPrefix(r.reason, "output_write_failed") {
				t.Errorf("recorded reason %q, want output_write_failed…", r.reason)
			}
			if st, raw, err := s.c.Do(ctx(t), "DELETE", "/v1/jobs/"+res.JobID, nil); err != nil || st != 200 {
				t.Fatalf("delete: %d %s %v", st, raw, err)
			}
			if r, out := s.runDone(t, client.RunRequest{Script: "echo small", Mode: mode}); code(r) != 0 || !strings.Contains(out, "small") {
				t.Fatalf("a small job after space was freed: %d %q", code(r), out)
			}
			s.kill(syscall.SIGTERM)
		})
	}
}

// A runner whose server is gone and whose state dir was deleted cannot
// ever hand its exit to anyone: it gives up and leaves once the job ended,
// instead of retrying for good (a process left running forever).
func TestRunnerLeavesWhenItsStateDirIsDeleted(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 1", Timeout: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	pid := fxRunnerSeen(run.JobID)
	if pid == 0 {
		t.Fatalf("no runner seen for job %s", run.JobID)
	}
	// Its end is an event: the pidfd turns readable when it exits.
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of runner %d: %v", pid, err)
	}
	defer unix.Close(pfd)
	s.kill(syscall.SIGKILL)
	if err := os.RemoveAll(s.StateDir); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 30000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("runner %d still runs 30 s after its job ended with its state dir deleted", pid)
		}
		return
	}
}
