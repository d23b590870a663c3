package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/nsprocs"
)

// initServer is shellctl serve as PID 1 of a PID namespace of its own (and
// a mount namespace with that namespace's /proc), as in a container.
type initServer struct {
	cmd      *exec.Cmd
	c        *client.Client
	StateDir string
	Home     string
	done     chan struct{}
	mu       sync.Mutex
	stderr   []string
}

func startInitServer(t *testing.T, args ...string) *initServer {
	t.Helper()
	return startInitServerIn(t, initNS{}, args...)
}

// initNS says what else the PID 1 server's namespaces hide, as a
// container's may.
type initNS struct {
	// noCgroupFS: a cgroup namespace of its own and no cgroup file
	// system to be seen (an empty tmpfs over /sys/fs/cgroup), as in a
	// container that mounts none or one read-only of another version.
	noCgroupFS bool
}

func startInitServerIn(t *testing.T, ns initNS, args ...string) *initServer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root: run as root to test shellctl as PID 1")
	}
	s := &initServer{StateDir: filepath.Join(t.TempDir(), "state"), Home: t.TempDir(), done: make(chan struct{})}
	// sh mounts the namespace's own proc, then becomes the server: the
	// server is PID 1 (exec keeps the pid).
	prelude := ""
	if ns.noCgroupFS {
		prelude = "mount -t tmpfs none /sys/fs/cgroup && "
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", prelude + `mount -t proc proc /proc && exec "$0" serve --listen 127.0.0.1:0 --state-dir "$@" --verbose`,
		filepath.Join(binDir, "shellctl"), s.StateDir}, args...)...)
	cmd.Env = []string{"HOME=" + s.Home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	// CLONE_NEWNS by unshare: Go then makes / private, so the proc mount
	// stays in the new mount namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Unshareflags: syscall.CLONE_NEWNS}
	if ns.noCgroupFS {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWCGROUP
	}
	// A cgroup of its own, as a container has: processes outside the
	// namespace never share the server's group.
	if g, err := newE2EGroup(); err == nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, g.leafFD
		t.Cleanup(func() { g.kill() })
	} else if ns.noCgroupFS {
		t.Skipf("no cgroup of its own for the server (%v): its clients would share its group", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process in a new PID and mount namespace here: %v", err)
	}
	s.cmd = cmd
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr = append(s.stderr, line)
			s.mu.Unlock()
			if m := serving.FindStringSubmatch(line); m != nil && !sent {
				urlCh <- m[1]
				sent = true
			}
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, "serve(pid 1):", line)
			}
		}
		cmd.Wait()
		close(s.done)
	}()
	// SIGKILL of PID 1 ends every process of its namespace: nothing of
	// the test outlives it.
	t.Cleanup(func() { s.cmd.Process.Kill(); <-s.done })
	select {
	case u := <-urlCh:
		s.c = &client.Client{BaseURL: u, HTTP: &http.Client{Timeout: 60 * time.Second}}
	case <-s.done:
		t.Fatalf("shellctl serve as PID 1 exited before serving:\n%s", s.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("shellctl serve as PID 1 did not start:\n%s", s.log())
	}
	return s
}

func (s *initServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.stderr, "\n")
}

// nsProcs lists the processes of the server's PID namespace as the host
// numbers them, with their state letter and their pid in the namespace.
func (s *initServer) nsProcs(t *testing.T) []nsprocs.Proc {
	t.Helper()
	ps, err := nsprocs.Of(s.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("processes of the server's namespace: %v", err)
	}
	return ps
}

// Served as PID 1, a job whose runner is killed is ended as lost, and its
// process — adopted by PID 1 — is reaped: no zombie stays in the namespace.
func TestInitReapsKilledRunnersJob(t *testing.T) {
	parallel(t)
	for _, tr := range trackers {
		t.Run(tr.name, func(t *testing.T) { testInitReapsKilledRunnersJob(t, tr.args) })
	}
}

func testInitReapsKilledRunnersJob(t *testing.T, args []string) {
	s := startInitServer(t, args...)
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo runner=$PPID main=$$\nsleep 300 & wait\n", Timeout: 1, Cwd: s.Home})
	if err != nil {
		t.Fatal(err)
	}
	kv := isoParseKV(strings.ReplaceAll(res.Output, " ", "\n"))
	runnerNS := atoiOr0(kv["runner"])
	if runnerNS <= 1 {
		t.Fatalf("no runner pid in %q", res.Output)
	}
	var runnerHost int
	for _, p := range s.nsProcs(t) {
		if p.NS == runnerNS {
			runnerHost = p.Host
		}
	}
	if runnerHost == 0 {
		t.Fatalf("runner %d (in the namespace) not found among %+v", runnerNS, s.nsProcs(t))
	}
	syscall.Kill(runnerHost, syscall.SIGKILL)
	fxEventually(t, 10*time.Second, "the job to be lost", func() bool {
		v, err := s.c.Status(ctx(t), res.JobID)
		return err == nil && v.Status == "lost"
	})
	s.noZombies(t, "its job was lost")
	if !strings.Contains(s.log(), "running as PID 1") {
		t.Errorf("the log does not say the server runs as PID 1:\n%s", s.log())
	}
	// The server goes on serving.
	if _, out := (&server{t: t, c: s.c}).runDone(t, client.RunRequest{Script: "echo after", Cwd: s.Home}); !strings.Contains(out, "after") {
		t.Errorf("a job after the lost one printed %q", out)
	}
}

// Served as PID 1, the server reaps every orphan of its namespace, not
// only those of its runners: a process that `docker exec` or `runc exec`
// (here nsenter) put in the namespace and that left a child behind.
func TestInitReapsEveryOrphan(t *testing.T) {
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter (util-linux) is not installed: cannot enter the namespace as runc exec would")
	}
	s := startInitServer(t)
	out, err := exec.Command("nsenter", "--target", strconv.Itoa(s.cmd.Process.Pid), "--pid", "--mount", "--",
		"/bin/sh", "-c", "sleep 0.3 </dev/null >/dev/null 2>&1 & echo left=$!").Output()
	if err != nil {
		t.Skipf("nsenter into the server's namespaces: %v", err)
	}
	left := atoiOr0(isoParseKV(string(out))["left"])
	if left <= 1 {
		t.Fatalf("no orphan pid in %q", out)
	}
	fxEventually(t, 10*time.Second, fmt.Sprintf("the orphan (pid %d in the namespace) to end", left), func() bool {
		for _, p := range s.nsProcs(t) {
			if p.NS == left && p.State != 'Z' {
				return false
			}
		}
		return true
	})
	s.noZombies(t, "an orphan adopted by PID 1 ended")
}

// noZombies fails unless, within 3 s, no process of the namespace is a
// zombie.
func (s *initServer) noZombies(t *testing.T, after string) {
	t.Helper()
	var zombies []nsprocs.Proc
	deadline := time.Now().Add(3 * time.Second)
	for {
		zombies = zombies[:0]
		for _, p := range s.nsProcs(t) {
			if p.State == 'Z' {
				zombies = append(zombies, p)
			}
		}
		if len(zombies) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies stay in the namespace of shellctl as PID 1 3 s after %s: %+v", after, zombies)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SIGTERM to shellctl as PID 1 ends its running jobs through the ladder —
// one that ignores SIGTERM is killed after the grace — and records every
// end before it exits, within a second; a server started afterwards on the
// same state dir reads those ends (not jobs lost with the namespace).
func TestInitStopEndsAndRecordsJobs(t *testing.T) {
	s := startInitServer(t)
	var ids []string
	for _, req := range []client.RunRequest{
		{Script: "trap '' TERM\necho ready\nsleep 300\n", Mode: "pty"},
		{Script: "echo ready; sleep 301", Mode: "stdio"},
		{Script: "sleep 302 & sleep 303 & echo ready; wait", Mode: "stdio"},
	} {
		req.Timeout, req.Cwd = 5, s.Home
		res, err := s.c.Run(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Done || !strings.Contains(res.Output, "ready") {
			t.Fatalf("job %q did not start running: %+v", req.Script, res)
		}
		ids = append(ids, res.JobID)
	}
	_, doneOut := (&server{t: t, c: s.c}).runDone(t, client.RunRequest{Script: "echo finished", Cwd: s.Home})
	if !strings.Contains(doneOut, "finished") {
		t.Fatalf("a finished job printed %q", doneOut)
	}
	sent := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("shellctl as PID 1 did not exit 10 s after SIGTERM:\n%s", s.log())
	}
	took := time.Since(sent)
	if !s.cmd.ProcessState.Success() {
		t.Errorf("shellctl as PID 1 exited %v after SIGTERM:\n%s", s.cmd.ProcessState, s.log())
	}
	// A race-detector build runs the server and its runners several times
	// slower: the bound is the ladder's, not the build's.
	bound := time.Second
	if os.Getenv("SHELLCTL_E2E_RACE") != "" {
		bound = 3 * time.Second
	}
	if took > bound {
		t.Errorf("shellctl as PID 1 took %v to stop after SIGTERM, over %v", took, bound)
	}
	if !strings.Contains(s.log(), "stopping as PID 1") {
		t.Errorf("the log does not say the stop ends the jobs as PID 1:\n%s", s.log())
	}
	// A server outside any namespace, on the same state dir, reads what
	// was recorded.
	after := startServer(t, serverOpts{stateDir: s.StateDir, home: s.Home})
	for _, id := range ids {
		code, body, err := after.c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/record", nil)
		if err != nil || code != 200 {
			t.Fatalf("record of %s: %d %s %v", id, code, body, err)
		}
		var rec struct {
			Status string  `json:"status"`
			Reason *string `json:"reason"`
			Ended  *string `json:"ended_at"`
		}
		if err := json.Unmarshal(body, &rec); err != nil {
			t.Fatal(err)
		}
		reason := "<nil>"
		if rec.Reason != nil {
			reason = *rec.Reason
		}
		if rec.Status != "terminated" || reason != "terminate_requested" || rec.Ended == nil {
			t.Errorf("job %s after the PID 1 stop: status %q reason %s ended_at %v; want terminated by terminate_requested, its end recorded", id, rec.Status, reason, rec.Ended)
		}
	}
	t.Logf("SIGTERM to exit: %v", took)
}
