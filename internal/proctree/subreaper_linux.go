package proctree

// The subreaper tracker: where no cgroup v2 can be used, the job's tree is
// the runner's descendants, found by walking /proc (the runner is their
// child subreaper, so orphans stay in view).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// subreaperTracker counts every descendant of the runner as the job's. The
// runner is a child subreaper, so a process whose parent exits is
// re-parented to the runner (or to a subreaper below it), never out of the
// tree; setsid and process groups do not change the parent chain.
type subreaperTracker struct {
	notifier
	self int

	mu     sync.Mutex
	first  int
	exempt map[int]uint64 // pid → start time: children of the runner that are not the job's
}

func (s *subreaperTracker) Kind() string { return KindSubreaper }

func (s *subreaperTracker) Add(pid int) error {
	s.mu.Lock()
	s.first = pid
	s.mu.Unlock()
	return nil
}

func (s *subreaperTracker) Exempt(pid int) error {
	st, err := readStat(pid, nil)
	if err != nil {
		return fmt.Errorf("exempt process %d from the job: %w", pid, err)
	}
	if st.ppid != s.self {
		return fmt.Errorf("exempt process %d from the job: it is not a child of the runner (parent %d)", pid, st.ppid)
	}
	s.mu.Lock()
	if s.exempt == nil {
		s.exempt = map[int]uint64{}
	}
	s.exempt[pid] = st.start
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
func (s *subreaperTracker) list() ([]procStat, error) { return s.walk(false) }

// walk lists the processes of the tree; with unreaped, its children that
// have exited and that the runner has not reaped yet count too.
func (s *subreaperTracker) walk(unreaped bool) ([]procStat, error) {
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
	s.mu.Lock()
	for pid, start := range s.exempt {
		if st, ok := all[pid]; ok && st.start == start && st.ppid == s.self {
			desc[pid] = false // nor its descendants
		} else if !ok || st.start != start {
			delete(s.exempt, pid) // gone: a process with its pid is not it
		}
	}
	s.mu.Unlock()
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
		if pid != s.self && (!st.gone() || unreaped && st.ppid == s.self) && isDesc(pid) {
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
// the runner's reap of it is the event. A child that exited counts until
// it is reaped: an ended job then leaves not even a zombie behind when its
// end is told (one was seen in `ps` right after a terminate's answer).
func (s *subreaperTracker) WaitEmpty(ctx context.Context) error {
	return s.waitEmpty(ctx, func() (bool, error) {
		// Two empty walks in a row, as Kill requires: one walk can miss a
		// process forked while it read /proc.
		for range 2 {
			procs, err := s.walk(true)
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
