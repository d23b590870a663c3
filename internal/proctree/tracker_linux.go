//go:build linux

package proctree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Walk bounds.
const (
	// signalRounds bounds the walks of Signal. It stops after the first walk
	// that finds no new process; the repeats only catch forks racing the
	// walk, and whatever still slips past gets SIGKILL when grace runs out.
	signalRounds = 4
	// killRounds bounds the walks of one Kill. Kill stops after two
	// consecutive walks find no new process (see signalWalk); a fork bomb
	// could keep it finding new ones forever, so it gives up after this many
	// and Ladder calls Kill again every killRecheck.
	killRounds = 64
	// statBufSize holds a /proc/<pid>/stat line up to starttime (field 22)
	// with room to spare: comm is at most 16 bytes and each field a number.
	statBufSize = 1024
)

// NewTracker makes the tracker of one job. It is called in the runner,
// before the job's process starts. It always makes the calling process a
// child subreaper: orphans of the job (double forks, the `nohup … &` left by
// a shell that exited) are re-parented to the runner instead of init, so the
// runner reaps them and the subreaper walk still sees them.
//
// Then it tries a cgroup v2 group (Options.Parent, else a child of the
// runner's own v2 cgroup) and falls back to the subreaper walk; Info says
// which, what limits were applied, and why not. The error is non-nil only
// for a bad Options.Name or if the subreaper cannot be set.
//
// Cost on the hot path (cgroup kind, no limits): prctl, two small /proc
// reads (mountinfo, cgroup) and one mkdir; Close is one rmdir.
func NewTracker(opts Options) (Tracker, Info, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, Info{}, fmt.Errorf("set child subreaper: %w", err)
	}
	var why []string
	if opts.DisableCgroup {
		why = append(why, "cgroup disabled by option")
	} else {
		if err := validName(opts.Name); err != nil {
			return nil, Info{}, err
		}
		c, info, err := newCgroupTracker(opts)
		if err == nil {
			return c, info, nil
		}
		why = append(why, "no cgroup: "+err.Error())
	}
	if opts.MemoryMax > 0 {
		why = append(why, "memory limit not applied: needs a cgroup")
	}
	if opts.PidsMax > 0 {
		why = append(why, "pids limit not applied: needs a cgroup")
	}
	return &subreaperTracker{self: os.Getpid()}, Info{Kind: KindSubreaper, Why: strings.Join(why, "; ")}, nil
}

// OpenCgroupFD opens the job's cgroup directory for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}: the process is then
// born inside the group (clone3 CLONE_INTO_CGROUP), so not even a fork made
// before Add could escape. The caller closes fd after the start. ErrNoCgroup
// for the subreaper kind.
func OpenCgroupFD(t Tracker) (int, error) {
	c, ok := t.(*cgroupTracker)
	if !ok {
		return -1, ErrNoCgroup
	}
	fd, err := unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open cgroup %s: %w", c.dir, err)
	}
	return fd, nil
}

// SignalGroup sends sig to the processes of the job t tracks that are in
// process group pgrp, each through a pidfd and only after it was checked to
// be the process the walk found, still in that group: never kill(-pgrp). A
// group number is only a number: once the job's processes have left the
// group (a setsid child, a leader that exited), any process can take it
// (pid reuse), and the terminal's foreground can be handed by the job to a
// group that is not the job's. It returns how many processes were
// signalled; none with a nil error means no process of the job is in the
// group.
//
// Only sig is sent (no SIGCONT after it, unlike Signal): a signal asked for
// on request reaches the group as kill(2) would have sent it.
func SignalGroup(t Tracker, pgrp int, sig syscall.Signal) (int, error) {
	if pgrp <= 0 {
		return 0, nil
	}
	l, ok := t.(interface{ list() ([]procStat, error) })
	if !ok {
		return 0, ErrUnsupported
	}
	seen := make(map[procKey]struct{})
	var errs []error
	// A fork racing the walk is caught by the next one; a walk that finds
	// nothing new ends it (as Signal does).
	for range signalRounds {
		procs, err := l.list()
		if err != nil {
			return len(seen), errors.Join(append(errs, err)...)
		}
		fresh := 0
		for _, p := range procs {
			k := procKey{p.pid, p.start}
			if _, done := seen[k]; done || p.pgrp != pgrp {
				continue
			}
			sent, err := signalInGroup(p, pgrp, sig)
			if err != nil {
				errs = append(errs, fmt.Errorf("signal %v to pid %d: %w", sig, p.pid, err))
			}
			if sent {
				seen[k] = struct{}{}
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	return len(seen), errors.Join(errs...)
}

// signalInGroup sends sig to the process p describes when, pinned by a
// pidfd, it is still that process (its start time) and still in pgrp.
func signalInGroup(p procStat, pgrp int, sig syscall.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, err // ENOSYS included: no pidfd, no signal by number
	}
	defer unix.Close(fd)
	cur, err := readStat(p.pid, nil)
	if err != nil || cur.start != p.start || cur.pgrp != pgrp || cur.gone() {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// ---- cgroup v2 ----

// notifier wakes WaitEmpty callers. Notify closes the current channel; the
// channel is made lazily, so Notify with no waiter costs a lock.
type notifier struct {
	nmu sync.Mutex
	ch  chan struct{}
}

func (n *notifier) Notify() {
	n.nmu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.nmu.Unlock()
}

func (n *notifier) wake() <-chan struct{} {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// waitEmpty checks empty on every event and every emptyRecheck. The wake
// channel is taken before the check, so an event between the check and the
// select is not lost.
func (n *notifier) waitEmpty(ctx context.Context, empty func() (bool, error)) error {
	var timer *time.Timer
	for {
		ch := n.wake()
		ok, err := empty()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(emptyRecheck)
			defer timer.Stop()
		} else {
			timer.Reset(emptyRecheck)
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type procKey struct {
	pid   int
	start uint64
}

// signalWalk sends sig to every process list returns, repeating the walk to
// catch processes forked meanwhile, until quiet consecutive walks find no
// process it has not signalled yet, or after maxRounds walks. A process that
// already got SIGKILL cannot fork any more (fork fails with a fatal signal
// pending), so "nothing new twice" means no fork raced the kill.
func signalWalk(list func() ([]procStat, error), sig syscall.Signal, quiet, maxRounds int) error {
	seen := make(map[procKey]struct{})
	var errs []error
	calm := 0
	for range maxRounds {
		procs, err := list()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		fresh := 0
		for _, p := range procs {
			k := procKey{p.pid, p.start}
			if _, ok := seen[k]; ok {
				continue
			}
			seen[k] = struct{}{}
			fresh++
			if err := signalProc(p, sig); err != nil {
				errs = append(errs, fmt.Errorf("signal %v to pid %d: %w", sig, p.pid, err))
			}
		}
		if fresh > 0 {
			calm = 0
			continue
		}
		if calm++; calm >= quiet {
			break
		}
	}
	return errors.Join(errs...)
}

// signalProc sends sig to the process p describes, and only to it.
//
// Pid reuse: the pidfd pins whatever process had p.pid when it was opened.
// If the start time read after opening still matches the walk, that process
// is the one of the walk, and signals through the pidfd reach it and nothing
// else, even if it exits and its pid is recycled meanwhile.
//
// Stopped processes: only SIGKILL acts on a stopped process; any other
// signal, even one whose default action is to terminate, stays pending until
// SIGCONT. So SIGTERM/SIGINT/SIGHUP are followed by SIGCONT — to every
// process, not only those in state T: a stop can be pending but not yet in
// effect (e.g. `kill -STOP` hit a just-forked child that has not run yet and
// has signals blocked), the process then reads as R or D and would stop
// right after our SIGTERM. Generating SIGCONT discards pending stop signals,
// which closes that window. (Seen as a flaky "stopped processes" test that
// waited the full grace.)
func signalProc(p procStat, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		if errors.Is(err, unix.ENOSYS) { // kernel before 5.3
			return signalByPid(p, sig)
		}
		return err
	}
	defer unix.Close(fd)
	cur, err := readStat(p.pid, nil)
	if err != nil || cur.start != p.start || cur.gone() {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return err
	}
	if wakesStopped(sig) {
		if err := unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// signalByPid is signalProc without pidfds: the start time is checked just
// before kill, which leaves a window of a few microseconds for reuse.
func signalByPid(p procStat, sig syscall.Signal) error {
	cur, err := readStat(p.pid, nil)
	if err != nil || cur.start != p.start || cur.gone() {
		return nil
	}
	if err := unix.Kill(p.pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	if wakesStopped(sig) {
		if err := unix.Kill(p.pid, unix.SIGCONT); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

func wakesStopped(sig syscall.Signal) bool {
	return sig == unix.SIGTERM || sig == unix.SIGINT || sig == unix.SIGHUP
}

func pidsOf(procs []procStat, err error) ([]int, error) {
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	slices.Sort(pids)
	return pids, nil
}

// readStat reads /proc/<pid>/stat into buf (nil: a stack buffer).
func readStat(pid int, buf []byte) (procStat, error) {
	if buf == nil {
		var b [statBufSize]byte
		buf = b[:]
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, err
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return procStat{}, err
	}
	return parseStat(buf[:n])
}

// ChildrenOf appends the children of pid (all its threads' children
// files; needs CONFIG_PROC_CHILDREN, else none are found) to out.
func ChildrenOf(pid int, out []int) []int { return childrenOf(pid, out) }

func childrenOf(pid int, out []int) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(base)
	if err != nil {
		return out
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	for _, tid := range tids {
		data, err := readFile(base + "/" + tid + "/children")
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// writeFile writes s to an existing (cgroupfs) file in one write, so the
// kernel's error for that value comes back as the error.
func writeFile(path, s string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte(s))
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// readFile reads a small /proc or cgroupfs file with plain open/read/close.
// os.ReadFile would also fstat it and register it with the runtime poller
// (four more syscalls per file), which shows on the per-job hot path.
func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
