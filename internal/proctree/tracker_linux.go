//go:build linux

package proctree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func signalGroup(pgrp int, sig syscall.Signal) error { return unix.Kill(-pgrp, sig) }

// ---- cgroup v2 ----

type cgroupTracker struct {
	notifier
	dir string

	mu     sync.Mutex
	closed bool
}

func newCgroupTracker(opts Options) (*cgroupTracker, Info, error) {
	parent, err := parentDir(opts.Parent)
	if err != nil {
		return nil, Info{}, err
	}
	var why []string
	mem, pids := opts.MemoryMax > 0, opts.PidsMax > 0
	// Controllers must be enabled in the parent before the child exists to
	// get its memory.* / pids.* files. This is the only step with a side
	// effect outside the job (siblings get the controller too), so it is
	// only tried when a limit is asked for.
	if mem {
		if err := enableController(parent, "memory"); err != nil {
			mem = false
			why = append(why, "memory limit not applied: "+err.Error())
		}
	}
	if pids {
		if err := enableController(parent, "pids"); err != nil {
			pids = false
			why = append(why, "pids limit not applied: "+err.Error())
		}
	}
	dir := parent + "/" + opts.Name
	if err := unix.Mkdir(dir, 0o755); err != nil {
		if !errors.Is(err, unix.EEXIST) {
			return nil, Info{}, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		// Names are unique per job, so an existing group was left by a
		// runner of this job that died before Close. Reuse it only if it is
		// empty (rmdir fails otherwise) so no stranger's process is counted.
		if err := unix.Rmdir(dir); err != nil {
			return nil, Info{}, fmt.Errorf("remove stale cgroup %s: %w", dir, err)
		}
		if err := unix.Mkdir(dir, 0o755); err != nil {
			return nil, Info{}, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	info := Info{Kind: KindCgroup2, Path: dir}
	if mem {
		if err := writeFile(dir+"/memory.max", strconv.FormatInt(opts.MemoryMax, 10)); err != nil {
			why = append(why, "memory limit not applied: "+err.Error())
		} else {
			info.MemoryLimitApplied = true
		}
	}
	if pids {
		if err := writeFile(dir+"/pids.max", strconv.FormatInt(opts.PidsMax, 10)); err != nil {
			why = append(why, "pids limit not applied: "+err.Error())
		} else {
			info.PidsLimitApplied = true
		}
	}
	info.Why = strings.Join(why, "; ")
	return &cgroupTracker{dir: dir}, info, nil
}

// parentDir finds the directory under which the job's group is made: the
// cgroup2 mount from /proc/self/mountinfo (at /sys/fs/cgroup on a unified
// system, /sys/fs/cgroup/unified on a hybrid one) joined with parent, or with
// the "0::" path of /proc/self/cgroup when parent is empty.
func parentDir(parent string) (string, error) {
	mi, err := readFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	path := parent
	if path == "" {
		cg, err := readFile("/proc/self/cgroup")
		if err != nil {
			return "", fmt.Errorf("read own cgroup: %w", err)
		}
		if path, err = parseCgroupV2Path(cg); err != nil {
			return "", err
		}
	}
	dir, err := cgroupDir(parseCgroup2Mounts(mi), path)
	if err != nil {
		return "", err
	}
	if parent != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("create parent cgroup: %w", err)
		}
	}
	return dir, nil
}

// enableController makes controller c available to the children of parent.
func enableController(parent, c string) error {
	sub, err := readFile(parent + "/cgroup.subtree_control")
	if err != nil {
		return fmt.Errorf("read subtree_control: %w", err)
	}
	if hasWord(sub, c) {
		return nil
	}
	avail, err := readFile(parent + "/cgroup.controllers")
	if err != nil {
		return fmt.Errorf("read controllers: %w", err)
	}
	if !hasWord(avail, c) {
		return fmt.Errorf("%s controller not available in %s (bound to cgroup v1 on a hybrid layout, or not delegated)", c, parent)
	}
	if err := writeFile(parent+"/cgroup.subtree_control", "+"+c); err != nil {
		if errors.Is(err, unix.EBUSY) {
			// cgroup v2 "no internal processes": a non-root group that has
			// processes itself (here: the runner) cannot hand domain
			// controllers to its children.
			return fmt.Errorf("cannot enable %s in %s: it has processes of its own; give Options.Parent an empty group", c, parent)
		}
		return fmt.Errorf("enable %s in %s: %w", c, parent, err)
	}
	return nil
}

func (c *cgroupTracker) Kind() string { return KindCgroup2 }

// Add moves pid into the group, then every other descendant of the runner.
//
// Race: the script runs before Add is called and may already have forked;
// those children were born in the runner's group, and if their parent has
// exited (a double fork) they are children of the runner now, not of pid. So
// Add moves the runner's whole tree, on the same premise as the subreaper
// kind: the runner's descendants are the job's. Moving a process is atomic
// with respect to its forks (the kernel holds cgroup_threadgroup_rwsem
// across both), so a child forked after its parent moved is born inside, and
// one pass over the tree, parents before children, is complete. A process
// that exits meanwhile (ESRCH) needs no tracking. OpenCgroupFD avoids the
// question altogether: the job's first process is born inside the group.
func (c *cgroupTracker) Add(pid int) error {
	if err := writeFile(c.dir+"/cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("move pid %d into %s: %w", pid, c.dir, err)
	}
	// What the job forked before it was moved is still outside, and a
	// process of it whose parent exits while we walk is reparented to us
	// (we are its subreaper) after we may have read our own children: so
	// the walk from ourselves is repeated until a whole pass finds nothing
	// outside the group. Each pass can only find processes forked before
	// their ancestor was moved (later forks are born inside), so it ends.
	// (A one-pass walk lost a double-forked daemon about one run in four.)
	self := os.Getpid()
	base := filepath.Base(c.dir) // unique: shellctl-<runner pid>-<time>
	for {
		moved := 0
		todo := childrenOf(self, nil)
		for len(todo) > 0 {
			p := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if !inCgroup(p, base) {
				if err := writeFile(c.dir+"/cgroup.procs", strconv.Itoa(p)); err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("move pid %d into %s: %w", p, c.dir, err)
				}
				moved++
			}
			todo = childrenOf(p, todo)
		}
		if moved == 0 {
			return nil
		}
	}
}

// inCgroup reports whether pid's cgroup v2 path (from /proc/<pid>/cgroup)
// is the group named base or beneath it. A process that is gone counts as
// inside.
func inCgroup(pid int, base string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return strings.HasSuffix(p, "/"+base) || strings.Contains(p, "/"+base+"/")
		}
	}
	return false
}

// members lists the pids in the group and its sub-groups (a job running as
// root may make its own).
func (c *cgroupTracker) members() ([]int, error) {
	var pids []int
	dirs := []string{c.dir}
	for len(dirs) > 0 {
		d := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		data, err := readFile(d + "/cgroup.procs")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && d != c.dir {
				continue // sub-group removed meanwhile
			}
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil // closed: Close only succeeds on an empty group
			}
			return nil, fmt.Errorf("read %s/cgroup.procs: %w", d, err)
		}
		for f := range strings.FieldsSeq(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		dirs = append(dirs, subdirs(d)...)
	}
	return pids, nil
}

// list returns the live members with their stat. cgroup.procs can still list
// a zombie (e.g. a group leader whose threads are exiting); it is gone.
func (c *cgroupTracker) list() ([]procStat, error) {
	pids, err := c.members()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, statBufSize)
	out := make([]procStat, 0, len(pids))
	for _, pid := range pids {
		st, err := readStat(pid, buf)
		if err != nil || st.gone() {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func (c *cgroupTracker) Pids() ([]int, error) { return pidsOf(c.list()) }

func (c *cgroupTracker) Signal(sig syscall.Signal) error {
	return signalWalk(c.list, sig, 1, signalRounds)
}

// Kill writes cgroup.kill (Linux 5.14+): the kernel kills every process of
// the group and its sub-groups, and a fork racing it is killed as well, so
// one write is enough. Older kernels get the repeated walk.
func (c *cgroupTracker) Kill() error {
	err := writeFile(c.dir+"/cgroup.kill", "1")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("write %s/cgroup.kill: %w", c.dir, err)
	}
	if _, serr := os.Stat(c.dir); serr != nil {
		return nil // closed: nothing left to kill
	}
	return signalWalk(c.list, unix.SIGKILL, 2, killRounds)
}

// WaitEmpty watches cgroup.events with inotify: the kernel signals a modify
// event when "populated" changes, and populated drops to 0 as the last
// process exits (before it is reaped), which is when zombies count as gone.
func (c *cgroupTracker) WaitEmpty(ctx context.Context) error {
	stop := c.watchEvents()
	defer stop()
	return c.waitEmpty(ctx, c.empty)
}

func (c *cgroupTracker) empty() (bool, error) {
	data, err := readFile(c.dir + "/cgroup.events")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return true, nil // closed: Close only succeeds on an empty group
		}
		return false, fmt.Errorf("read %s/cgroup.events: %w", c.dir, err)
	}
	n, ok := parseKeyed(data, "populated")
	if !ok {
		return false, fmt.Errorf("no populated key in %s/cgroup.events", c.dir)
	}
	return n == 0, nil
}

// watchEvents turns inotify events on cgroup.events into Notify calls until
// the returned stop is called. Best effort: without inotify the fallback
// re-check still answers.
func (c *cgroupTracker) watchEvents() (stop func()) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return func() {}
	}
	if _, err := unix.InotifyAddWatch(fd, c.dir+"/cgroup.events", unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return func() {}
	}
	// A non-blocking fd in an os.File is served by the runtime poller, so the
	// read below parks the goroutine, and Close wakes it.
	f := os.NewFile(uintptr(fd), "inotify:"+c.dir)
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			c.Notify()
		}
	}()
	return func() { f.Close() }
}

func (c *cgroupTracker) OOMKilled() bool {
	data, err := readFile(c.dir + "/memory.events")
	if err != nil {
		return false
	}
	n, _ := parseKeyed(data, "oom_kill")
	return n > 0
}

func (c *cgroupTracker) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if err := removeCgroup(c.dir); err != nil {
		return err
	}
	c.closed = true
	return nil
}

// removeCgroup removes dir and any sub-groups the job made, deepest first.
func removeCgroup(dir string) error {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	subs := subdirs(dir)
	if len(subs) == 0 {
		return fmt.Errorf("remove cgroup %s: %w", dir, ErrNotEmpty)
	}
	for _, s := range subs {
		if err := removeCgroup(s); err != nil {
			return err
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.EBUSY) {
			err = ErrNotEmpty
		}
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

func subdirs(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out
}

// ---- subreaper walk ----

// subreaperTracker counts every descendant of the runner as the job's. The
// runner is a child subreaper, so a process whose parent exits is
// re-parented to the runner (or to a subreaper below it), never out of the
// tree; setsid and process groups do not change the parent chain.
type subreaperTracker struct {
	notifier
	self int

	mu    sync.Mutex
	first int
}

func (s *subreaperTracker) Kind() string { return KindSubreaper }

func (s *subreaperTracker) Add(pid int) error {
	s.mu.Lock()
	s.first = pid
	s.mu.Unlock()
	return nil
}

// list walks /proc once and returns the live descendants of the runner.
//
// Races, and why the callers repeat walks:
//   - The walk is not atomic. A process can fork after we read it (its child
//     shows up in the next walk), and a parent can exit and be reaped between
//     the directory listing and the read of its child, so the child still
//     names a parent that is no longer there and is missed in this walk; it
//     has been re-parented to the runner by then and the next walk finds it.
//     So Kill repeats until two consecutive walks find no new process.
//   - Pid reuse: a pid is only taken as the job's if its ppid chain leads to
//     the runner in this walk, and signalProc pins it with a pidfd and checks
//     its start time before signalling, so a pid recycled by an unrelated
//     process after the walk is never signalled.
//   - Zombies (Z) count as gone: they have exited and hold nothing but their
//     exit status; they have no children (those were re-parented on exit).
func (s *subreaperTracker) list() ([]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	buf := make([]byte, statBufSize)
	all := make(map[int]procStat, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if st, err := readStat(pid, buf); err == nil {
			all[pid] = st
		}
	}
	// desc memoises "pid descends from the runner"; chains are followed
	// iteratively and bounded by the number of processes, since a
	// non-atomic snapshot could in theory show a loop.
	desc := map[int]bool{s.self: true}
	var chain []int
	isDesc := func(pid int) bool {
		chain = chain[:0]
		p, res := pid, false
		for range len(all) + 1 {
			if v, ok := desc[p]; ok {
				res = v
				break
			}
			st, ok := all[p]
			if !ok || p <= 1 {
				break
			}
			chain = append(chain, p)
			p = st.ppid
		}
		for _, q := range chain {
			desc[q] = res
		}
		return res
	}
	var out []procStat
	for pid, st := range all {
		if pid != s.self && !st.gone() && isDesc(pid) {
			out = append(out, st)
		}
	}
	return out, nil
}

func (s *subreaperTracker) Pids() ([]int, error) { return pidsOf(s.list()) }

func (s *subreaperTracker) Signal(sig syscall.Signal) error {
	return signalWalk(s.list, sig, 1, signalRounds)
}

func (s *subreaperTracker) Kill() error {
	return signalWalk(s.list, unix.SIGKILL, 2, killRounds)
}

// WaitEmpty is woken by Notify: the last process of the tree to exit is
// always a child of the runner (everything else was re-parented to it), so
// the runner's reap of it is the event.
func (s *subreaperTracker) WaitEmpty(ctx context.Context) error {
	return s.waitEmpty(ctx, func() (bool, error) {
		// Two empty walks in a row, as Kill requires: one walk can miss a
		// process forked while it read /proc.
		for range 2 {
			procs, err := s.list()
			if err != nil || len(procs) > 0 {
				return false, err
			}
		}
		return true, nil
	})
}

func (s *subreaperTracker) OOMKilled() bool { return false }
func (s *subreaperTracker) Close() error    { return nil }

// ---- shared ----

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

// childrenOf appends the children of pid (all its threads' children files;
// needs CONFIG_PROC_CHILDREN, else none are found) to out.
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
