package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// shellctl-runner-exit records an end with the same compare-and-set as the
// server: it ends an unfinished job, never changes a finished one, and
// refuses bad arguments with exit 2.
func TestRunnerExitRecordsWithCompareAndSet(t *testing.T) {
	s := startServer(t, serverOpts{})
	done, _ := s.runDone(t, client.RunRequest{Script: "exit 3"})
	dir := t.TempDir()
	running, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo $$ > pid; exec sleep 300", Cwd: dir, Timeout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	// The server is killed below, so this job is ended here.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	bin := filepath.Join(binDir, "shellctl-runner-exit")
	run := func(args ...string) (int, string) {
		out, err := exec.Command(bin, append([]string{"--state-dir", s.StateDir}, args...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	for _, bad := range [][]string{
		{"--job-id", running.JobID},
		{"--job-id", running.JobID, "--status", "running"},
		{"--job-id", running.JobID, "--exit-code", "1", "--ended-at", "yesterday"},
	} {
		if code, out := run(bad...); code != 2 || !strings.Contains(out, "shellctl-runner-exit:") {
			t.Errorf("%v: exit %d %q, want 2 with a message", bad, code, out)
		}
	}
	// A finished job keeps its end.
	if code, out := run("--job-id", done.JobID, "--exit-code", "0"); code != 0 {
		t.Fatalf("recording over a finished job: %d %s", code, out)
	}
	if r, _ := fxRowOf(s.StateDir, done.JobID); r.status != "exited" || !r.code.Valid || r.code.Int64 != 3 {
		t.Fatalf("finished job changed: %+v", r)
	}
	// An unfinished one takes it (here with the server stopped, as when a
	// runner records an exit nobody heard).
	s.kill(syscall.SIGKILL)
	ended := time.Now().UTC().Format(time.RFC3339Nano)
	if code, out := run("--job-id", running.JobID, "--exit-code", "137", "--signal", "9", "--status", "terminated", "--reason", "test", "--ended-at", ended); code != 0 {
		t.Fatalf("record: %d %s", code, out)
	}
	if r, _ := fxRowOf(s.StateDir, running.JobID); r.status != "terminated" || r.reason != "test" || !r.code.Valid || r.code.Int64 != 137 {
		t.Fatalf("row after runner-exit: %+v", r)
	}
}
