package isolation

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/seccomp"
)

// wallsProbe prints what a job holds and what it may do: its capability
// sets, its IPC namespace, and the exit status of calls a root job must
// not make (an "=0" is a call that worked).
const wallsProbe = `
for k in CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs Seccomp; do
  echo "$k=$(awk -v k="$k:" '$1==k {print $2}' /proc/self/status)"
done
echo "ipc=$(readlink /proc/self/ns/ipc)"
unshare -U true 2>/dev/null; echo "unshare_user=$?"
unshare -n true 2>/dev/null; echo "unshare_net=$?"
hostname "$(hostname)" 2>/dev/null; echo "sethostname=$?"
prlimit --pid "$VICTIM" --cpu=0 2>/dev/null; echo "prlimit_other=$?"
renice -n 5 -p "$VICTIM" >/dev/null 2>&1; echo "renice_other=$?"
prlimit --cpu=100 true; echo "prlimit_self=$?"
nice -n 3 true; echo "nice_self=$?"
taskset -c 0 true; echo "taskset_self=$?"
( ulimit -n 256 ); echo "ulimit=$?"
touch f && chown 12345:12345 f; echo "chown=$?"
setpriv --reuid 12345 --regid 12345 --clear-groups id -u; echo "setpriv=$?"
`

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the walls cut a root job's powers")
	}
	for _, tool := range []string{"unshare", "prlimit", "renice", "setpriv", "taskset", "awk", "hostname"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: %v", tool, err)
		}
	}
}

// victim is a process of the test's own that the job tries to reach.
func victim(t *testing.T) *exec.Cmd {
	t.Helper()
	v := exec.Command("sleep", "60")
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Process.Kill(); v.Wait() })
	return v
}

func defaultWalls(t *testing.T) Walls {
	t.Helper()
	prog, err := seccomp.Default()
	if err != nil {
		t.Fatal(err)
	}
	return Walls{LimitCaps: true, KeepCaps: DefaultCapMask(), Seccomp: prog, NewIPC: true}
}

// A job of a root server keeps Docker's default capabilities only, no
// ambient ones, gets its own IPC namespace, and its seccomp filter refuses
// namespaces, the host name and resource calls on other processes, while
// ulimit, nice, taskset, prlimit of a new command, chown and a drop to
// another uid still work.
func TestStageWallsCutRootsPowers(t *testing.T) {
	requireRoot(t)
	l := newJobLayout(t)
	if err := os.Chmod(l.cwd, 0o777); err != nil {
		t.Fatal(err)
	}
	l.writeScript(t, wallsProbe)
	v := victim(t)
	cfg := l.config(map[string]string{"VICTIM": strconv.Itoa(v.Process.Pid)})
	cfg.Walls = defaultWalls(t)
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil || data[0].Effective&(1<<unix.CAP_SYS_ADMIN) == 0 {
		cfg.Walls.NewIPC = false // root in a container that took CAP_SYS_ADMIN: no namespace to make
	}
	r := runStage(t, cfg)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	ourIPC, _ := os.Readlink("/proc/self/ns/ipc")
	kv := r.kv()
	want := fmt.Sprintf("%016x", DefaultCapMask())
	checkKV(t, kv, map[string]string{
		"CapInh": want, "CapPrm": want, "CapEff": want, "CapBnd": want, "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
		"unshare_user": "1", "unshare_net": "1", "sethostname": "1", "prlimit_other": "1", "renice_other": "1",
		"prlimit_self": "0", "nice_self": "0", "taskset_self": "0", "ulimit": "0", "chown": "0", "setpriv": "0",
	})
	if cfg.Walls.NewIPC == (kv["ipc"] == ourIPC) || kv["ipc"] == "" {
		t.Errorf("the job's IPC namespace %q is the test's %q", kv["ipc"], ourIPC)
	}
	if !strings.Contains(r.stdout, "\n12345\n") {
		t.Errorf("setpriv did not run as uid 12345: %q", r.stdout)
	}
	if err := v.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the victim did not survive the job: %v", err)
	}
	a := r.applied
	if strings.Join(a.Capabilities, ",") != strings.Join(CapabilityNames(DefaultCapMask()), ",") || a.Seccomp != "default" || a.IPCNamespace != cfg.Walls.NewIPC {
		t.Errorf("applied: capabilities %v, seccomp %q, ipc namespace %v", a.Capabilities, a.Seccomp, a.IPCNamespace)
	}
}

// --job-capabilities none: nothing kept; a custom list: exactly it.
func TestStageWallsCapabilityLists(t *testing.T) {
	requireRoot(t)
	for _, list := range []string{"none", "CHOWN,NET_BIND_SERVICE"} {
		t.Run(list, func(t *testing.T) {
			l := newJobLayout(t)
			l.writeScript(t, `for k in CapInh CapPrm CapEff CapBnd; do echo "$k=$(awk -v k="$k:" '$1==k {print $2}' /proc/self/status)"; done`+"\n")
			cfg := l.config(nil)
			mask, err := ParseCapabilities(list)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Walls = Walls{LimitCaps: true, KeepCaps: mask}
			r := runStage(t, cfg)
			want := fmt.Sprintf("%016x", mask)
			checkKV(t, r.kv(), map[string]string{"CapInh": want, "CapPrm": want, "CapEff": want, "CapBnd": want})
			if len(r.applied.Capabilities) != len(CapabilityNames(mask)) || r.applied.Capabilities == nil {
				t.Errorf("applied capabilities %#v for %s", r.applied.Capabilities, list)
			}
		})
	}
}

// Walls that cannot be applied fail closed: the job exits 125 before its
// script runs, with a "shellctl: …" line: a program of a broken length
// (refused before the start) and one the kernel refuses (in the child).
func TestStageWallsFailClosed(t *testing.T) {
	for _, c := range []struct {
		name string
		prog []byte
		want string
	}{
		{"broken length", []byte{1, 2, 3}, "apply the job's seccomp filter: a program of 3 bytes"},
		{"refused by the kernel", []byte{0xff, 0xff, 0, 0, 0, 0, 0, 0}, "apply the job's seccomp filter: seccomp(SECCOMP_SET_MODE_FILTER)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newJobLayout(t)
			l.writeScript(t, "echo RAN\n")
			cfg := l.config(nil)
			cfg.Walls = Walls{Seccomp: c.prog}
			r := runStage(t, cfg)
			if r.code != ExitSetupFailed || strings.Contains(r.stdout, "RAN") || !strings.Contains(r.stderr, "shellctl: "+c.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q: want 125 and %q", r.code, r.stdout, r.stderr, c.want)
			}
			if r.applied.Error == "" || r.applied.Enabled {
				t.Errorf("applied says nothing of the failure: %+v", r.applied)
			}
		})
	}
}

// BenchmarkStartWalls is a confined start with each wall added in turn:
// what the capabilities, the filter and the IPC namespace cost a job.
func BenchmarkStartWalls(b *testing.B) {
	if _, _, err := detectABI(); err != nil {
		b.Skipf("Landlock not available: %v", err)
	}
	prog, err := seccomp.Default()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	devNull, _ := os.Open(os.DevNull)
	defer devNull.Close()
	for _, c := range []struct {
		name  string
		walls Walls
	}{
		{"none", Walls{}},
		{"caps", Walls{LimitCaps: true, KeepCaps: DefaultCapMask()}},
		{"caps+allow-only-filter", Walls{LimitCaps: true, KeepCaps: DefaultCapMask(), Seccomp: []byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}}},
		{"caps+seccomp", Walls{LimitCaps: true, KeepCaps: DefaultCapMask(), Seccomp: prog}},
		{"caps+seccomp+ipc", Walls{LimitCaps: true, KeepCaps: DefaultCapMask(), Seccomp: prog, NewIPC: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := JobConfig{Argv: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: dir, Home: dir, Policy: DefaultPolicy(), Walls: c.walls}
			for b.Loop() {
				st := startJob(b, &cfg, [3]*os.File{devNull, devNull, devNull})
				if st.PID == 0 {
					b.Fatal(st.Err)
				}
				var ws syscall.WaitStatus
				syscall.Wait4(st.PID, &ws, 0, nil)
			}
		})
	}
}
