// Package reaper is the one collector of exit statuses in a process that
// is a child subreaper or PID 1: every child that ends is reaped here, by
// wait4(-1), and the status of a child started through Start is handed to
// the one who started it. Nothing else in the process may wait for a child
// (os/exec's Wait among them): the reaper would take its status first.
//
// Why one reaper: a subreaper, and PID 1 above all, adopts every orphan of
// its tree (a killed runner's job, a daemon a job left behind), and must
// collect them or they stay zombies. Waiting only for the children one
// knows by pid needs a list of children the kernel may not offer
// (/proc/<pid>/task/*/children exists only with CONFIG_PROC_CHILDREN), and
// waiting for "every child but mine" races with the owners' own waits.
package reaper

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Exit is how a child ended.
type Exit struct {
	Pid    int
	Status unix.WaitStatus
}

var (
	once sync.Once
	// mu is held across a Start's fork and its registration: the loop,
	// which takes mu after wait4 answers, cannot miss an owner.
	mu      sync.Mutex
	waiters = map[int]chan Exit{}
	orphans atomic.Int64
)

// Ensure starts the reaper (once per process): from then on every child of
// the process is reaped when it ends.
func Ensure() {
	once.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, unix.SIGCHLD)
		go loop(ch)
	})
}

func loop(ch chan os.Signal) {
	for {
		// The first pass collects what ended before Notify took effect;
		// SIGCHLDs coalesce, so each pass takes every child that is done.
		reapAll()
		<-ch
	}
}

func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no child; 0: none has ended
		}
		mu.Lock()
		w := waiters[pid]
		delete(waiters, pid)
		mu.Unlock()
		if w == nil {
			orphans.Add(1)
			continue
		}
		w <- Exit{Pid: pid, Status: ws}
	}
}

// Start starts cmd and returns a channel that receives its exit once it is
// reaped. The caller must not call cmd.Wait; it should call
// cmd.Process.Release once the exit arrived. cmd's Stdout and Stderr, if
// set, must be *os.File: no copying goroutine waits on them.
func Start(cmd *exec.Cmd) (<-chan Exit, error) {
	Ensure()
	mu.Lock()
	defer mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := make(chan Exit, 1)
	waiters[cmd.Process.Pid] = w
	return w, nil
}

// Orphans counts the children reaped that no Start owned: adopted
// orphans, and children a subreaper inherited.
func Orphans() int64 { return orphans.Load() }
