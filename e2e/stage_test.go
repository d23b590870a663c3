package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
)

// A warm runner's stage is shellctl-stage, the binary beside the runner's
// (started by a handle to it), not the runner's own binary again: its
// start pays none of the runner's package initialisation.
func TestStageIsItsOwnBinary(t *testing.T) {
	s := startServer(t, serverOpts{})
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
