package proctree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unreapedHelper is the "unreaped" role: as a runner in subreaper mode, it
// starts a child that exits, and reports what the tree holds before and
// after its reap.
func unreapedHelper() int {
	tr, _, err := NewTracker(Options{DisableCgroup: true})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s := tr.(*subreaperTracker)
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// Its exit, without reaping it.
	var si unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &si, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		fmt.Println("error waitid", err)
		return 1
	}
	has := func(procs []procStat, err error) bool {
		return err == nil && slices.ContainsFunc(procs, func(p procStat) bool { return p.pid == pid })
	}
	fmt.Println("list", has(s.list()), "walk", has(s.walk(true)))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err = tr.WaitEmpty(ctx)
	cancel()
	fmt.Println("waitempty-before-reap", errors.Is(err, context.DeadlineExceeded))
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- tr.WaitEmpty(ctx)
	}()
	time.Sleep(20 * time.Millisecond) // WaitEmpty is waiting by now (it also looks first)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		fmt.Println("error wait4", err)
		return 1
	}
	tr.Notify() // as the runner's reaper does after each reap
	fmt.Println("waitempty-after-reap", <-done == nil, "walk", has(s.walk(true)))
	return 0
}

// In subreaper mode, a child of the runner that exited counts for
// WaitEmpty until the runner reaped it, so a job's end is told only when
// not even a zombie of it is left; the other walks (signals, Pids) skip it.
func TestWaitEmptyWaitsForTheReap(t *testing.T) {
	if _, err := os.Stat("/bin/true"); err != nil {
		t.Skip("needs /bin/true")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperRole+"=unreaped")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	want := "list false walk true\nwaitempty-before-reap true\nwaitempty-after-reap true walk false\n"
	if got := string(out); got != want {
		t.Fatalf("helper said:\n%s\nwant:\n%s", strings.TrimSpace(got), want)
	}
}
