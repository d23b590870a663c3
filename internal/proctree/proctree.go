// Package proctree knows every process of one job and ends them all.
//
// A job's runner (shellctl-runner) makes one Tracker per job with NewTracker.
// Where the machine allows it the job gets its own cgroup v2 group: membership
// is exact (no pid walk, no pid reuse), cgroup.kill ends everything atomically,
// memory and pids limits apply and OOM kills are attributed. Otherwise the
// runner, which is always a child subreaper, treats all of its descendants as
// the job and walks /proc to find them.
//
// Ladder is the one way a job is ended on terminate, forced delete and limits.
package proctree

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Tracker kinds, as reported by Kind and Info.Kind.
const (
	KindCgroup2   = "cgroup2"
	KindSubreaper = "subreaper"
)

var (
	// ErrNotEmpty: processes of the job are still alive (Ladder after the
	// SIGKILL wait ran out; Close of a populated cgroup).
	ErrNotEmpty = errors.New("processes of the job remain")
	// ErrUnsupported: this system has no process tree tracking.
	ErrUnsupported = errors.New("process tree tracking is not supported on this system")
	// ErrNoCgroup: the tracker is not backed by a cgroup.
	ErrNoCgroup = errors.New("tracker has no cgroup")
)

// Tracker knows every process of one job. All methods are safe for concurrent
// use (the runner's reaper calls Notify while Ladder runs).
//
// Signal takes a syscall.Signal; unix.Signal is an alias of it, so unix.SIGTERM
// works, and this file builds on every platform.
type Tracker interface {
	// Kind is KindCgroup2 or KindSubreaper.
	Kind() string
	// Add puts the job's first process under tracking. cgroup: the process
	// (and any child it already forked) is moved into the job's group;
	// subreaper: remembered only, every descendant of the runner counts.
	Add(pid int) error
	// Pids lists the live processes of the job, sorted. Zombies are left out:
	// a zombie has exited, it only waits for its parent to reap it.
	Pids() ([]int, error)
	// Signal sends sig to every process of the job. After SIGTERM, SIGINT or
	// SIGHUP every process also gets SIGCONT, so a stopped one can act on it
	// (only SIGKILL acts on a stopped process by itself).
	Signal(sig syscall.Signal) error
	// Kill sends SIGKILL to every process of the job, including processes
	// forked while it runs (cgroup.kill, or repeated walks).
	Kill() error
	// WaitEmpty returns nil as soon as no process of the job is left, or
	// ctx's error. It waits on events (cgroup.events, Notify) with a short
	// fallback re-check, never a fixed sleep.
	WaitEmpty(ctx context.Context) error
	// Notify tells the tracker that the runner reaped a child.
	Notify()
	// Exempt keeps pid, a child of the runner that is not the job's (its
	// screen process), out of the job: it is not listed, signalled or
	// waited for. cgroup: nothing to do, it is not in the job's group;
	// subreaper: the process is named by its pid and start time, so a
	// process that gets its pid once it is gone is the job's again.
	Exempt(pid int) error
	// OOMKilled reports whether the kernel OOM-killed a process of the job
	// (cgroup with the memory controller only).
	OOMKilled() bool
	// Close removes the job's cgroup; call it once the job is empty.
	// Closing an already closed tracker is a no-op.
	Close() error
}

// Options configure NewTracker.
type Options struct {
	// Name is unique per job ("shellctl-<stateDirHash>-<jobID>"); it names
	// the cgroup directory, so it must be one path element.
	Name string
	// Parent is an optional cgroup v2 path (as in /proc/self/cgroup, e.g.
	// "/system.slice/shellctl.service/jobs") under which job groups are made,
	// created if missing. Empty: the runner's own cgroup. A per-server parent
	// without processes of its own is what lets memory and pids limits work
	// under systemd: cgroup v2 forbids enabling controllers for the children
	// of a (non-root) group that has processes itself.
	Parent string
	// MemoryMax is memory.max in bytes, 0 = none. Needs the memory
	// controller in cgroup v2; Info says whether it was applied.
	MemoryMax int64
	// PidsMax is pids.max, 0 = none. Needs the pids controller in cgroup v2.
	PidsMax int64
	// DisableCgroup forces the subreaper walk (tests, machines where cgroup
	// writes fail).
	DisableCgroup bool
}

// Info says what NewTracker applied and, in Why, why something was not.
type Info struct {
	Kind               string
	Path               string // cgroup directory, "" for the subreaper kind
	MemoryLimitApplied bool
	PidsLimitApplied   bool
	Why                string
}

// Bounds of the ladder and of the waits.
const (
	// emptyRecheck is the fallback re-check of WaitEmpty. Events (inotify on
	// cgroup.events, Notify from the reaper) normally answer at once; the
	// re-check only covers what no event reports, e.g. a process that was
	// stopped and is killed while the runner sees no SIGCHLD. Short enough
	// that a missed event costs a tenth of a second, long enough to cost
	// nothing while a job runs.
	emptyRecheck = 100 * time.Millisecond
	// killWait bounds the wait after SIGKILL. SIGKILL cannot be caught; a
	// process only outlives it while in uninterruptible sleep (a hung NFS
	// server, a stuck device), and then we report it instead of hanging.
	killWait = 5 * time.Second
	// killRecheck is how often SIGKILL is re-sent while waiting: it catches a
	// fork that raced the kill walk (subreaper kind, or kernels without
	// cgroup.kill).
	killRecheck = 250 * time.Millisecond
)

// Ladder ends the job: SIGINT to the job's processes in fgPgrp (the
// terminal's foreground process group, 0 if none) and SIGTERM to the tree (followed by SIGCONT, so
// stopped processes act on it); when grace runs out, SIGKILL to everything left. It returns as
// soon as the tree is empty, and returns nil only when no process of the job
// remains. On an empty tree it returns nil at once, so a second Ladder is a
// no-op. grace <= 0 goes straight to SIGKILL. ctx bounds the whole ladder: a
// cancelled ctx stops it early with ctx's error (processes may remain).
func Ladder(ctx context.Context, t Tracker, fgPgrp int, grace time.Duration) error {
	pids, err := t.Pids()
	if err != nil {
		return fmt.Errorf("list job processes: %w", err)
	}
	if len(pids) == 0 {
		return nil
	}
	var sigErr error
	if grace > 0 {
		if fgPgrp > 0 {
			// The group id comes from tcgetpgrp on the job's terminal, but
			// the job chooses the foreground (tcsetpgrp): it may have
			// handed it to a group that is not the job's (its runner's).
			// Only the job's own processes in that group get the SIGINT
			// (SignalGroup), never kill(-fgPgrp).
			if _, err := SignalGroup(t, fgPgrp, syscall.SIGINT); err != nil {
				sigErr = fmt.Errorf("sigint foreground group %d: %w", fgPgrp, err)
			}
		}
		if err := t.Signal(syscall.SIGTERM); err != nil {
			sigErr = errors.Join(sigErr, fmt.Errorf("sigterm job: %w", err))
		}
		gctx, cancel := context.WithTimeout(ctx, grace)
		err := t.WaitEmpty(gctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("end job during grace: %w", ctx.Err())
		}
	}
	deadline := time.Now().Add(killWait)
	for {
		if err := t.Kill(); err != nil {
			sigErr = errors.Join(sigErr, fmt.Errorf("sigkill job: %w", err))
		}
		wctx, cancel := context.WithTimeout(ctx, min(killRecheck, time.Until(deadline)))
		err := t.WaitEmpty(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("end job after sigkill: %w", ctx.Err())
		}
		if !time.Now().Before(deadline) {
			left, _ := t.Pids()
			return errors.Join(fmt.Errorf("%w %s after sigkill: pids %v", ErrNotEmpty, killWait, left), sigErr)
		}
	}
}
