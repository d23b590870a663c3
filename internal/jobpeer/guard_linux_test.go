package jobpeer

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ownedByChild makes a loopback connection from a process that is no
// descendant of ours (we stand for the server here, whose descendants are
// jobs'), started in the cgroup group (when not ""), and returns the
// server's end.
func ownedByChild(t testing.TB, group string) net.Conn {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	move := ""
	if group != "" {
		move = "echo $BASHPID > " + group + "/cgroup.procs; "
	}
	sh := exec.Command("bash", "-c", "( "+move+"exec 3<>/dev/tcp/127.0.0.1/"+port+" && exec sleep 60 ) >/dev/null 2>&1 </dev/null & echo $!")
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// A client outside every job is served, by cgroup or by the process walk;
// the verdict says which.
func TestCheckOutsideClient(t *testing.T) {
	sc := ownedByChild(t, "")
	for _, cfg := range []Config{{RunnerComm: "shellctl-runner"}, {RunnerComm: "shellctl-runner", CgroupDir: ownCgroupDir(t), JobGroups: true}} {
		g := New(cfg)
		v := g.Check(sc.LocalAddr().(*net.TCPAddr).AddrPort(), sc.RemoteAddr().(*net.TCPAddr).AddrPort())
		if v.Job {
			t.Errorf("cgroup dir %q: an outside client refused: %v", cfg.CgroupDir, v)
		}
		t.Logf("cgroup dir %q: %v", cfg.CgroupDir, v)
	}
}

// A client whose socket is gone before the check (written and closed at
// once) is refused: who sent the bytes cannot be told.
func TestCheckClosedLocalClientRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.Close()
	v := New(Config{RunnerComm: "shellctl-runner"}).Check(sc.LocalAddr().(*net.TCPAddr).AddrPort(), sc.RemoteAddr().(*net.TCPAddr).AddrPort())
	if !v.Job {
		t.Errorf("a closed local client was served: %v", v)
	}
}

func ownCgroupDir(t testing.TB) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	p, ok := v2Path(b)
	if !ok {
		t.Skip("no cgroup v2 path")
	}
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(m + p + "/cgroup.procs"); err == nil {
			return m + p
		}
	}
	t.Skip("cgroup2 mount not found")
	return ""
}

// The cost of one decision for a client outside any job: a netlink
// lookup, and — without cgroups, or for the first connection from a
// group — a walk of /proc.
func BenchmarkCheck(b *testing.B) {
	// The server's group is its own; the client is in another one.
	own := ownCgroupDir(b)
	other := own + "/jobpeer-bench-" + strconv.Itoa(os.Getpid())
	if err := os.Mkdir(other, 0o755); err != nil {
		b.Skip(err)
	}
	defer syscall.Rmdir(other)
	for _, tc := range []struct {
		name, clientGroup, serverGroup string
	}{
		{"no-cgroup", "", ""},
		{"cgroup/client-in-server-group", "", own},
		{"cgroup/client-in-other-group", other, own},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sc := ownedByChild(b, tc.clientGroup)
			local, remote := sc.LocalAddr().(*net.TCPAddr).AddrPort(), sc.RemoteAddr().(*net.TCPAddr).AddrPort()
			g := New(Config{RunnerComm: "shellctl-runner", CgroupDir: tc.serverGroup, JobGroups: tc.serverGroup != ""})
			if v := g.Check(local, remote); v.Job {
				b.Fatalf("refused: %v", v)
			}
			for b.Loop() {
				g.Check(local, remote)
			}
		})
	}
	b.Run("lookup-only", func(b *testing.B) {
		sc := ownedByChild(b, "")
		local, remote := sc.LocalAddr().(*net.TCPAddr).AddrPort(), sc.RemoteAddr().(*net.TCPAddr).AddrPort()
		for b.Loop() {
			lookupSocket(remote, local)
		}
	})
}
