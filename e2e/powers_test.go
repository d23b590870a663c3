package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// A root job is not root's equal (issue 35, "the walls hold" 6): it keeps
// Docker's default capabilities, runs under a seccomp filter that refuses
// what a container without CAP_SYS_ADMIN may not do, may change the
// resources of no process but itself, and has an IPC namespace of its own.
// Each test tries it from inside a job, in both starts (direct and stage)
// and both modes.

// dockerDefaultCaps is Docker's default capability set as /proc shows it:
// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
// NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP.
const dockerDefaultCaps = "00000000a80425fb"

var powersStarts = []string{"direct", "stage"}

func powersRequireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: these walls cut a root server's jobs")
	}
	isoRequireLandlock(t)
}

// holdsSysAdmin reports whether this test holds CAP_SYS_ADMIN, as a server
// it starts will: only then do jobs get an IPC namespace of their own.
func holdsSysAdmin() bool {
	st, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<21) != 0
		}
	}
	return false
}

// powersKV runs script as a job and returns its "key=value" lines, with
// the job's record.
func powersKV(t *testing.T, s *server, req client.RunRequest) (map[string]string, *record, string) {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 30
	}
	res, out := s.runDone(t, req)
	kv := map[string]string{}
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	if code(res) != 0 {
		t.Fatalf("job exit %d: %s", code(res), out)
	}
	return kv, s.getRecord(t, res.JobID), out
}

const capsProbe = `for k in CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs Seccomp; do echo "$k=$(awk -v k="$k:" '$1==k {print $2}' /proc/self/status)"; done
echo "ipc=$(readlink /proc/self/ns/ipc)"
`

func powersInfo(t *testing.T, s *server) map[string]any {
	t.Helper()
	st, raw, err := s.c.Do(ctx(t), "GET", "/v1/info", nil)
	if err != nil || st != 200 {
		t.Fatalf("info: %d %s %v", st, raw, err)
	}
	var in struct {
		Policy map[string]any `json:"policy"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	return in.Policy
}

// A job of a root server holds exactly Docker's default capabilities in
// its effective, permitted, bounding and inheritable sets, no ambient
// ones, an IPC namespace that is not the server's, and a seccomp filter;
// --job-capabilities none and a list of its own are held exactly; the
// record and /v1/info say what was applied.
func TestPowersRootJobKeepsAContainersCapabilities(t *testing.T) {
	powersRequireRoot(t)
	ourIPC, _ := os.Readlink("/proc/self/ns/ipc")
	for _, c := range []struct{ flag, want string }{
		{"", dockerDefaultCaps},
		{"none", "0000000000000000"},
		{"CHOWN,cap_kill", "0000000000000021"},
	} {
		for _, start := range powersStarts {
			t.Run(fmt.Sprintf("%s/%s", c.flag, start), func(t *testing.T) {
				args := []string{"--job-start", start}
				if c.flag != "" {
					args = append(args, "--job-capabilities", c.flag)
				}
				s := startServer(t, serverOpts{args: args})
				for _, mode := range []string{"pty", "stdio"} {
					kv, rec, out := powersKV(t, s, client.RunRequest{Script: capsProbe, Mode: mode})
					for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd"} {
						if kv[k] != c.want {
							t.Errorf("%s: %s = %q, want %s\n%s", mode, k, kv[k], c.want, out)
						}
					}
					if kv["CapAmb"] != "0000000000000000" || kv["NoNewPrivs"] != "1" || kv["Seccomp"] != "2" {
						t.Errorf("%s: ambient %q, no_new_privs %q, seccomp mode %q: want none, 1, 2 (filter)", mode, kv["CapAmb"], kv["NoNewPrivs"], kv["Seccomp"])
					}
					if wantIPC := holdsSysAdmin(); wantIPC == (kv["ipc"] == ourIPC) || kv["ipc"] == "" {
						t.Errorf("%s: the job's IPC namespace %q is the machine's %q", mode, kv["ipc"], ourIPC)
					}
					iso := rec.Isolation
					if iso == nil || iso.Capabilities == nil || str(iso.Seccomp) != "default" || iso.IPCNamespace != holdsSysAdmin() {
						t.Fatalf("%s: the record's isolation %+v does not say what was applied", mode, iso)
					}
					var mask uint64
					for _, name := range iso.Capabilities {
						mask |= capBit(t, name)
					}
					if got := fmt.Sprintf("%016x", mask); got != c.want {
						t.Errorf("%s: the record says capabilities %v (%s), the job held %s", mode, iso.Capabilities, got, c.want)
					}
				}
				pol := powersInfo(t, s)
				if pol["job_seccomp"] != "default" || pol["job_ipc_namespace"] != holdsSysAdmin() {
					t.Errorf("info policy %v", pol)
				}
			})
		}
	}
}

// capBit is the bit of a capability name as the record writes it.
func capBit(t *testing.T, name string) uint64 {
	names := []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
		"LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE",
		"SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
		"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP"}
	for i, n := range names {
		if n == name {
			return 1 << i
		}
	}
	t.Fatalf("the record names an unknown capability %q", name)
	return 0
}

// buildPowers compiles testdata/powers.c into dir.
func buildPowers(t *testing.T, dir string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc to build the powers helper: %v", err)
	}
	bin := filepath.Join(dir, "powers")
	src, _ := filepath.Abs("testdata/powers.c")
	if out, err := exec.Command(cc, "-O2", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build the powers helper here (%v): %s", err, out)
	}
	return bin
}

// A root job cannot set the host name, make user or network namespaces
// (unshare or clone), use keyrings, load BPF, open perf events, mount,
// set the clock, make a userfaultfd, load modules, reboot or open files by
// handle: every call fails with EPERM; clone3 answers ENOSYS (so the C
// library falls back to clone, whose flags are checked: posix_spawn and
// pthread_create still work); an x32 call kills the process. (On a server without the walls, every one of them worked.)
func TestPowersRootJobCannotAdministerTheMachine(t *testing.T) {
	powersRequireRoot(t)
	work := t.TempDir()
	bin := buildPowers(t, work)
	mnt := filepath.Join(work, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"sethostname": "EPERM", "unshare_user": "EPERM", "unshare_net": "EPERM", "clone_user": "EPERM",
		"clone3": "ENOSYS", "add_key": "EPERM", "keyctl": "EPERM", "bpf": "EPERM", "perf_event_open": "EPERM",
		"mount": "EPERM", "settimeofday": "EPERM", "userfaultfd": "EPERM", "init_module": "EPERM", "reboot": "EPERM",
		"open_by_handle_at": "EPERM", "getpid": "0", "posix_spawn": "0", "pthread_create": "0",
	}
	if _, err := os.Stat("/proc/sys/abi"); err == nil && strings.Contains(runtimeArch(), "x86_64") {
		want["x32"] = "signal31" // SIGSYS: killed
	}
	for _, start := range powersStarts {
		t.Run(start, func(t *testing.T) {
			s := startServer(t, serverOpts{args: []string{"--job-start", start}})
			for _, mode := range []string{"pty", "stdio"} {
				kv, _, out := powersKV(t, s, client.RunRequest{Script: bin + " " + mnt + "\n", Cwd: work, Mode: mode})
				for k, v := range want {
					if kv[k] != v {
						t.Errorf("%s: %s = %q, want %s", mode, k, kv[k], v)
					}
				}
				if t.Failed() {
					t.Logf("%s output:\n%s", mode, out)
				}
			}
		})
	}
}

func runtimeArch() string {
	var u syscall.Utsname
	_ = syscall.Uname(&u)
	b := make([]byte, 0, len(u.Machine))
	for _, c := range u.Machine {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// procNice is a process's nice value and its RLIMIT_CPU as /proc shows
// them.
func procNice(t *testing.T, pid int) (nice string, cpuLimit string) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	nice = f[16] // field 19 of stat(5), counted after the comm's ")"
	limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	for _, line := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(line, "Max cpu time") {
			cpuLimit = strings.Join(strings.Fields(line)[3:5], " ")
		}
	}
	return nice, cpuLimit
}

// A job cannot set RLIMIT_CPU 0 (the kernel then kills the process) or
// renice the server or another job's runner: prlimit and renice fail, and
// both survive with their limits and priority as they were; the other
// job ends as it should, not lost. A job's own new commands still take a
// limit, a priority and CPUs (prlimit cmd, nice, taskset, ulimit).
func TestPowersResourceCallsReachOnlyTheJob(t *testing.T) {
	parallel(t)
	isoRequireLandlock(t)
	for _, tool := range []string{"prlimit", "renice", "taskset", "nice"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	for _, start := range powersStarts {
		t.Run(start, func(t *testing.T) {
			s := startServer(t, serverOpts{args: []string{"--job-start", start}})
			powersResourceCalls(t, s)
		})
	}
}

func powersResourceCalls(t *testing.T, s *server) {
	t.Helper()
	other, err := s.c.Run(ctx(t), client.RunRequest{Script: "read line; echo other-done\n", Mode: "pty", Timeout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	runner := 0
	for deadline := time.Now().Add(10 * time.Second); runner == 0 && time.Now().Before(deadline); {
		runner = fxRunnerPID(s, other.JobID)
		if runner == 0 {
			time.Sleep(20 * time.Millisecond) // the test's own wait for the record, not a job's
		}
	}
	if runner == 0 {
		t.Fatal("the other job's runner pid is not recorded")
	}
	server := s.cmd.Process.Pid
	serverNice, serverCPU := procNice(t, server)
	runnerNice, runnerCPU := procNice(t, runner)
	script := fmt.Sprintf(`for p in %d %d; do
  prlimit --pid $p --cpu=0 2>/dev/null; echo "prlimit_$p=$?"
  prlimit --pid $p --nofile=1:1 2>/dev/null; echo "prlimit_nofile_$p=$?"
  renice -n 19 -p $p >/dev/null 2>&1; echo "renice_$p=$?"
done
prlimit --cpu=1000 true; echo "self_prlimit=$?"
nice -n 5 true; echo "self_nice=$?"
taskset -c 0 true; echo "self_taskset=$?"
( ulimit -t 1000 ); echo "self_ulimit=$?"
`, server, runner)
	for _, mode := range []string{"pty", "stdio"} {
		kv, _, out := powersKV(t, s, client.RunRequest{Script: script, Mode: mode})
		for _, p := range []int{server, runner} {
			for _, k := range []string{"prlimit_%d", "prlimit_nofile_%d", "renice_%d"} {
				if key := fmt.Sprintf(k, p); kv[key] != "1" {
					t.Errorf("%s: %s = %q: a job changed the resources of %d\n%s", mode, key, kv[key], p, out)
				}
			}
		}
		for _, k := range []string{"self_prlimit", "self_nice", "self_taskset", "self_ulimit"} {
			if kv[k] != "0" {
				t.Errorf("%s: %s = %q: a job's own new command lost its resource calls\n%s", mode, k, kv[k], out)
			}
		}
	}
	time.Sleep(1100 * time.Millisecond) // RLIMIT_CPU 0 kills within a second of CPU: give it the chance
	if n, c := procNice(t, server); n != serverNice || c != serverCPU {
		t.Errorf("the server's nice %q and CPU limit %q were %q and %q", n, c, serverNice, serverCPU)
	}
	if n, c := procNice(t, runner); n != runnerNice || c != runnerCPU {
		t.Errorf("the other job's runner's nice %q and CPU limit %q were %q and %q", n, c, runnerNice, runnerCPU)
	}
	if _, err := s.c.Input(ctx(t), other.JobID, "go\n", client.WaitRequest{}); err != nil {
		t.Fatalf("input to the other job: %v", err)
	}
	to := 30.0
	res, err := s.c.Wait(ctx(t), other.JobID, client.WaitRequest{Timeout: &to})
	if err != nil || !res.Done || code(res) != 0 || res.Status == "lost" {
		t.Fatalf("the other job: %+v %v: want done with 0 (its runner survived)", res, err)
	}
}

// Work a package manager does as root still runs: a root job chowns a file
// in HOME and drops to another uid (setpriv) that writes where it owns.
func TestPowersAptGetStyleWorkStillRuns(t *testing.T) {
	powersRequireRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv here")
	}
	for _, start := range powersStarts {
		t.Run(start, func(t *testing.T) {
			s := startServer(t, serverOpts{args: []string{"--job-start", start}})
			// The build user reaches the job's cwd (a directory under /tmp
			// every user may traverse); HOME holds the root-owned work.
			work, err := os.MkdirTemp("", "shellctl-e2e-build-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(work) })
			os.Chmod(work, 0o755)
			script := `mkdir -p "$HOME/pkg" build && touch "$HOME/pkg/x.deb"
chown 4242:4242 "$HOME/pkg/x.deb" build; echo "chown=$?"
chmod 4755 "$HOME/pkg/x.deb"; echo "setuid_bit=$?"
setpriv --reuid 4242 --regid 4242 --clear-groups sh -c 'echo built > build/out; id -u'
echo "owner=$(stat -c %u build/out)"
`
			kv, _, out := powersKV(t, s, client.RunRequest{Script: script, Mode: "stdio", Cwd: work})
			if kv["chown"] != "0" || kv["setuid_bit"] != "0" || kv["owner"] != "4242" || !strings.Contains(out, "\n4242\n") {
				t.Fatalf("a root job's chown and uid drop did not work:\n%s", out)
			}
		})
	}
}

// --job-seccomp=off: no filter (the record and /v1/info say "off"), the
// capabilities still cut.
func TestPowersJobSeccompOff(t *testing.T) {
	powersRequireRoot(t)
	s := startServer(t, serverOpts{args: []string{"--job-seccomp=off"}})
	kv, rec, _ := powersKV(t, s, client.RunRequest{Script: capsProbe, Mode: "stdio"})
	if kv["Seccomp"] != "0" || kv["CapEff"] != dockerDefaultCaps {
		t.Errorf("with --job-seccomp=off: seccomp mode %q, CapEff %q", kv["Seccomp"], kv["CapEff"])
	}
	if rec.Isolation == nil || str(rec.Isolation.Seccomp) != "off" {
		t.Errorf("the record says seccomp %v", rec.Isolation)
	}
	if pol := powersInfo(t, s); pol["job_seccomp"] != "off" {
		t.Errorf("info says job_seccomp %v", pol["job_seccomp"])
	}
}

// A bad --job-capabilities or --job-seccomp stops serve at its start,
// naming the value and what to give.
func TestPowersBadFlagsStopServe(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--job-capabilities", "CHOWN,SYS_GOD"}, `"SYS_GOD" is not a capability`},
		{[]string{"--job-seccomp", "strict"}, `--job-seccomp "strict" is not one of default, off`},
	} {
		dir := t.TempDir()
		cmd := exec.Command(filepath.Join(binDir, "shellctl"), append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state")}, c.args...)...)
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
		done := make(chan struct{})
		var out []byte
		go func() { out, _ = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("serve %v kept running", c.args)
		}
		if cmd.ProcessState.Success() || !strings.Contains(string(out), c.want) {
			t.Errorf("serve %v: %v, %q: want a failure saying %q", c.args, cmd.ProcessState, out, c.want)
		}
	}
}

// A non-root server's jobs hold no capability, as before; the filter is
// there for them too, so the same user's server and runners keep their
// limits and priority.
func TestPowersNonRootServerJobUnchanged(t *testing.T) {
	parallel(t)
	isoRequireLandlock(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a server as another user")
	}
	const uid = 65534
	base, err := os.MkdirTemp("", "shellctl-e2e-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, state := filepath.Join(base, "home"), filepath.Join(base, "state")
	for _, d := range []string{base, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// What the same user holds outside shellctl: the job must hold the same.
	ref := exec.Command("awk", `$1 ~ /^Cap(Inh|Prm|Eff|Bnd|Amb):$/ {print $1 $2}`, "/proc/self/status")
	ref.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	want, err := ref.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range powersStarts {
		t.Run(start, func(t *testing.T) {
			s := startServer(t, serverOpts{home: home, stateDir: filepath.Join(state, start), args: []string{"--job-start", start},
				cred: &syscall.Credential{Uid: uid, Gid: uid}})
			res, out := s.runDone(t, client.RunRequest{Script: `awk '$1 ~ /^Cap(Inh|Prm|Eff|Bnd|Amb):$/ {print $1 $2}' /proc/self/status` + "\n", Mode: "stdio", Timeout: 30})
			if code(res) != 0 || strings.TrimSpace(out) != strings.TrimSpace(string(want)) {
				t.Errorf("a non-root server's job holds\n%s\nthe same user outside holds\n%s", out, want)
			}
			rec := s.getRecord(t, res.JobID)
			if rec.Isolation == nil || rec.Isolation.Capabilities == nil || len(rec.Isolation.Capabilities) != 0 || rec.Isolation.IPCNamespace {
				t.Errorf("the record of a non-root server's job: %+v: want capabilities [] and no IPC namespace", rec.Isolation)
			}
			if pol := powersInfo(t, s); pol["job_ipc_namespace"] != false {
				t.Errorf("info of a non-root server: %v", pol)
			}
			powersResourceCalls(t, s)
		})
	}
}
