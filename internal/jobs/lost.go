package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/store"
)

// A job whose runner died (killed, crashed) is lost, and nothing of it may
// keep running: the server ends what is left of it — through its cgroup
// where it has one (cgroup.kill reaches every process in it, whatever
// session or group it moved to), else by its process group and session
// (the job's process leads both) and as the orphans the server adopted as
// child subreaper (a dead runner's children are reparented to us).
// Terminate and forced delete of a lost job do the same again before they
// answer.

// lostKillWait bounds how long ending a lost job's processes waits for
// them to be gone after SIGKILL (a process in uninterruptible sleep).
const lostKillWait = 5 * time.Second

// lostRecheck is the pause between looks at what is left of a lost job.
// This is a failure path — a runner died — and no waiter is woken by it.
const lostRecheck = 20 * time.Millisecond

// cgroupRoot is where cgroup v2 is mounted.
const cgroupRoot = "/sys/fs/cgroup"

// endLost ends every process of a lost job and reports what it could not
// end.
func (s *Service) endLost(id string, pid int, cgroup string) error {
	var errs []error
	if cgroup != "" {
		if err := killCgroup(cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	if pid > 0 {
		if cgroup == "" {
			s.awaitRunnerReaped(id)
		}
		if err := s.killGroupAndOrphans(pid); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		s.log.Error("end lost job", "job", id, "err", err)
	} else {
		s.log.Info("lost job ended", "job", id, "pid", pid, "cgroup", cgroup)
	}
	return err
}

// awaitRunnerReaped waits, for at most lostKillWait, until the lost job's
// runner, when it was ours, has been reaped. Without a cgroup its job's
// processes are found as the children the server adopts, and a runner's
// children are reparented to us only late in its exit, after its
// descriptors closed (which is how its end was seen): a look before that
// finds them still its children and passes them by.
func (s *Service) awaitRunnerReaped(id string) {
	row, err := s.st.Get(context.Background(), id)
	if err != nil || row.RunnerPID <= 0 {
		return
	}
	s.procMu.Lock()
	reaped, ok := s.runners[row.RunnerPID]
	s.procMu.Unlock()
	if !ok {
		return
	}
	t := time.NewTimer(lostKillWait)
	defer t.Stop()
	select {
	case <-reaped:
	case <-t.C:
	case <-s.stop:
	}
}

// endLostRow ends what is left of the lost job of row.
func (s *Service) endLostRow(ctx context.Context, id string) error {
	row, err := s.st.Get(ctx, id)
	if err != nil {
		return err
	}
	if row.Status != store.StatusLost {
		return nil
	}
	return s.endLost(id, row.PID, row.Cgroup)
}

// killCgroup kills every process in a job's cgroup, waits until it is
// empty and removes it. The path comes from the job's record; only a
// shellctl job group under the cgroup mount is touched.
func killCgroup(dir string) error {
	clean := filepath.Clean(dir)
	if !strings.HasPrefix(clean, cgroupRoot+"/") || !strings.HasPrefix(filepath.Base(clean), "shellctl-") {
		return fmt.Errorf("job cgroup %q is not a shellctl job group under %s: not touched", dir, cgroupRoot)
	}
	if _, err := os.Stat(clean); errors.Is(err, os.ErrNotExist) {
		return nil // its runner removed it: nothing left
	}
	deadline := time.Now().Add(lostKillWait)
	for {
		if err := os.WriteFile(filepath.Join(clean, "cgroup.kill"), []byte("1"), 0); err != nil {
			// Kernels before 5.14: kill each member.
			if procs, rerr := os.ReadFile(filepath.Join(clean, "cgroup.procs")); rerr == nil {
				for _, f := range strings.Fields(string(procs)) {
					if p, err := strconv.Atoi(f); err == nil {
						killMember(p, clean)
					}
				}
			}
		}
		ev, err := os.ReadFile(filepath.Join(clean, "cgroup.events"))
		if err != nil || bytes.Contains(ev, []byte("populated 0")) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of cgroup %s survive SIGKILL after %s", clean, lostKillWait)
		}
		time.Sleep(lostRecheck)
	}
	if err := unix.Rmdir(clean); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("remove cgroup %s: %w", clean, err)
	}
	return nil
}

// killMember sends SIGKILL to pid through a pidfd once the pidfd is known
// to name a process still in the cgroup dir: a pid read from cgroup.procs
// and reused since by a process elsewhere is not killed.
func killMember(pid int, dir string) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasSuffix(dir, p) && p != "/" {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			return
		}
	}
}

// procStat is what /proc/<pid>/stat says of a process's family.
type procStat struct {
	pid, ppid, pgrp, session int
	state                    byte
	start                    uint64 // start time (clock ticks since boot): with pid, names one process
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: the fields
	// start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	st := procStat{pid: pid, state: f[0][0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	st.session, _ = strconv.Atoi(f[3])
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	return st, true
}

// killGroupAndOrphans kills, until none is left, every process of the lost
// job whose main process was pid: every child the server adopts (a dead
// runner's children are reparented to us, and so, as each is killed, are
// theirs), and every process in the process group or session pid led that
// descends from the server by way of no runner. The group and session are
// only numbers: once the job's processes left them, any process may have
// taken them, so a process in them is the job's only when its ancestry says
// so; an outside group that took the number does not descend from us. Each
// process is pinned by a pidfd and checked again before it is killed.
func (s *Service) killGroupAndOrphans(pid int) error {
	self := os.Getpid()
	// Work other jobs left running when they ended by themselves (a
	// `nohup server &`, reparented to us when its runner left) is no lost
	// job's to take down: those were noted as kept when their runner
	// exited cleanly (keepLeftovers).
	deadline := time.Now().Add(lostKillWait)
	for {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return fmt.Errorf("list processes: %w", err)
		}
		all := make(map[int]procStat, len(entries))
		for _, e := range entries {
			p, err := strconv.Atoi(e.Name())
			if err != nil || p == self {
				continue
			}
			if st, ok := readStat(p); ok {
				all[p] = st
			}
		}
		// ours: p descends from the server through no runner (memoised).
		ours := map[int]bool{}
		var ourChain func(p int, depth int) bool
		ourChain = func(p int, depth int) bool {
			if v, ok := ours[p]; ok {
				return v
			}
			st, ok := all[p]
			res := false
			switch {
			case !ok || p <= 1 || depth > len(all):
			case s.isRunner(p):
			case st.ppid == self:
				res = true
			default:
				res = ourChain(st.ppid, depth+1)
			}
			ours[p] = res
			return res
		}
		left := 0
		for p, st := range all {
			if st.state == 'Z' {
				continue // gone but for its exit status: the reaper's
			}
			adopted := st.ppid == self && !s.isRunner(p) && !s.isKept(p)
			inJob := (st.pgrp == pid || st.session == pid) && ourChain(p, 0)
			if !adopted && !inJob {
				continue
			}
			left++
			killVerified(st)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of job process %d survive SIGKILL after %s", left, pid, lostKillWait)
		}
		time.Sleep(lostRecheck)
	}
}

// killVerified sends SIGKILL to the process st describes through a pidfd,
// once the pidfd is known to name that process (its start time and its
// family unchanged): a pid reused since the walk is never killed.
func killVerified(st procStat) {
	fd, err := unix.PidfdOpen(st.pid, 0)
	if err != nil {
		return // gone, or no pidfds: never by a bare number
	}
	defer unix.Close(fd)
	cur, ok := readStat(st.pid)
	if !ok || cur.start != st.start || cur.ppid != st.ppid || cur.pgrp != st.pgrp || cur.session != st.session {
		return // another process now, or it moved: the next walk looks again
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

// keepLeftovers notes, when a runner has left after its job ended by
// itself, the processes we adopted from it (and any other job's that are
// still ours) as work left running on purpose.
func (s *Service) keepLeftovers() {
	kids := childrenOf(os.Getpid())
	s.procMu.Lock()
	defer s.procMu.Unlock()
	now := map[int]bool{}
	for _, c := range kids {
		if _, ours := s.runners[c]; !ours {
			now[c] = true
		}
	}
	s.kept = now // what is no longer our child is forgotten
}

// leftoversLoop runs keepLeftovers when asked (spawn), until the service
// stops: one look for every burst of runner exits, not one for each.
func (s *Service) leftoversLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.leftovers:
			s.keepLeftovers()
		}
	}
}

// isKept reports whether pid is work a job left running on purpose.
func (s *Service) isKept(pid int) bool {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	return s.kept[pid]
}

// isRunner reports whether pid is a runner this server started.
func (s *Service) isRunner(pid int) bool {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	_, ok := s.runners[pid]
	return ok
}

// childrenOf lists pid's children from /proc/<pid>/task/*/children (every
// thread's: a child is listed under the thread that forked it). It runs
// after every runner that leaves, over every thread of the server, so it
// makes the fewest system calls it can: the task directory read once, each
// children file opened beneath it and read into one buffer, no os.File.
func childrenOf(pid int) []int {
	dfd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(dfd)
	buf := make([]byte, 8192)
	var tids []string
	for {
		n, err := unix.ReadDirent(dfd, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, tids = unix.ParseDirent(buf[:n], -1, tids)
	}
	var out []int
	for _, t := range tids {
		fd, err := unix.Openat(dfd, t+"/children", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // the thread is gone
		}
		var text []byte
		for {
			n, err := unix.Read(fd, buf)
			if n > 0 {
				text = append(text, buf[:n]...)
			}
			if err != nil || n <= 0 {
				break
			}
		}
		unix.Close(fd)
		for _, f := range strings.Fields(string(text)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
