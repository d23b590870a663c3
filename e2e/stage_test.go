package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/runner"
)

// With --job-start stage, a warm runner's stage is shellctl-stage, the
// binary beside the runner's (started by a handle to it), not the
// runner's own binary again: its start pays none of the runner's package
// initialisation.
func TestStageIsItsOwnBinary(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--job-start", "stage"}})
	want := filepath.Join(binDir, runner.StageBinary)
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, stage := range warmStages(s.cmd.Process.Pid) {
			exe, err := os.Readlink("/proc/" + strconv.Itoa(stage) + "/exe")
			if err != nil {
				continue // ended, or not yet readable
			}
			if exe != want {
				t.Fatalf("the stage of a warm runner runs %s, want %s", exe, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no warm runner with a stage that exec'd within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// By default (linux/amd64) no stage is started at all: a warm runner has
// no child while it waits, and its job is its own child, confined.
func TestDirectStartHasNoStage(t *testing.T) {
	if !isolation.DirectSupported {
		t.Skip("this build starts every job through a stage")
	}
	s := startServer(t, serverOpts{})
	res, out := s.runDone(t, client.RunRequest{Script: "grep NoNewPrivs /proc/$$/status", Mode: "stdio"})
	if code(res) != 0 || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("the job: exit %d, %q: want it run with no_new_privs", code(res), out)
	}
	// Every warm runner, once started, waits with no child.
	deadline := time.Now().Add(30 * time.Second)
	for {
		warm, withChild := 0, 0
		for _, r := range childrenOf(s.cmd.Process.Pid) {
			raw, err := os.ReadFile("/proc/" + strconv.Itoa(r) + "/cmdline")
			if err != nil || !strings.Contains(string(raw), runner.PoolPlaceholder) {
				continue
			}
			warm++
			if len(childrenOf(r)) > 0 {
				withChild++
			}
		}
		if warm > 0 && withChild == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d warm runners, %d of them with a child (a stage)", warm, withChild)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := warmStages(s.cmd.Process.Pid); len(got) != 0 {
		t.Errorf("warm stages %v: want none", got)
	}
}

// An unknown --job-start is refused before anything starts, naming the
// value and the choices.
func TestJobStartFlagIsChecked(t *testing.T) {
	out, err := exec.Command(filepath.Join(binDir, "shellctl"), "serve", "--listen", "127.0.0.1:0",
		"--state-dir", filepath.Join(t.TempDir(), "state"), "--job-start", "fork").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--job-start "fork" is not one of direct, stage`) {
		t.Fatalf("serve --job-start fork: %v\n%s", err, out)
	}
}

// warmStages lists the children of the server's warm runners that have
// exec'd their stage (a child still between fork and execve shows the
// runner's arguments).
func warmStages(server int) []int {
	var out []int
	for _, r := range childrenOf(server) {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(r) + "/cmdline")
		if err != nil || !strings.Contains(string(raw), runner.PoolPlaceholder) {
			continue
		}
		for _, c := range childrenOf(r) {
			raw, err := os.ReadFile("/proc/" + strconv.Itoa(c) + "/cmdline")
			if err == nil && strings.Contains(string(raw), "\x00__stage\x00") {
				out = append(out, c)
			}
		}
	}
	return out
}

func childrenOf(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(raw)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// The server starts its runners with one P from their first instruction
// (GOMAXPROCS=1 in their environment, which holds nothing else of the
// server's but PATH), and no job sees that setting.
func TestRunnersStartWithOnePJobsDoNotSeeIt(t *testing.T) {
	s := startServer(t, serverOpts{})
	var environ []byte
	deadline := time.Now().Add(30 * time.Second)
	for environ == nil {
		for _, r := range childrenOf(s.cmd.Process.Pid) {
			raw, err := os.ReadFile("/proc/" + strconv.Itoa(r) + "/cmdline")
			if err != nil || !strings.Contains(string(raw), runner.PoolPlaceholder) {
				continue
			}
			// A runner is not dumpable: its environment is for root (ptrace rights) only.
			env, err := os.ReadFile("/proc/" + strconv.Itoa(r) + "/environ")
			if os.IsPermission(err) {
				t.Skipf("cannot read a runner's environment as uid %d: %v", os.Getuid(), err)
			}
			if err == nil {
				environ = env
				break
			}
		}
		if environ == nil && time.Now().After(deadline) {
			t.Fatal("no warm runner within 30 s")
		}
		if environ == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var got []string
	for _, kv := range strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00") {
		if !strings.HasPrefix(kv, "GORACE=") { // race-detector builds (make test-race) pass it on
			got = append(got, kv)
		}
	}
	want := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GOMAXPROCS=1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("a warm runner's environment is %q, want %q", got, want)
	}
	res, out := s.runDone(t, client.RunRequest{Script: "env", Mode: "stdio"})
	if code(res) != 0 {
		t.Fatalf("env exited %d: %s", code(res), out)
	}
	if strings.Contains(out, "GOMAXPROCS") {
		t.Fatalf("the job's environment has the runner's GOMAXPROCS:\n%s", out)
	}
}
