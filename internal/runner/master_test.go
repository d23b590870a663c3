package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// TestTheMasterIsReadThroughThePoller: a pty job's terminal master is
// non-blocking from the start and after a resize (creack/pty's ioctls go
// through Fd, which makes a descriptor blocking), so the pump waits in the
// Go poller, not in a thread asleep in read(2). A blocked thread keeps the
// runner's one P until the runtime's monitor takes it back, and the size
// event that announces the read waited for that (0.2–0.5 ms of an attach
// round trip's p50).
func TestTheMasterIsReadThroughThePoller(t *testing.T) {
	rr := startRealRunner(t, nil)
	rr.assignFrames("pty", "stty raw -echo; echo ready; exec cat")
	c := newRawDriver(t, rr)
	c.readUntil([]byte("ready"))
	masterNonBlocking(t, rr.cmd.Process.Pid, "after the start")
	if a := c.ask(&proto.Msg{T: proto.TResize, Cols: 100, Rows: 30}); a.Err != "" {
		t.Fatalf("resize: %s", a.Err)
	}
	masterNonBlocking(t, rr.cmd.Process.Pid, "after a resize")
	// And it is read: a line through cat comes back.
	if a := c.ask(&proto.Msg{T: proto.TInput, Data: []byte("through the poller\n"), Block: true}); a.Err != "" {
		t.Fatalf("input: %s", a.Err)
	}
	c.readUntil([]byte("through the poller"))
}

// masterNonBlocking checks that each terminal master pid holds
// (/dev/ptmx, as /proc names it) is open non-blocking, from its fdinfo.
func masterNonBlocking(t *testing.T, pid int, when string) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid)
	ents, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	masters := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, "fd", e.Name())); err != nil || l != "/dev/ptmx" {
			continue
		}
		masters++
		info, err := os.ReadFile(filepath.Join(dir, "fdinfo", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(info), "\n") {
			v, ok := strings.CutPrefix(line, "flags:")
			if !ok {
				continue
			}
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatalf("fdinfo flags %q: %v", v, err)
			}
			if flags&unix.O_NONBLOCK == 0 {
				t.Errorf("%s: the terminal's master (fd %s) is blocking (flags %#o): the pump would block a thread in read(2)", when, e.Name(), flags)
			}
		}
	}
	if masters == 0 {
		t.Fatalf("%s: the runner holds no terminal master", when)
	}
}

// TestTerminalHeldByABackgroundProcessIsClosed: a pty job whose own
// process exited while a background process still holds its terminal
// ends once the terminal has been quiet for ptyQuiet (ptyDrainMax at
// most), and the terminal is closed, as a closing terminal window would
// (docs/architecture.md). While the pump read the master in a blocking
// read(2), closing it did not end that read: the job's end waited for the
// background process (6 s here).
func TestTerminalHeldByABackgroundProcessIsClosed(t *testing.T) {
	rr := startRealRunner(t, nil)
	// The job's cwd: the background process's pid is left there, and the
	// test ends that process (it goes on after the job, as what a job
	// leaves running does).
	pidFile := filepath.Join(filepath.Dir(rr.dir), "work", "bg.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	})
	start := time.Now()
	rr.assignFrames("pty", "sleep 6 & echo $! > bg.pid; echo started")
	msgs := rr.end()
	took := time.Since(start)
	exit := msgs[len(msgs)-1]
	if exit.T != proto.TExit || exit.Status != "exited" || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("the job's end: %+v", exit)
	}
	if took > ptyDrainMax+time.Second {
		t.Fatalf("the job's end came after %v: the drain waited for the background process (the terminal is closed after %v of quiet, %v at most)", took, ptyQuiet, ptyDrainMax)
	}
	if b, err := os.ReadFile(filepath.Join(rr.job, OutputFile)); err != nil || !strings.Contains(string(b), "started") {
		t.Fatalf("output.log: %q, %v; want the job's line", b, err)
	}
	if strings.Contains(rr.log.String(), "copy terminal output") {
		t.Fatalf("closing the terminal was logged as a failure:\n%s", rr.log.String())
	}
}
