package e2e

// Integration tests of path isolation (issue 4, shared/spec/isolation.md):
// every job runs in a Landlock domain built from the SERVER's environment;
// nothing in a job's env changes it; setup failures fail closed with 125.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
)

// isoLandlockInfo asks the kernel, from the test process, for its Landlock ABI
// version and the errata it has fixed. abi is 0 when Landlock is unusable;
// why then says so.
func isoLandlockInfo() (abi, errata int, why string) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		why = "landlock_create_ruleset: " + e.Error()
		if lsm, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil && !strings.Contains(string(lsm), "landlock") {
			why += "; landlock is not in /sys/kernel/security/lsm (" + strings.TrimSpace(string(lsm)) + ")"
		}
		return 0, 0, why
	}
	if r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_ERRATA); e == 0 {
		errata = int(r)
	}
	return int(v), errata, ""
}

// isoRequireLandlock skips the test when the kernel has no usable Landlock.
func isoRequireLandlock(t *testing.T) int {
	t.Helper()
	abi, _, why := isoLandlockInfo()
	if abi < 1 {
		t.Skipf("Landlock is not available on this kernel (%s): path isolation cannot be tested here", why)
	}
	return abi
}

func isoRandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// isoOutsideDir makes a fresh directory directly under /tmp: neither the Home
// nor the cwd of any job (the harness's Home lives under /tmp too, in its
// own t.TempDir).
func isoOutsideDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "shellctl-e2e-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func isoMkdir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// isoShq quotes s for sh.
func isoShq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// isoProbe builds a script that runs each check in a subshell and prints
// "name=yes" when it succeeded, "name=no" when it failed.
type isoProbe struct{ b strings.Builder }

func newIsoProbe() *isoProbe {
	p := &isoProbe{}
	p.b.WriteString("probe() { if (eval \"$2\") >/dev/null 2>&1; then echo \"$1=yes\"; else echo \"$1=no\"; fi; }\n")
	return p
}

func (p *isoProbe) check(name, code string) *isoProbe {
	p.b.WriteString("probe " + name + " " + isoShq(code) + "\n")
	return p
}

// raw adds a line as is (it should print name=value lines).
func (p *isoProbe) raw(line string) *isoProbe {
	p.b.WriteString(line + "\n")
	return p
}

func (p *isoProbe) String() string { return p.b.String() }

var isoKVLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$`)

// isoParseKV reads name=value lines of a job's output (a terminal's \r
// removed); the first value of a name wins.
func isoParseKV(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if mm := isoKVLine.FindStringSubmatch(l); mm != nil {
			if _, ok := m[mm[1]]; !ok {
				m[mm[1]] = mm[2]
			}
		}
	}
	return m
}

// isoRunJob runs req to its end and fails the test unless it exited 0. A job
// that failed because Landlock could not be set up skips the test.
func isoRunJob(t *testing.T, s *server, req client.RunRequest) string {
	t.Helper()
	res, out := s.runDone(t, req)
	if code(res) == 125 && strings.Contains(out, "Landlock") {
		t.Skipf("the job could not set up Landlock on this kernel: %q", out)
	}
	if code(res) != 0 {
		t.Fatalf("job %q (%s): status %s code %d, output %q", req.Script, req.Mode, res.Status, code(res), out)
	}
	return out
}

// isoWantProbes checks name=yes/no answers.
func isoWantProbes(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

var isoModes = []string{"pty", "stdio"}

func TestIsolationFilesystem(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	base := t.TempDir()
	cwd := isoMkdir(t, filepath.Join(base, "cwd"))
	other := isoMkdir(t, filepath.Join(base, "agent-b-home"))
	secret := filepath.Join(other, "notes.txt")
	if err := os.WriteFile(secret, []byte("agent b private\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := isoOutsideDir(t)
	tag := isoRandHex(6)
	tmpRoot := "/tmp/shellctl-e2e-" + tag
	usrFile := "/usr/shellctl-e2e-" + tag
	varTmp := "/var/tmp/shellctl-e2e-" + tag
	t.Cleanup(func() { os.RemoveAll(tmpRoot); os.RemoveAll(usrFile); os.RemoveAll(varTmp) })

	for _, mode := range isoModes {
		t.Run(mode, func(t *testing.T) {
			p := newIsoProbe().
				check("home_write", `echo h > "$HOME/home-`+mode+`.txt"`).
				check("cwd_write", `echo c > ./cwd-`+mode+`.txt`).
				check("cwd_mkdir", `mkdir ./sub-`+mode+` && echo x > ./sub-`+mode+`/f`).
				check("tmpdir_mktemp", `f=$(mktemp) && case "$f" in "$PWD"/*) echo t > "$f";; *) false;; esac`).
				check("etc_read", `cat /etc/passwd`).
				check("tmp_dir_write", `echo x > `+isoShq(filepath.Join(outside, "f-"+mode))).
				check("tmp_dir_mkdir", `mkdir `+isoShq(filepath.Join(outside, "d-"+mode))).
				check("tmp_dir_list", `ls `+isoShq(outside)).
				check("tmp_root_write", `echo x > `+isoShq(tmpRoot)).
				check("var_tmp_write", `echo x > `+isoShq(varTmp)).
				check("usr_write", `echo x > `+isoShq(usrFile)).
				check("other_read", `cat `+isoShq(secret)).
				check("other_list", `ls `+isoShq(other)).
				check("other_write", `echo x > `+isoShq(filepath.Join(other, "planted-"+mode))).
				check("state_list", `ls `+isoShq(s.StateDir)).
				raw(`echo "V_TMPDIR=$TMPDIR"; echo "V_TMP=$TMP"; echo "V_TEMP=$TEMP"; echo "V_HOME=$HOME"; echo "V_PWD=$(pwd -P)"`)
			out := isoRunJob(t, s, client.RunRequest{Script: p.String(), Mode: mode, Cwd: cwd})
			got := isoParseKV(out)
			isoWantProbes(t, "allowed", got, map[string]string{
				"home_write": "yes", "cwd_write": "yes", "cwd_mkdir": "yes", "tmpdir_mktemp": "yes", "etc_read": "yes",
			})
			isoWantProbes(t, "denied", got, map[string]string{
				"tmp_dir_write": "no", "tmp_dir_mkdir": "no", "tmp_dir_list": "no", "tmp_root_write": "no",
				"var_tmp_write": "no", "usr_write": "no",
				"other_read": "no", "other_list": "no", "other_write": "no", "state_list": "no",
			})
			for _, v := range []string{"V_TMPDIR", "V_TMP", "V_TEMP", "V_PWD"} {
				if got[v] != cwd {
					t.Errorf("%s = %q, want the cwd %q", v, got[v], cwd)
				}
			}
			if got["V_HOME"] != s.Home {
				t.Errorf("HOME = %q, want the server's %q", got["V_HOME"], s.Home)
			}
			// What the job says matches the disk.
			if b, err := os.ReadFile(filepath.Join(s.Home, "home-"+mode+".txt")); err != nil || string(b) != "h\n" {
				t.Errorf("file written in HOME: %q %v", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(cwd, "cwd-"+mode+".txt")); err != nil || string(b) != "c\n" {
				t.Errorf("file written in cwd: %q %v", b, err)
			}
			for _, p := range []string{filepath.Join(outside, "f-"+mode), filepath.Join(outside, "d-"+mode), tmpRoot, varTmp, usrFile, filepath.Join(other, "planted-"+mode)} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was created by a confined job", p)
				}
			}
		})
	}
}

func TestIsolationCreatesMissingHome(t *testing.T) {
	isoRequireLandlock(t)
	// The home is 0755 whatever the umask: start the server (and so its
	// runners) with a strict one.
	old := syscall.Umask(0o077)
	s := startServer(t, serverOpts{})
	syscall.Umask(old)
	base := t.TempDir()
	cwd := isoMkdir(t, filepath.Join(base, "cwd"))
	for _, mode := range isoModes {
		home := filepath.Join(base, "agent-home-"+mode)
		out := isoRunJob(t, s, client.RunRequest{
			Script: `echo "V_HOME=$HOME"; echo hi > "$HOME/made-by-job" && echo written=yes`,
			Mode:   mode, Cwd: cwd, Env: map[string]string{"HOME": home},
		})
		got := isoParseKV(out)
		if got["V_HOME"] != home || got["written"] != "yes" {
			t.Errorf("%s: job saw HOME %q, write %q (output %q)", mode, got["V_HOME"], got["written"], out)
		}
		fi, err := os.Stat(home)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: home %s not created: %v", mode, home, err)
		}
		if perm := fi.Mode().Perm(); perm != 0o755 {
			t.Errorf("%s: home created with mode %o, want 755", mode, perm)
		}
		if b, err := os.ReadFile(filepath.Join(home, "made-by-job")); err != nil || string(b) != "hi\n" {
			t.Errorf("%s: file in the created home: %q %v", mode, b, err)
		}
	}
}

func TestIsolationJobEnvCannotChangePolicy(t *testing.T) {
	parallel(t)
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	cwd := isoMkdir(t, filepath.Join(t.TempDir(), "cwd"))
	outside := isoOutsideDir(t)
	for i, env := range []map[string]string{
		{"SHELLCTL_ENABLE_PATH_ISOLATION": "false"},
		{"SHELLCTL_LANDLOCK_RW_PATHS": "/"},
		{"SHELLCTL_LANDLOCK_RW_PATHS": outside},
		{"SHELLCTL_LANDLOCK_RO_PATHS": "/", "SHELLCTL_LANDLOCK_RW_DEV_PATHS": "/"},
		{"SHELLCTL_ENABLE_PATH_ISOLATION": "false", "SHELLCTL_LANDLOCK_RW_PATHS": "/,/tmp," + outside},
	} {
		for _, mode := range isoModes {
			f := filepath.Join(outside, fmt.Sprintf("f-%d-%s", i, mode))
			p := newIsoProbe().
				check("outside_write", `echo x > `+isoShq(f)).
				check("outside_list", `ls `+isoShq(outside)).
				check("cwd_write", `echo x > ./ok`).
				raw(`echo "V_ISO=${SHELLCTL_ENABLE_PATH_ISOLATION-unset}"; echo "V_RW=${SHELLCTL_LANDLOCK_RW_PATHS-unset}"`)
			out := isoRunJob(t, s, client.RunRequest{Script: p.String(), Mode: mode, Cwd: cwd, Env: env})
			got := isoParseKV(out)
			what := fmt.Sprintf("job env %v (%s)", env, mode)
			// The entries do reach the job (explicit entries are honoured)...
			if v, ok := env["SHELLCTL_ENABLE_PATH_ISOLATION"]; ok && got["V_ISO"] != v {
				t.Errorf("%s: the job saw SHELLCTL_ENABLE_PATH_ISOLATION=%q", what, got["V_ISO"])
			}
			if v, ok := env["SHELLCTL_LANDLOCK_RW_PATHS"]; ok && got["V_RW"] != v {
				t.Errorf("%s: the job saw SHELLCTL_LANDLOCK_RW_PATHS=%q", what, got["V_RW"])
			}
			// ...and change nothing.
			isoWantProbes(t, what, got, map[string]string{"outside_write": "no", "outside_list": "no", "cwd_write": "yes"})
			if _, err := os.Lstat(f); err == nil {
				t.Errorf("%s: %s was created", what, f)
			}
		}
	}
}

func TestIsolationServerDisables(t *testing.T) {
	isoRequireLandlock(t)
	outside := isoOutsideDir(t)
	for _, tc := range []struct {
		value string
		on    bool
	}{
		{"false", false},
		{"FALSE", false},
		{"0", true}, // only "false" turns it off: an ambiguous value fails safe
		{"no", true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			s := startServer(t, serverOpts{env: []string{"SHELLCTL_ENABLE_PATH_ISOLATION=" + tc.value}})
			cwd := isoMkdir(t, filepath.Join(t.TempDir(), "cwd"))
			f := filepath.Join(outside, "f-"+tc.value)
			p := newIsoProbe().check("outside_write", `echo x > `+isoShq(f)).check("cwd_write", `echo x > ./ok`)
			got := isoParseKV(isoRunJob(t, s, client.RunRequest{Script: p.String(), Mode: "stdio", Cwd: cwd}))
			want := "yes"
			if tc.on {
				want = "no"
			}
			isoWantProbes(t, "server SHELLCTL_ENABLE_PATH_ISOLATION="+tc.value, got, map[string]string{"outside_write": want, "cwd_write": "yes"})
			_, err := os.Lstat(f)
			if exists := err == nil; exists == tc.on {
				t.Errorf("file in /tmp exists = %v with isolation on = %v", exists, tc.on)
			}
		})
	}
}

func TestIsolationServerRWPaths(t *testing.T) {
	isoRequireLandlock(t)
	extra := isoOutsideDir(t)
	still := isoOutsideDir(t)
	s := startServer(t, serverOpts{env: []string{"SHELLCTL_LANDLOCK_RW_PATHS=" + extra}})
	cwd := isoMkdir(t, filepath.Join(t.TempDir(), "cwd"))
	for _, mode := range isoModes {
		p := newIsoProbe().
			check("extra_write", `echo x > `+isoShq(filepath.Join(extra, "f-"+mode))).
			check("extra_list", `ls `+isoShq(extra)).
			check("other_write", `echo x > `+isoShq(filepath.Join(still, "f-"+mode))).
			check("home_write", `echo x > "$HOME/rw-`+mode+`"`).
			check("cwd_write", `echo x > ./rw-`+mode)
		got := isoParseKV(isoRunJob(t, s, client.RunRequest{Script: p.String(), Mode: mode, Cwd: cwd}))
		// HOME and cwd are always added to the server's list.
		isoWantProbes(t, "server SHELLCTL_LANDLOCK_RW_PATHS ("+mode+")", got, map[string]string{
			"extra_write": "yes", "extra_list": "yes", "other_write": "no", "home_write": "yes", "cwd_write": "yes",
		})
		if _, err := os.Stat(filepath.Join(extra, "f-"+mode)); err != nil {
			t.Errorf("%s: file in the extra rw dir: %v", mode, err)
		}
	}
}

func TestIsolationForcedFailureFailsClosed(t *testing.T) {
	// Needs no Landlock: the stage fails before it would apply it.
	s := startServer(t, serverOpts{env: []string{"SHELLCTL_TEST_FORCE_ISOLATION_FAILURE=boom"}})
	cwd := isoMkdir(t, filepath.Join(t.TempDir(), "cwd"))
	for _, mode := range isoModes {
		marker := filepath.Join(cwd, "ran-"+mode)
		res, out := s.runDone(t, client.RunRequest{Script: "touch " + isoShq(marker) + "; echo SCRIPT-RAN", Mode: mode, Cwd: cwd})
		if code(res) != 125 {
			t.Errorf("%s: status %s code %d, want exit 125 (output %q)", mode, res.Status, code(res), out)
		}
		if !isoHasLine(out, "shellctl:", "boom") {
			t.Errorf("%s: served output %q has no 'shellctl: ...boom' line", mode, out)
		}
		if strings.Contains(out, "SCRIPT-RAN") {
			t.Errorf("%s: the script ran: %q", mode, out)
		}
		if _, err := os.Lstat(marker); err == nil {
			t.Errorf("%s: the script's side effect %s exists", mode, marker)
		}
		if mode == "stdio" {
			// The stage's own line goes to stderr.log.
			errLog, _ := os.ReadFile(filepath.Join(filepath.Dir(res.OutputPath), "stderr.log"))
			if !isoHasLine(string(errLog), "shellctl:", "boom") {
				t.Errorf("stdio: stderr.log = %q, want the shellctl: line", errLog)
			}
		}
	}
}

// isoHasLine reports whether a line of out starts with prefix and contains sub.
func isoHasLine(out, prefix, sub string) bool {
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func TestIsolationJobCannotSignalServer(t *testing.T) {
	abi := isoRequireLandlock(t)
	_, errata, _ := isoLandlockInfo()
	if abi < 6 {
		t.Skipf("Landlock ABI %d has no signal scoping (needs 6)", abi)
	}
	if errata&(1<<1) == 0 {
		t.Skipf("kernel lacks the fix for Landlock erratum 2 (errata %#x): signal scoping is left out by design", errata)
	}
	script := func(pid int) string {
		return newIsoProbe().
			check("kill_server", fmt.Sprintf("kill -0 %d", pid)).
			check("kill_runner", `kill -0 $PPID`).
			check("kill_self", `kill -0 $$`).
			check("kill_child", `sleep 30 & c=$!; kill $c && wait $c; test $? -eq 143`).
			String()
	}
	s := startServer(t, serverOpts{})
	cwd := isoMkdir(t, filepath.Join(t.TempDir(), "cwd"))
	for _, mode := range isoModes {
		got := isoParseKV(isoRunJob(t, s, client.RunRequest{Script: script(s.cmd.Process.Pid), Mode: mode, Cwd: cwd}))
		isoWantProbes(t, "confined ("+mode+")", got, map[string]string{
			"kill_server": "no", "kill_runner": "no", "kill_self": "yes", "kill_child": "yes",
		})
	}
	// Control: without isolation the same job can signal its server, so
	// the check above means something.
	open := startServer(t, serverOpts{env: []string{"SHELLCTL_ENABLE_PATH_ISOLATION=false"}})
	got := isoParseKV(isoRunJob(t, open, client.RunRequest{Script: script(open.cmd.Process.Pid), Mode: "stdio", Cwd: cwd}))
	isoWantProbes(t, "isolation off", got, map[string]string{"kill_server": "yes", "kill_self": "yes"})
}
