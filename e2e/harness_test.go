// Package e2e holds the integration tests: they build the real binaries,
// start real servers on loopback with their own state dir and Home, and run
// real jobs through real runners, terminals and SQLite.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shellctl-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	args := []string{"build", "-o", dir + "/", "../cmd/shellctl", "../cmd/shellctl-runner", "../cmd/shellctl-stage", "../cmd/shellctl-screen", "../cmd/shellctl-runner-exit"}
	cgo := "CGO_ENABLED=0"
	if os.Getenv("SHELLCTL_E2E_RACE") != "" {
		// SHELLCTL_E2E_RACE=1: the binaries under test are built with the
		// race detector, and a race any of them reports fails the test.
		args = append(args[:1], append([]string{"-race"}, args[1:]...)...)
		cgo = "CGO_ENABLED=1"
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), cgo)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	// The runner takes the helpers beside it only when no one but their
	// owner can write them: so, whatever the umask.
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			_ = os.Chmod(filepath.Join(dir, e.Name()), 0o755)
		}
	}
	binDir = dir
	if n := reapStaleGroups(); n > 0 {
		fmt.Fprintf(os.Stderr, "e2e: ended %d cgroup(s) an interrupted earlier run left behind\n", n)
	}
	if err := installOpenAPICheck(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := oaFinish(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one shellctl serve process.
type server struct {
	t        *testing.T
	cmd      *exec.Cmd
	URL      string
	Home     string
	StateDir string
	Token    string
	args     []string
	env      []string
	extra    []*os.File
	cred     *syscall.Credential
	c        *client.Client
	done     chan struct{}
	races    atomic.Int32 // data races the server reported (SHELLCTL_E2E_RACE)
	// group is the cgroup the server runs in (nil where the machine has no
	// cgroup v2 the test can write); see procs_test.go.
	group      *e2eGroup
	noGroup    bool
	startTicks uint64 // start time of the first server process, clock ticks since boot
	// stderr keeps every line the server wrote to stderr (see
	// observability_test.go); stderrGrew is closed and replaced at each.
	stderrMu   sync.Mutex
	stderr     []string
	stderrGrew chan struct{}
}

type serverOpts struct {
	token    string
	args     []string
	env      []string // extra environment of the server
	home     string   // reuse a Home (restart tests)
	stateDir string   // reuse a state dir (restart tests)
	// extraFiles are handed to the server as fds 3…, as a careless parent
	// would leak them.
	extraFiles []*os.File
	// cred runs the server as another user (a non-root deployment).
	cred *syscall.Credential
}

func startServer(t *testing.T, o serverOpts) *server {
	t.Helper()
	home := o.home
	if home == "" {
		home = t.TempDir()
	}
	state := o.stateDir
	if state == "" {
		state = filepath.Join(t.TempDir(), "state")
	}
	s := &server{t: t, Home: home, StateDir: state, Token: o.token, args: o.args, env: o.env, extra: o.extraFiles, cred: o.cred}
	s.start()
	t.Cleanup(func() { s.terminateAll(); s.kill(syscall.SIGKILL); s.cleanupJobs(); s.checkRaces() })
	return s
}

var serving = regexp.MustCompile(`serving on (http://\S+)`)

func (s *server) start() {
	t := s.t
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", s.StateDir}, s.args...)
	if s.Token != "" {
		args = append(args, "--token", s.Token)
	}
	cmd := exec.Command(filepath.Join(binDir, "shellctl"), args...)
	cmd.Env = append([]string{"HOME=" + s.Home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, s.env...)
	if os.Getenv("SHELLCTL_E2E_RACE") != "" {
		// The race runtime sleeps a second at every exit by default:
		// processes would seem to linger that long.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	cmd.ExtraFiles = s.extra
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.group == nil && !s.noGroup {
		if s.group, err = newE2EGroup(); err != nil {
			t.Logf("servers run without a cgroup of their own (%v): cleanup ends the PIDs they recorded", err)
			s.noGroup = true
		}
	}
	if s.group != nil {
		// Started straight into its group (clone3 CLONE_INTO_CGROUP).
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: s.group.leafFD}
	}
	if s.cred != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = s.cred
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	if s.startTicks == 0 {
		s.startTicks = procStartTicks(cmd.Process.Pid)
	}
	s.done = make(chan struct{})
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.addStderr(line)
			if m := serving.FindStringSubmatch(line); m != nil && !sent {
				urlCh <- m[1]
				sent = true
			}
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, "serve:", line)
			}
			if strings.Contains(line, "DATA RACE") {
				s.races.Add(1)
			}
		}
		cmd.Wait()
		close(s.done)
	}()
	select {
	case u := <-urlCh:
		s.URL = u
	case <-s.done:
		t.Fatalf("shellctl serve exited before serving")
	case <-time.After(20 * time.Second):
		t.Fatalf("shellctl serve did not start")
	}
	oaRegister(t, s.URL) // its answers are checked against the OpenAPI document
	s.c = &client.Client{BaseURL: s.URL, Token: s.Token, HTTP: &http.Client{Timeout: 120 * time.Second}}
}

// kill stops the server with sig and waits until it is gone.
func (s *server) kill(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// restart stops the server with sig and starts a new one on the same state
// dir and Home.
func (s *server) restart(sig syscall.Signal) {
	s.kill(sig)
	s.start()
}

// terminateAll ends every job that still runs, so no test leaves processes
// behind.
func (s *server) terminateAll() {
	select {
	case <-s.done:
		return
	default:
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := s.c.List(c, "", 200)
	if err != nil {
		return
	}
	for _, j := range list {
		switch j.Status {
		case "created", "starting", "running":
			s.c.Terminate(c, j.JobID, 0)
		}
	}
}

// checkRaces fails the test for a data race reported by the server or by a
// runner (runners write theirs to runner.log files in the state dir).
func (s *server) checkRaces() {
	if n := s.races.Load(); n > 0 {
		s.t.Errorf("the server reported %d data races", n)
	}
	filepath.WalkDir(s.StateDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "runner.log" {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "DATA RACE") {
				s.t.Errorf("a runner reported a data race (%s):\n%s", p, b)
			}
		}
		return nil
	})
}

// cleanupJobs kills every runner and job left by a test (their runners
// outlive the server by design): the server's whole cgroup, or where there
// is none the PIDs the server recorded (see procs_test.go). Never by name.
func (s *server) cleanupJobs() {
	if s.group == nil {
		s.killRecorded()
		return
	}
	if err := s.group.kill(); err != nil {
		s.t.Error(err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// run runs script and waits (following offsets) until it is done.
func (s *server) runDone(t *testing.T, req client.RunRequest) (*client.JobResult, string) {
	t.Helper()
	res, err := s.c.Run(ctx(t), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Script, err)
	}
	var out strings.Builder
	out.WriteString(res.Output)
	for !res.Done {
		to := 30.0
		res, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &to})
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		out.WriteString(res.Output)
	}
	return res, out.String()
}

func code(r *client.JobResult) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

func f64(v float64) *float64 { return &v }

// scratchHome is a Home on a tmpfs of its own, for a test whose jobs make
// hundreds of thousands of entries: unmounting it frees them at once,
// where removing them from the disk would take longer than the test
// itself (200 000 directories: about 40 s on ext4 here, most of the test
// suite's longest test). Without the power to mount, a plain temp dir.
func scratchHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=2g,nr_inodes=1m"); err != nil {
		t.Logf("a Home on disk (tmpfs: %v): its removal is slower", err)
		return dir
	}
	// Registered before the server's own cleanup, so it runs after it:
	// the server and its jobs are gone when the tree is.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount the scratch Home %s: %v", dir, err)
		}
	})
	return dir
}

// parallel lets a test run beside the other tests that call it, after
// the sequential ones (go test's t.Parallel; -parallel bounds how many).
// It is for tests that start their own servers, change nothing the
// process or the machine shares (umask, environment, fixed paths), and
// assert no latency that other tests' load could stretch: most of their
// time is spent waiting on their jobs, so the suite's wall time drops
// (make test's budget is 10 minutes on a cold machine).
// SHELLCTL_E2E_SERIAL=1 runs them one at a time, to tell a failure
// that comes from running beside others.
func parallel(t *testing.T) {
	if os.Getenv("SHELLCTL_E2E_SERIAL") == "" {
		t.Parallel()
	}
}
