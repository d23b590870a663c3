package runner

// Input-wait, the kernel's side: which tasks of the terminal's foreground
// process group are asleep in a system call that reads the job's terminal,
// read from /proc (spec/extended-api.md §4). Nothing here guesses from
// silence: a task counts only when the kernel says it is sleeping (state S)
// inside read/readv/pread (on a descriptor that is the terminal), or
// select/poll/epoll (with the terminal among the descriptors it waits to
// read).

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sysKind says how a system call names the descriptors it waits to read.
type sysKind int

const (
	sysOther  sysKind = iota
	sysReadFD         // read, readv, pread64, preadv, preadv2: the fd is the first argument
	sysSelect         // select, pselect6: nfds, then the address of the read set
	sysPoll           // poll, ppoll: the address of the pollfd array, then its length
	sysEpoll          // epoll_wait, epoll_pwait, epoll_pwait2: the epoll fd
)

// readSyscalls are the numbers of the system calls that wait to read, per
// architecture (the job runs natively: a 32-bit program on a 64-bit kernel
// uses other numbers and is not recognised).
var readSyscalls = map[string]map[int64]sysKind{
	"amd64": {
		0: sysReadFD, 17: sysReadFD, 19: sysReadFD, 295: sysReadFD, 327: sysReadFD,
		23: sysSelect, 270: sysSelect,
		7: sysPoll, 271: sysPoll,
		232: sysEpoll, 281: sysEpoll, 441: sysEpoll,
	},
	"arm64": {
		63: sysReadFD, 65: sysReadFD, 67: sysReadFD, 69: sysReadFD, 286: sysReadFD,
		72: sysSelect,
		73: sysPoll,
		22: sysEpoll, 441: sysEpoll,
	},
}

// sysCall is one line of /proc/<pid>/task/<tid>/syscall of a task blocked
// in a system call.
type sysCall struct {
	nr   int64
	args [6]uint64
}

// parseSyscall reads /proc/…/syscall: "nr arg1 … arg6 sp pc" for a task
// blocked in a system call; "running" (the task is on a CPU) and
// "-1 sp pc" (blocked, but not in a system call) are not.
func parseSyscall(line string) (sysCall, bool) {
	// By hand, without allocating: a check reads this for every sleeping
	// task of the foreground group.
	field := func() string {
		line = strings.TrimLeft(line, " \t\n")
		i := strings.IndexAny(line, " \t\n")
		if i < 0 {
			i = len(line)
		}
		f := line[:i]
		line = line[i:]
		return f
	}
	nr, err := strconv.ParseInt(field(), 10, 64)
	if err != nil || nr < 0 {
		return sysCall{}, false
	}
	c := sysCall{nr: nr}
	for i := range c.args {
		v, err := strconv.ParseUint(strings.TrimPrefix(field(), "0x"), 16, 64)
		if err != nil {
			return sysCall{}, false
		}
		c.args[i] = v
	}
	return c, true
}

// procStat is what a check reads of /proc/…/stat.
type procStat struct {
	state   byte
	pgrp    int
	threads int
}

// parseStat reads /proc/…/stat: "pid (comm) S ppid pgrp … num_threads …"
// (num_threads is field 20), where comm may hold any byte but ends at the
// line's last ')'.
func parseStat(b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// Fields 3 (state), 5 (pgrp) and 20 (num_threads), counted from the
	// one after comm, by hand: no allocation on a check's path.
	rest := b[i+1:]
	var f [18][]byte
	for n := 0; n < len(f); n++ {
		rest = bytes.TrimLeft(rest, " \t\n")
		j := bytes.IndexAny(rest, " \t\n")
		if j < 0 {
			j = len(rest)
		}
		if j == 0 {
			return procStat{}, false
		}
		f[n], rest = rest[:j], rest[j:]
	}
	pgrp, ok1 := atoi(f[2])
	threads, ok2 := atoi(f[17])
	if len(f[0]) != 1 || !ok1 || !ok2 {
		return procStat{}, false
	}
	return procStat{state: f[0][0], pgrp: pgrp, threads: threads}, true
}

// atoi reads a decimal number (optionally negative) without allocating.
func atoi(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// selectFDs lists the descriptors set in a select read set of nfds bits
// (an array of longs, little-endian on every architecture here: bit n is
// bit n%8 of byte n/8).
func selectFDs(set []byte, nfds int) []int {
	var fds []int
	for fd := 0; fd < nfds && fd/8 < len(set); fd++ {
		if set[fd/8]&(1<<(fd%8)) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// pollFDs lists the descriptors of a pollfd array (int fd; short events;
// short revents) that wait for input.
func pollFDs(raw []byte) []int {
	var fds []int
	for len(raw) >= 8 {
		fd := int32(binary.LittleEndian.Uint32(raw))
		ev := binary.LittleEndian.Uint16(raw[4:])
		if fd >= 0 && ev&(unix.POLLIN|pollRdNorm|unix.POLLPRI) != 0 {
			fds = append(fds, int(fd))
		}
		raw = raw[8:]
	}
	return fds
}

// pollRdNorm is POLLRDNORM (as input as POLLIN, for a terminal).
const pollRdNorm = 0x40

// epollFDs lists the descriptors an epoll instance waits to read, from its
// /proc/<pid>/fdinfo: lines "tfd: N events: HEX data: …".
func epollFDs(fdinfo []byte) []int {
	var fds []int
	for _, line := range strings.Split(string(fdinfo), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(f[1])
		ev, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 == nil && err2 == nil && ev&(unix.EPOLLIN|unix.EPOLLRDNORM|unix.EPOLLPRI) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// Bounds on what a check reads of a task's memory: a select set of at most
// this many descriptors, a poll array of at most this many entries.
const (
	maxSelectFDs = 1 << 16
	maxPollFDs   = 1 << 12
)

// ttyID names the job's terminal: the device and inode of its slave side
// (the inode of /dev/pts/N on the job's devpts).
type ttyID struct{ dev, ino uint64 }

// devTTY is /dev/tty's device number (5, 0): a descriptor opened through it
// reads the opener's controlling terminal, which for a task of the
// terminal's foreground group is the job's terminal.
var devTTY = unix.Mkdev(5, 0)

// procFS reads the /proc files of a check; root is /proc (a fixture in the
// tests).
type procFS struct {
	root string
	arch string // runtime.GOARCH
}

func newProcFS() procFS { return procFS{root: "/proc", arch: runtime.GOARCH} }

func (p procFS) task(pid, tid int) string {
	return p.root + "/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid)
}

// readSmall reads a small /proc file (one read: they are made whole on
// open) into buf.
func readSmall(path string, buf []byte) ([]byte, error) {
	// Plain system calls, not an *os.File: no allocation, no poller.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			return buf[:n], nil
		}
		if err == nil {
			err = io.EOF
		}
		return nil, err
	}
}

// isTerminal reports whether descriptor fd of task tid is the job's
// terminal (or /dev/tty).
func (p procFS) isTerminal(pid, tid, fd int, tty ttyID) bool {
	var st unix.Stat_t
	if err := unix.Stat(p.task(pid, tid)+"/fd/"+strconv.Itoa(fd), &st); err != nil {
		return false
	}
	if uint64(st.Dev) == tty.dev && uint64(st.Ino) == tty.ino {
		return true
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && uint64(st.Rdev) == devTTY
}

// callFDs are the descriptors system call c waits to read (nil when it is
// not such a call).
func (p procFS) callFDs(pid int, c sysCall) []int {
	switch readSyscalls[p.arch][c.nr] {
	case sysReadFD:
		return []int{int(int32(c.args[0]))}
	case sysSelect:
		nfds := int(int32(c.args[0]))
		if c.args[1] == 0 || nfds <= 0 {
			return nil
		}
		set, ok := p.readMem(pid, c.args[1], (min(nfds, maxSelectFDs)+7)/8)
		if !ok {
			return nil
		}
		return selectFDs(set, nfds)
	case sysPoll:
		n := int(min(c.args[1], maxPollFDs))
		if c.args[0] == 0 || n == 0 {
			return nil
		}
		raw, ok := p.readMem(pid, c.args[0], 8*n)
		if !ok {
			return nil
		}
		return pollFDs(raw)
	case sysEpoll:
		info, err := os.ReadFile(p.root + "/" + strconv.Itoa(pid) + "/fdinfo/" + strconv.Itoa(int(int32(c.args[0]))))
		if err != nil {
			return nil
		}
		return epollFDs(info)
	}
	return nil
}

// readMem reads n bytes at addr of process pid's memory.
func (p procFS) readMem(pid int, addr uint64, n int) ([]byte, bool) {
	if addr > 1<<62 {
		return nil, false
	}
	f, err := os.Open(p.root + "/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := f.ReadAt(b, int64(addr))
	if m != n && err != nil {
		return nil, false
	}
	return b, true
}

// blockedReaders lists the tasks of the processes pids that are in process
// group fg and asleep waiting to read the terminal tty, each with a key
// that changes whenever the task runs (its /proc schedstat: CPU time and
// number of times it was scheduled), which tells one blocked read from the
// next one.
//
// /proc reads cost tens of microseconds each, so a task is first sifted
// by its process's stat (group, state, threads) and its system call, and
// only a candidate is confirmed.
//
// inGroup, when not nil, is told each process found in group fg.
func (p procFS) blockedReaders(pids []int, fg int, tty ttyID, buf []byte, inGroup func(pid int)) map[int]string {
	var out map[int]string
	for _, pid := range pids {
		st, tids, ok := p.groupTasks(pid, fg, buf)
		if !ok {
			continue
		}
		if inGroup != nil {
			inGroup(pid)
		}
		if st.threads == 1 && st.state != 'S' {
			continue
		}
		for _, tid := range tids {
			if key, ok := p.blockedReader(pid, tid, tty, buf, st.threads == 1); ok {
				if out == nil {
					out = map[int]string{}
				}
				out[tid] = key
			}
		}
	}
	return out
}

// groupTasks is process pid's stat and its tasks, when it is in group fg
// (ok false otherwise, or when it is gone): its own id when it has one
// thread, else the entries of its task directory.
func (p procFS) groupTasks(pid, fg int, buf []byte) (procStat, []int, bool) {
	dir := p.root + "/" + strconv.Itoa(pid)
	b, err := readSmall(dir+"/stat", buf)
	if err != nil {
		return procStat{}, nil, false
	}
	st, ok := parseStat(b)
	if !ok || st.pgrp != fg {
		return st, nil, false
	}
	if st.threads == 1 {
		return st, []int{pid}, true
	}
	entries, err := os.ReadDir(dir + "/task")
	if err != nil {
		return st, nil, false
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return st, tids, true
}

// sleeps is the schedstat of every task of group fg among pids, keyed by
// task id: what tells one sleep of a task from its next, since it changes
// whenever the task runs (blockedReader's key, without timedKey). Taken
// just before an input is written to the terminal: a reader later seen
// with the same schedstat has not run since, so has not read that input.
// It is a superset of the keys of the readers blocked then (a task that
// was not blocked reading cannot become so without running), at one file
// a task where blockedReaders reads about six: the look is on the way of
// every input to the terminal.
func (p procFS) sleeps(pids []int, fg int, buf []byte) map[int]string {
	var out map[int]string
	for _, pid := range pids {
		_, tids, ok := p.groupTasks(pid, fg, buf)
		if !ok {
			continue
		}
		for _, tid := range tids {
			k, err := readSmall(p.task(pid, tid)+"/schedstat", buf)
			if err != nil {
				continue
			}
			if out == nil {
				out = map[int]string{}
			}
			out[tid] = strings.TrimSpace(string(k))
		}
	}
	return out
}

// blockedReader reports whether task tid of pid is asleep waiting to read
// the terminal, and its schedstat key. sleeping: the task's state was
// already seen S.
func (p procFS) blockedReader(pid, tid int, tty ttyID, buf []byte, sleeping bool) (string, bool) {
	dir := p.task(pid, tid)
	state := func() bool {
		b, err := readSmall(dir+"/stat", buf)
		if err != nil {
			return false
		}
		st, ok := parseStat(b)
		return ok && st.state == 'S'
	}
	if !sleeping && !state() {
		return "", false
	}
	call, ok := p.readsTerminal(pid, tid, tty, buf)
	if !ok {
		return "", false
	}
	// Confirmed between two reads of the task's schedstat: when they are
	// equal the task did not run meanwhile, so its state (S) and its
	// system call (the same read of the terminal) are of one sleep.
	k, err := readSmall(dir+"/schedstat", buf)
	if err != nil {
		return "", false
	}
	key := strings.TrimSpace(string(k))
	if !state() {
		return "", false
	}
	if again, ok := p.readsTerminal(pid, tid, tty, buf); !ok || again != call {
		return "", false
	}
	if k, err := readSmall(dir+"/schedstat", buf); err != nil || strings.TrimSpace(string(k)) != key {
		return "", false
	}
	if p.timedWait(call) {
		key += timedKey
	}
	return key, true
}

// timedKey ends the key of a reader whose wait has a timeout.
const timedKey = " timed"

// timedWait reports whether the system call of line waits with a timeout
// (the program will act by itself when it passes: vim deciding what an
// Escape was, a REPL's input hook) rather than until input comes. A read
// has none (a terminal's VTIME is not looked at).
func (p procFS) timedWait(line string) bool {
	c, ok := parseSyscall(line)
	if !ok {
		return false
	}
	switch p.arch {
	case "amd64":
		switch c.nr {
		case 23, 270: // select, pselect6: the timeout's address
			return c.args[4] != 0
		case 7: // poll: the timeout in ms, negative for none
			return int32(c.args[2]) >= 0
		case 271: // ppoll: the timeout's address
			return c.args[2] != 0
		case 232, 281: // epoll_wait, epoll_pwait: ms, negative for none
			return int32(c.args[3]) >= 0
		case 441: // epoll_pwait2: the timeout's address
			return c.args[3] != 0
		}
	case "arm64":
		switch c.nr {
		case 72: // pselect6
			return c.args[4] != 0
		case 73: // ppoll
			return c.args[2] != 0
		case 22: // epoll_pwait
			return int32(c.args[3]) >= 0
		case 441: // epoll_pwait2
			return c.args[3] != 0
		}
	}
	return false
}

// readsTerminal reports whether task tid is in a system call that waits to
// read the terminal, and that call's line.
func (p procFS) readsTerminal(pid, tid int, tty ttyID, buf []byte) (string, bool) {
	b, err := readSmall(p.task(pid, tid)+"/syscall", buf)
	if err != nil {
		return "", false
	}
	line := strings.TrimSpace(string(b))
	c, ok := parseSyscall(line)
	if !ok {
		return "", false
	}
	for _, fd := range p.callFDs(pid, c) {
		if fd >= 0 && p.isTerminal(pid, tid, fd, tty) {
			return line, true
		}
	}
	return "", false
}
