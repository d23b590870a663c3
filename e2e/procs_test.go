package e2e

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// How the tests end what they started. They signal only processes they
// know to be theirs, never by matching command lines:
//
//   - a server is its exec.Cmd's process;
//   - where the machine has a cgroup v2 hierarchy the test may write, each
//     server is started into a cgroup of its own (e2eGroup), so its
//     runners, their jobs and everything those start (whatever session or
//     process group they move to, and the job cgroups runners make below
//     their own) live in it; cleanup kills the group through cgroup.kill
//     and removes it;
//   - without one, cleanup ends the runner and job PIDs the server recorded
//     in its database, each checked to still be that process (a runner is
//     our built shellctl-runner binary; a job started after its server).
//     A process that left its job's session there can only be ended by the
//     test that recorded its PID (fxReadPID).

// e2eGroup is the cgroup a server runs in: dir holds no process itself, the
// server is started into dir/srv (a group with processes cannot have child
// groups with controllers, and runners make job groups beside themselves).
type e2eGroup struct {
	dir    string
	leafFD int // dir/srv, open for clone3 CLONE_INTO_CGROUP
}

var groupSeq atomic.Int64

// cgroup2Self returns the cgroup2 mount point and this process's cgroup
// path in it ("", "" when there is none).
func cgroup2Self() (mount, self string) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		line := sc.Text()
		if _, rest, ok := strings.Cut(line, " - "); ok && strings.HasPrefix(rest, "cgroup2 ") {
			if f := strings.Fields(line); len(f) > 4 {
				mount = f[4]
			}
		}
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil || mount == "" {
		return "", ""
	}
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return mount, p
		}
	}
	return "", ""
}

// newE2EGroup makes a cgroup for one server, or returns why it cannot.
func newE2EGroup() (*e2eGroup, error) {
	mount, self := cgroup2Self()
	if mount == "" {
		return nil, errors.New("no cgroup2 mount")
	}
	dir := filepath.Join(mount, self, fmt.Sprintf("e2e-%d-%d", os.Getpid(), groupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup %s: %w", dir, err)
	}
	leaf := filepath.Join(dir, "srv")
	if err := os.Mkdir(leaf, 0o755); err != nil {
		syscall.Rmdir(dir)
		return nil, fmt.Errorf("make cgroup %s: %w", leaf, err)
	}
	fd, err := syscall.Open(leaf, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Rmdir(leaf)
		syscall.Rmdir(dir)
		return nil, fmt.Errorf("open cgroup %s: %w", leaf, err)
	}
	return &e2eGroup{dir: dir, leafFD: fd}, nil
}

// reapStaleGroups ends what an interrupted earlier run of these tests left
// behind (a killed `go test` never runs its cleanups): the groups named
// e2e-<pid>-<n> beside ours whose test process <pid> is gone, each killed
// as a whole and removed. A group whose PID is alive belongs to a run
// going on now (another `go test` of this package) and is left alone.
func reapStaleGroups() (reaped int) {
	mount, self := cgroup2Self()
	if mount == "" {
		return 0
	}
	parent := filepath.Join(mount, self)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		var pid, n int
		if !e.IsDir() {
			continue
		}
		if k, err := fmt.Sscanf(e.Name(), "e2e-%d-%d", &pid, &n); err != nil || k != 2 || pid <= 0 || e.Name() != fmt.Sprintf("e2e-%d-%d", pid, n) {
			continue
		}
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		g := &e2eGroup{dir: filepath.Join(parent, e.Name()), leafFD: -1}
		if g.kill() == nil {
			reaped++
		}
	}
	return reaped
}

// populated reports whether any process is left in the group's subtree.
func (g *e2eGroup) populated() bool {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// kill ends every process in the group's subtree and removes the group
// (a second kill finds nothing to do). It fails when processes are left.
func (g *e2eGroup) kill() error {
	deadline := time.Now().Add(15 * time.Second)
	for g.populated() {
		// cgroup.kill (Linux 5.14) kills the whole subtree at once; where
		// it is missing, the members listed in each group are killed.
		if err := os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			g.killMembers()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still has processes 15 s after SIGKILL", g.dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g.leafFD >= 0 {
		syscall.Close(g.leafFD)
		g.leafFD = -1
	}
	// Deepest first: the job groups runners made, then srv, then ours.
	var dirs []string
	filepath.WalkDir(g.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		syscall.Rmdir(dirs[i])
	}
	return nil
}

// killMembers sends SIGKILL to the processes listed in the group and its
// descendants (for kernels without cgroup.kill).
func (g *e2eGroup) killMembers() {
	filepath.WalkDir(g.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return nil
	})
}

// procStartTicks is the start time of pid in clock ticks since boot (field
// 22 of its stat), 0 when it is gone.
func procStartTicks(pid int) uint64 {
	n, _ := strconv.ParseUint(fxProcStart(pid), 10, 64)
	return n
}

// isOurRunner reports whether pid runs the shellctl-runner binary this test
// binary built (its own temporary directory): the same file, not a name.
func isOurRunner(pid int) bool {
	exe, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return false
	}
	ours, err := os.Stat(filepath.Join(binDir, "shellctl-runner"))
	return err == nil && os.SameFile(exe, ours) && fxAlive(pid)
}

// recordedRunnerPID is the runner pid the server recorded for job id, when
// that process still runs our runner binary; 0 otherwise.
func recordedRunnerPID(stateDir, id string) int {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(stateDir, "shellctl.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return 0
	}
	defer db.Close()
	var pid int
	if err := db.QueryRow(`SELECT runner_pid FROM jobs WHERE id = ?`, id).Scan(&pid); err != nil || pid <= 0 {
		return 0
	}
	if !isOurRunner(pid) {
		return 0
	}
	return pid
}

// killRecorded is the cleanup where there is no e2eGroup: the runner and
// job PIDs the server recorded, each only while it is still that process.
// A job is its own session and process group leader, so the group it
// leads is ended with it.
func (s *server) killRecorded() {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.StateDir, "shellctl.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return
	}
	defer db.Close()
	rows, err := db.Query(`SELECT runner_pid, pid FROM jobs`)
	if err != nil {
		return
	}
	var runners, jobs []int
	for rows.Next() {
		var rp, jp int
		if rows.Scan(&rp, &jp) == nil {
			runners = append(runners, rp)
			jobs = append(jobs, jp)
		}
	}
	rows.Close()
	for _, pid := range runners {
		if pid > 0 && isOurRunner(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range jobs {
		// Started after the server this test started first: not a process
		// that merely got the number of a job that ended long ago.
		if pid > 0 && s.startTicks > 0 && procStartTicks(pid) >= s.startTicks && fxAlive(pid) {
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
				syscall.Kill(-pid, syscall.SIGCONT)
				syscall.Kill(-pid, syscall.SIGKILL)
			} else {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// The cleanup of a test ends what its server started, however far it
// escaped (a daemon in a session of its own, orphaned by a killed server),
// and nothing else: not even a process of ours whose command line names the
// server's state dir, as a kill by pattern would.
func TestHarnessCleanupEndsOnlyWhatTheServerStarted(t *testing.T) {
	s := startServer(t, serverOpts{})
	if s.group == nil {
		t.Skip("no cgroup v2 here: cleanup ends recorded PIDs only, and a daemon in its own session is not one")
	}
	dir := t.TempDir()
	res, err := s.c.Run(ctx(t), client.RunRequest{Mode: "stdio", Cwd: dir, Timeout: 0.2,
		Script: `setsid sh -c 'echo $$ > esc.tmp; mv esc.tmp esc; exec sleep 300' </dev/null >/dev/null 2>&1 & exec sleep 300`})
	if err != nil {
		t.Fatal(err)
	}
	var esc int
	fxEventually(t, 10*time.Second, "the daemon's pid", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "esc"))
		esc, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && esc > 0
	})
	var runner int
	fxEventually(t, 5*time.Second, "the runner's pid", func() bool { runner = fxRunnerPID(s, res.JobID); return runner != 0 })
	// A process of the test's own that a pattern on the state dir matches.
	// (sh stays, with these arguments, while it waits for sleep.)
	decoy := exec.Command("sh", "-c", "sleep 300; exit 0", "sh", "--state-dir", s.StateDir)
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { decoy.Process.Kill(); decoy.Wait() }()

	s.kill(syscall.SIGKILL) // runners outlive their server
	if !fxAlive(esc) || !fxAlive(runner) {
		t.Fatalf("daemon %d alive %v, runner %d alive %v after the server was killed: nothing left to clean up", esc, fxAlive(esc), runner, fxAlive(runner))
	}
	s.cleanupJobs()
	for _, p := range []int{esc, runner} {
		// SIGKILL lands at once, but the process may take a moment to go.
		for end := time.Now().Add(3 * time.Second); fxAlive(p) && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if fxAlive(p) {
			t.Errorf("%s survived the cleanup", fxProcDesc(p))
		}
	}
	if !fxAlive(decoy.Process.Pid) {
		t.Errorf("the cleanup killed %d, a process the server never started", decoy.Process.Pid)
	}
	if _, err := os.Stat(s.group.dir); !os.IsNotExist(err) {
		t.Errorf("the server's cgroup %s is still there (%v)", s.group.dir, err)
	}
}

// TestHarnessReapsStaleGroups: the groups of a test process that is gone
// (an interrupted run) are ended and removed at the next start; a group
// of a live process is left alone.
func TestHarnessReapsStaleGroups(t *testing.T) {
	mount, self := cgroup2Self()
	if mount == "" || os.Geteuid() != 0 {
		t.Skip("needs a writable cgroup v2 (root)")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := gone.Process.Pid
	if syscall.Kill(deadPID, 0) == nil {
		t.Skipf("PID %d was reused at once", deadPID)
	}
	parent := filepath.Join(mount, self)
	stale := filepath.Join(parent, fmt.Sprintf("e2e-%d-1", deadPID))
	live := filepath.Join(parent, fmt.Sprintf("e2e-%d-999999", os.Getpid()))
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skipf("cannot make a cgroup here: %v", err)
		}
	}
	defer syscall.Rmdir(live)
	defer syscall.Rmdir(stale)
	// A process left in the stale group, as a killed run leaves its runners.
	left := exec.Command("sleep", "300")
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	defer func() { left.Process.Kill(); <-exited }()
	if err := os.WriteFile(filepath.Join(stale, "cgroup.procs"), []byte(strconv.Itoa(left.Process.Pid)), 0); err != nil {
		t.Skipf("cannot move a process into a cgroup here: %v", err)
	}
	if n := reapStaleGroups(); n < 1 {
		t.Fatalf("reapStaleGroups ended %d groups, want the stale one", n)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the process in the stale group is still running")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale group %s is still there (%v)", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's group %s was removed: %v", live, err)
	}
}
