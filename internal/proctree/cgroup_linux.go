package proctree

// The cgroup v2 tracker: the job's own group, born into by the job, ended
// with cgroup.kill, its limits and OOM kills read from the group.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

type cgroupTracker struct {
	notifier
	dir string
	// lockFD holds an exclusive flock on the group's directory for as
	// long as the runner lives: the sweep (SweepGroups) takes a group for
	// dead only when it can take that lock, which no PID namespace hides
	// and no pid reuse fakes. -1 when the lock could not be taken.
	lockFD int

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
	lockFD, err := makeLockedGroup(dir)
	if err != nil {
		return nil, Info{}, err
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
	return &cgroupTracker{dir: dir, lockFD: lockFD}, info, nil
}

// makeLockedGroup makes the group dir and takes its lock. A sweep of
// another runner may take the lock of the new, empty group between the
// mkdir and our flock and remove it: then the group is made again.
func makeLockedGroup(dir string) (int, error) {
	for try := 0; ; try++ {
		if err := unix.Mkdir(dir, 0o755); err != nil {
			if !errors.Is(err, unix.EEXIST) {
				return -1, fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			// Names are unique per runner, so an existing group was
			// left by a runner that died before Close. Reuse it only if it
			// is empty (rmdir fails otherwise) so no stranger's process is
			// counted.
			if err := unix.Rmdir(dir); err != nil {
				return -1, fmt.Errorf("remove stale cgroup %s: %w", dir, err)
			}
			continue
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("open cgroup %s: %w", dir, err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("lock cgroup %s: %w", dir, err)
		}
		var a, b unix.Stat_t
		if unix.Fstat(fd, &a) == nil && unix.Stat(dir, &b) == nil && a.Ino == b.Ino {
			return fd, nil
		}
		unix.Close(fd) // swept before we held it
		if try >= maxLockTries {
			return -1, fmt.Errorf("create cgroup %s: removed by a sweep %d times in a row", dir, try+1)
		}
	}
}

// maxLockTries bounds makeLockedGroup: a sweep removes a new group only
// in the instant before it is locked, so a second try almost never loses.
const maxLockTries = 8

// SweepGroups removes the groups under parent whose names start with
// prefix and whose runner is gone: a runner holds its group's lock while
// it lives (makeLockedGroup), so a group whose lock can be taken has no
// runner. A group still holding processes (what an ended job left
// running) is not empty, and rmdir refuses it until they are gone.
// Returns how many were removed.
func SweepGroups(parent, prefix string) int {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := parent + "/" + e.Name()
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil && removeCgroup(dir) == nil {
			n++
		}
		unix.Close(fd)
	}
	return n
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
	for pass := 0; pass < maxAddPasses; pass++ {
		moved := 0
		todo := childrenOf(self, nil)
		for len(todo) > 0 {
			p := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if !inCgroup(p, base) {
				err := writeFile(c.dir+"/cgroup.procs", strconv.Itoa(p))
				if err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("move pid %d into %s: %w", p, c.dir, err)
				}
				if inCgroup(p, base) {
					moved++ // moved now; a gone one is not counted
				}
			}
			todo = childrenOf(p, todo)
		}
		if moved == 0 {
			return nil
		}
	}
	return nil
}

// maxAddPasses bounds Add's walks: each pass that moves something can only
// be followed by one that finds what was reparented meanwhile.
const maxAddPasses = 16

// inCgroup reports whether pid's cgroup v2 path (from /proc/<pid>/cgroup)
// is the group named base or beneath it. A process that is gone, or a
// zombie (which cannot be moved), counts as inside.
func inCgroup(pid int, base string) bool {
	if st, err := readStat(pid, nil); err != nil || st.state == 'Z' {
		return true
	}
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
	// Already empty, as at the end of most jobs: no watch to set up.
	if ok, err := c.empty(); err != nil || ok {
		return err
	}
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

// Exempt: the runner's other children are not in the job's group.
func (c *cgroupTracker) Exempt(int) error { return nil }

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
	if c.lockFD >= 0 {
		unix.Close(c.lockFD)
		c.lockFD = -1
	}
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
