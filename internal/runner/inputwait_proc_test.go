package runner

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

func TestParseSyscall(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
		nr   int64
		a0   uint64
		a1   uint64
	}{
		{"0 0x0 0x7ffd5e1c 0x1 0x0 0x0 0x0 0x7ffd5e10 0x7f12ab\n", true, 0, 0, 0x7ffd5e1c},
		{"270 0x1 0x7ffc10a0 0x0 0x0 0x0 0x7ffc1000 0x7ffc0ff8 0x7f0011", true, 270, 1, 0x7ffc10a0},
		{"63 0x3 0xaaaa 0x400 0x0 0x0 0x0 0xffff 0xfffe", true, 63, 3, 0xaaaa},
		{"running", false, 0, 0, 0},
		{"-1 0x7ffd5e10 0x7f12ab", false, 0, 0, 0}, // blocked, not in a system call
		{"0 0x0 0x1", false, 0, 0, 0},              // cut short
		{"0 zz 0x1 0x0 0x0 0x0 0x0 0x0 0x0", false, 0, 0, 0},
		{"", false, 0, 0, 0},
	} {
		c, ok := parseSyscall(tc.line)
		if ok != tc.ok || (ok && (c.nr != tc.nr || c.args[0] != tc.a0 || c.args[1] != tc.a1)) {
			t.Errorf("parseSyscall(%q) = %+v, %v; want nr %d args %#x %#x ok %v", tc.line, c, ok, tc.nr, tc.a0, tc.a1, tc.ok)
		}
	}
}

// statTail is /proc/…/stat from ppid to num_threads and beyond.
func statTail(state string, pgrp, threads int) string {
	return state + " 1 " + strconv.Itoa(pgrp) + " " + strconv.Itoa(pgrp) + " 34816 " + strconv.Itoa(pgrp) +
		" 4194560 120 0 0 0 3 1 0 0 20 0 " + strconv.Itoa(threads) + " 0 12345 2269184 871\n"
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
		st procStat
	}{
		// A line of a real bash.
		{"4242 (bash) S 4200 4242 4242 34816 4242 4194560 1024 0 0 0 1 0 0 0 20 0 1 0 1787 8908800 1292 18446744073709551615", true, procStat{'S', 4242, 1}},
		// comm holds a ')' and spaces: the last ')' ends it.
		{"77 (a) b) c (d) " + statTail("R", 70, 4), true, procStat{'R', 70, 4}},
		{"77 (x) S", false, procStat{}},
		{"77 x " + statTail("S", 1, 1), false, procStat{}},
		{"77 (x) S" + statTail("S", 70, 1), false, procStat{}},
		{"77 (x) S 1 seventy 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15", false, procStat{}},
	} {
		st, ok := parseStat([]byte(tc.in))
		if ok != tc.ok || st != tc.st {
			t.Errorf("parseStat(%q) = %+v %v; want %+v %v", tc.in, st, ok, tc.st, tc.ok)
		}
	}
}

func TestSelectPollEpollFDs(t *testing.T) {
	if got := selectFDs([]byte{0x01, 0x80, 0xff}, 16); !reflect.DeepEqual(got, []int{0, 15}) {
		t.Errorf("selectFDs 16 bits = %v, want [0 15]", got)
	}
	if got := selectFDs([]byte{0x05}, 2); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("selectFDs stops at nfds: %v, want [0]", got)
	}
	if got := selectFDs([]byte{0x01}, 64); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("selectFDs past the bytes read: %v, want [0]", got)
	}
	pfd := func(fd int32, ev uint16) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(fd))
		binary.LittleEndian.PutUint16(b[4:], ev)
		return b
	}
	var arr []byte
	arr = append(arr, pfd(4, unix.POLLOUT)...)
	arr = append(arr, pfd(0, unix.POLLIN)...)
	arr = append(arr, pfd(-1, unix.POLLIN)...) // ignored entry
	arr = append(arr, pfd(7, unix.POLLPRI)...)
	arr = append(arr, 1, 2, 3) // a torn tail is not an entry
	if got := pollFDs(arr); !reflect.DeepEqual(got, []int{0, 7}) {
		t.Errorf("pollFDs = %v, want [0 7]", got)
	}
	info := "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\n" +
		"tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:18\n" +
		"tfd:        5 events:        4 data:                5  pos:0 ino:9 sdev:e\n" +
		"tfd:       12 events:       41 data:                c  pos:0 ino:a sdev:e\n"
	if got := epollFDs([]byte(info)); !reflect.DeepEqual(got, []int{0, 12}) {
		t.Errorf("epollFDs = %v, want [0 12] (EPOLLOUT alone is no read)", got)
	}
}

// fixture builds a /proc tree under a temporary directory.
type fixture struct {
	t    *testing.T
	root string
	tty  string // stands for the job's terminal
	pipe string // any other file
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	f := &fixture{t: t, root: filepath.Join(dir, "proc"), tty: filepath.Join(dir, "pts-3"), pipe: filepath.Join(dir, "pipe")}
	for _, p := range []string{f.tty, f.pipe} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) write(rel, content string) {
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) link(rel, target string) {
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
}

// task makes pid's task tid: state, group, syscall line and schedstat.
func (f *fixture) task(pid, tid int, state string, pgrp int, syscall string) {
	p, d := strconv.Itoa(pid), strconv.Itoa(tid)
	stat := d + " (prog) " + statTail(state, pgrp, 1)
	if pid == tid {
		f.write(p+"/stat", stat)
	}
	f.write(p+"/task/"+d+"/stat", stat)
	f.write(p+"/task/"+d+"/syscall", syscall+"\n")
	f.write(p+"/task/"+d+"/schedstat", "1000"+d+" 20 3\n")
}

func (f *fixture) id() ttyID {
	var st unix.Stat_t
	if err := unix.Stat(f.tty, &st); err != nil {
		f.t.Fatal(err)
	}
	return ttyID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// TestBlockedReadersFixture: which tasks of a /proc tree count as blocked
// reading the terminal, for every kind of waiting call, and which do not.
func TestBlockedReadersFixture(t *testing.T) {
	f := newFixture(t)
	const fg = 100
	rest := " 0x0 0x0 0x0 0x0 0x7ffd0000 0x7f000000"
	// 100: the shell, in wait4: no.
	f.task(100, 100, "S", fg, "61 0xffffffff 0x7ffd 0x0"+rest)
	// 101: read(0) on the terminal: yes. Its thread 102 reads another
	// file: no.
	f.task(101, 101, "S", fg, "0 0x0 0x7ffd 0x1"+rest)
	f.link("101/task/101/fd/0", f.tty)
	f.task(101, 102, "S", fg, "0 0x3 0x7ffd 0x1"+rest)
	f.link("101/task/102/fd/3", f.pipe)
	f.write("101/stat", "101 (prog) "+statTail("S", fg, 2))
	// 112: two threads, the main one running, the other reading the
	// terminal: yes (only that thread).
	f.task(112, 112, "R", fg, "running")
	f.task(112, 113, "S", fg, "0 0x0 0x7ffd 0x1"+rest)
	f.link("112/task/113/fd/0", f.tty)
	f.write("112/stat", "112 (prog) "+statTail("R", fg, 2))
	// 103: reads the terminal but is not in the foreground group: no.
	f.task(103, 103, "S", 200, "0 0x0 0x7ffd 0x1"+rest)
	f.link("103/task/103/fd/0", f.tty)
	// 104: in read(0) but on a CPU (state R): no.
	f.task(104, 104, "R", fg, "0 0x0 0x7ffd 0x1"+rest)
	f.link("104/task/104/fd/0", f.tty)
	// 105: pselect6 with fd 0 in its read set (memory at 0x100): yes.
	f.task(105, 105, "S", fg, "270 0x1 0x100 0x0 0x0 0x0 0x0 0x7ffd0000 0x7f000000")
	f.link("105/task/105/fd/0", f.tty)
	mem := make([]byte, 0x300)
	mem[0x100] = 0x01
	// 106: poll over (fd 4, POLLOUT), (fd 0, POLLIN) at 0x200: yes.
	f.task(106, 106, "S", fg, "7 0x200 0x2 0xffffffff"+rest)
	f.link("106/task/106/fd/0", f.tty)
	f.link("106/task/106/fd/4", f.tty)
	binary.LittleEndian.PutUint32(mem[0x200:], 4)
	binary.LittleEndian.PutUint16(mem[0x204:], unix.POLLOUT)
	binary.LittleEndian.PutUint32(mem[0x208:], 0)
	binary.LittleEndian.PutUint16(mem[0x20c:], unix.POLLIN)
	for _, pid := range []string{"105", "106"} {
		f.write(pid+"/mem", string(mem))
	}
	// 107: epoll_wait on epoll fd 9 watching fd 0 for input: yes.
	f.task(107, 107, "S", fg, "232 0x9 0x7ffd 0x10 0xffffffff"+rest)
	f.write("107/fdinfo/9", "pos:\t0\nflags:\t02\ntfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:18\n")
	f.link("107/task/107/fd/0", f.tty)
	// 108: read on /dev/tty (its controlling terminal): yes.
	f.task(108, 108, "S", fg, "0 0x5 0x7ffd 0x1"+rest)
	f.link("108/task/108/fd/5", "/dev/tty")
	// 109: nanosleep: no. 110: select with an empty read set: no.
	f.task(109, 109, "S", fg, "35 0x7ffd 0x0 0x0"+rest)
	f.task(110, 110, "S", fg, "23 0x1 0x0 0x0 0x0 0x7ffd"+rest)
	f.link("110/task/110/fd/0", f.tty)
	// 111: gone between the listing and the look: no.

	p := procFS{root: f.root, arch: "amd64"}
	got := p.readers([]int{100, 101, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112}, fg, f.id())
	want := map[int]string{101: "1000101 20 3", 105: "1000105 20 3", 106: "1000106 20 3", 107: "1000107 20 3", 113: "1000113 20 3"}
	if _, err := os.Stat("/dev/tty"); err == nil {
		want[108] = "1000108 20 3"
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("blockedReaders = %v, want %v", got, want)
	}
	// The same numbers mean other calls on arm64: 63 is read there, 0
	// (io_setup) waits for nothing.
	arm := procFS{root: f.root, arch: "arm64"}
	f.task(120, 120, "S", fg, "63 0x0 0x7ffd 0x1"+rest)
	f.link("120/task/120/fd/0", f.tty)
	if got := arm.readers([]int{101, 120}, fg, f.id()); !reflect.DeepEqual(got, map[int]string{120: "1000120 20 3"}) {
		t.Fatalf("arm64 blockedReaders = %v, want only 120", got)
	}
}

// startOnTerminal starts argv as the session leader of a new terminal
// (its foreground group is its own).
func startOnTerminal(t *testing.T, argv ...string) (*exec.Cmd, *os.File, ttyID) {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a terminal (a runner cannot run pty jobs without one): %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(slave.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		master.Close()
	})
	return cmd, master, ttyID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// TestBlockedReadersRealTerminal: on the real kernel, cat on a terminal
// with no input is found blocked reading it (and each new read has a new
// key); sleep on a terminal never is; input written and not yet read is
// seen pending. Logs what one look costs.
func TestBlockedReadersRealTerminal(t *testing.T) {
	p := newProcFS()
	if _, ok := readSyscalls[p.arch]; !ok {
		t.Skipf("no system call table for %s", p.arch)
	}
	cat, catMaster, catTTY := startOnTerminal(t, "cat")
	sleep, sleepMaster, sleepTTY := startOnTerminal(t, "sleep", "30")
	pid := cat.Process.Pid
	look := func() map[int]string { return p.readers([]int{pid}, pid, catTTY) }
	deadline := time.Now().Add(10 * time.Second)
	var first string
	for {
		if k, ok := look()[pid]; ok {
			first = k
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cat on a terminal with no input is never seen blocked reading it")
		}
		time.Sleep(time.Millisecond)
	}
	// The same look against another terminal, or another group: no.
	if got := p.readers([]int{pid}, pid, sleepTTY); got != nil {
		t.Fatalf("cat matched a terminal it does not read: %v", got)
	}
	if got := p.readers([]int{pid}, pid+1, catTTY); got != nil {
		t.Fatalf("cat matched outside its group: %v", got)
	}
	// A line in: cat reads it, writes it back, reads again — another key.
	if _, err := catMaster.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	for {
		if k, ok := look()[pid]; ok && k != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cat's next read has the key of the one before")
		}
		time.Sleep(time.Millisecond)
	}
	spid := sleep.Process.Pid
	for range 50 {
		if got := p.readers([]int{spid}, spid, sleepTTY); got != nil {
			t.Fatalf("sleep reported blocked reading its terminal: %v", got)
		}
		time.Sleep(time.Millisecond)
	}
	// Input pending: sleep does not read what is written to its terminal.
	iw := &inputWait{master: sleepMaster}
	if iw.inputPending() {
		t.Fatalf("input pending before any was written")
	}
	if _, err := sleepMaster.Write([]byte("typed ahead\n")); err != nil {
		t.Fatal(err)
	}
	if !iw.inputPending() {
		t.Fatalf("a line written to the terminal and not read is not seen pending")
	}
	// What one look costs (the /proc part of a check).
	const n = 500
	start := time.Now()
	for range n {
		look()
	}
	per := time.Since(start) / n
	start = time.Now()
	for range n {
		iw.inputPending()
		iw.outputPending()
	}
	t.Logf("one look at a job of one process: %v for /proc, %v for the two terminal polls", per, time.Since(start)/n)
}

func (p procFS) readers(pids []int, fg int, tty ttyID) map[int]string {
	return p.blockedReaders(pids, fg, tty, make([]byte, 4096), nil)
}

// TestParsersDoNotAllocate: a check reads stat and syscall of every
// sleeping task of the foreground group; the parsing allocates nothing.
func TestParsersDoNotAllocate(t *testing.T) {
	stat := []byte("4242 (bash) S 4200 4242 4242 34816 4242 4194560 1024 0 0 0 1 0 0 0 20 0 1 0 1787 8908800 1292")
	line := "0 0x0 0x7ffd5e1c 0x1 0x0 0x0 0x0 0x7ffd5e10 0x7f12ab\n"
	if n := testing.AllocsPerRun(100, func() {
		parseStat(stat)
		parseSyscall(line)
	}); n != 0 {
		t.Fatalf("parsing allocates %v times", n)
	}
}

// A reader waiting with a timeout is told from one waiting until input
// comes, from the system call's arguments alone.
func TestTimedWait(t *testing.T) {
	p := procFS{arch: "amd64"}
	for _, c := range []struct {
		line string
		want bool
	}{
		{"0 0x0 0x7ffd 0x1 0x0 0x0 0x0 0x7ffc 0x7f00", false},                    // read
		{"270 0x1 0x7ffd1000 0x0 0x0 0x0 0x7ffd2000 0x7ffc 0x7f00", false},       // pselect6, no timeout
		{"270 0x1 0x7ffd1000 0x0 0x0 0x7ffd3000 0x0 0x7ffc 0x7f00", true},        // pselect6 with one
		{"23 0x1 0x7ffd1000 0x0 0x0 0x7ffd3000 0x0 0x7ffc 0x7f00", true},         // select with one
		{"7 0x7ffd1000 0x1 0xffffffffffffffff 0x0 0x0 0x0 0x7ffc 0x7f00", false}, // poll, -1
		{"7 0x7ffd1000 0x1 0x3e8 0x0 0x0 0x0 0x7ffc 0x7f00", true},               // poll, 1000 ms
		{"271 0x7ffd1000 0x1 0x0 0x0 0x8 0x0 0x7ffc 0x7f00", false},              // ppoll, NULL
		{"271 0x7ffd1000 0x1 0x7ffd3000 0x0 0x8 0x0 0x7ffc 0x7f00", true},        // ppoll with one
		{"232 0x4 0x7ffd1000 0x10 0xffffffff 0x0 0x0 0x7ffc 0x7f00", false},      // epoll_wait, -1
		{"232 0x4 0x7ffd1000 0x10 0x19 0x0 0x0 0x7ffc 0x7f00", true},             // epoll_wait, 25 ms
		{"running", false},
	} {
		if got := p.timedWait(c.line); got != c.want {
			t.Errorf("timedWait(%q) = %v, want %v", c.line, got, c.want)
		}
	}
	if !(procFS{arch: "arm64"}).timedWait("73 0x7ffd1000 0x1 0x7ffd3000 0x0 0x8 0x0 0x7ffc 0x7f00") {
		t.Error("arm64 ppoll with a timeout is not timed")
	}
}

// TestSleepsHoldTheReadersKeys: the snapshot taken before each input has
// the schedstat of every task of the foreground group, threads included,
// and of no other group; every blocked reader's key is among them, so a
// reader that has not run since the snapshot is told as one that has not
// read the input.
func TestSleepsHoldTheReadersKeys(t *testing.T) {
	f := newFixture(t)
	const fg = 100
	rest := " 0x0 0x0 0x0 0x0 0x7ffd0000 0x7f000000"
	f.task(100, 100, "S", fg, "61 0xffffffff 0x7ffd 0x0"+rest) // wait4
	f.task(101, 101, "S", fg, "0 0x0 0x7ffd 0x1"+rest)         // reads the terminal
	f.link("101/task/101/fd/0", f.tty)
	f.task(112, 112, "R", fg, "running")
	f.task(112, 113, "S", fg, "0 0x0 0x7ffd 0x1"+rest)
	f.link("112/task/113/fd/0", f.tty)
	f.write("112/stat", "112 (prog) "+statTail("R", fg, 2))
	f.task(103, 103, "S", 200, "0 0x0 0x7ffd 0x1"+rest) // another group
	f.link("103/task/103/fd/0", f.tty)
	// 105: a reader whose wait has a timeout (its key ends timedKey).
	f.task(105, 105, "S", fg, "7 0x200 0x1 0x64"+rest)
	f.link("105/task/105/fd/0", f.tty)
	mem := make([]byte, 0x300)
	binary.LittleEndian.PutUint32(mem[0x200:], 0)
	binary.LittleEndian.PutUint16(mem[0x204:], unix.POLLIN)
	f.write("105/mem", string(mem))

	p := procFS{root: f.root, arch: "amd64"}
	pids := []int{100, 101, 103, 105, 111, 112}
	got := p.sleeps(pids, fg, make([]byte, 4096))
	want := map[int]string{100: "1000100 20 3", 101: "1000101 20 3", 105: "1000105 20 3", 112: "1000112 20 3", 113: "1000113 20 3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sleeps = %v, want %v", got, want)
	}
	readers := p.readers(pids, fg, f.id())
	if len(readers) != 3 || !strings.HasSuffix(readers[105], timedKey) {
		t.Fatalf("readers = %v, want 101, 105 (timed) and 113", readers)
	}
	for tid, key := range readers {
		if got[tid] != strings.TrimSuffix(key, timedKey) {
			t.Errorf("reader %d has key %q, the snapshot %q", tid, key, got[tid])
		}
	}
}
