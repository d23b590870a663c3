//go:build imagetest

// Package imagetest runs shellctl's container image for real and checks it
// from outside over HTTP (make test-image; root). Under runc: unpacked by
// umoci, hardened (read-only root, tmpfs for state, Home and /tmp, no
// capabilities, no_new_privs, its own pid, network, ipc, uts, mount and
// cgroup namespaces). The client reaches the server inside the container's
// network namespace: its sockets are made on a thread that entered it.
package imagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/nsprocs"
)

var (
	imageDir = flag.String("image", "../../bin/image", "directory make image wrote (oci/, shellctl-image.tar)")
	binDir   = flag.String("bin", "../../bin", "the host's shellctl binaries (to read a stopped container's state)")
)

const (
	uid      = 10001
	token    = "image-test-token-3f9c2a"
	tokenAt  = "/run/secrets/shellctl-token"
	stateDir = "/var/lib/shellctl"
	home     = "/home/dify"
)

// needs skips the test, saying why, unless everything it needs is here.
func needs(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("make test-image needs root (runc, umoci unpack, namespaces)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian package %s): deploy/image/test-image.sh installs it", tool, tool)
		}
	}
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); errno != 0 || int(v) < 1 {
		t.Skipf("this kernel offers no Landlock (landlock_create_ruleset: %v): the image's jobs would fail closed", errno)
	}
	if _, err := os.Stat(filepath.Join(*imageDir, "oci", "index.json")); err != nil {
		t.Skipf("no image at %s (run make image): %v", *imageDir, err)
	}
}

// bundle is an unpacked image with a hardened runtime config.
type bundle struct {
	dir     string
	id      string
	pid     int // the container's PID 1 as the host numbers it
	netns   string
	c       *client.Client // with the token
	anon    *client.Client // without
	logPath string
}

type bundleOpts struct {
	stateHostDir string // bind-mount this host directory as the state dir (else a tmpfs)
}

var (
	unpackOnce sync.Once
	unpacked   string // umoci's bundle: rootfs/ and config.json, shared read-only
	unpackErr  error
)

// unpackImage unpacks the image once for every test (umoci unpack); each
// container then uses its rootfs read-only.
func unpackImage() (string, error) {
	unpackOnce.Do(func() {
		dir, err := os.MkdirTemp("/var/tmp", "shellctl-imagetest-rootfs-")
		if err != nil {
			unpackErr = err
			return
		}
		unpacked = filepath.Join(dir, "bundle")
		if out, err := exec.Command("umoci", "unpack", "--image", filepath.Join(*imageDir, "oci")+":latest", unpacked).CombinedOutput(); err != nil {
			unpackErr = fmt.Errorf("umoci unpack: %v\n%s", err, out)
		}
	})
	return unpacked, unpackErr
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if unpacked != "" {
		os.RemoveAll(filepath.Dir(unpacked))
	}
	os.Exit(code)
}

// unpack makes a runc bundle of the image (unpacked by umoci) with the
// hardened runtime config in place of umoci's.
func unpack(t *testing.T, o bundleOpts) *bundle {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "shellctl-imagetest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &bundle{dir: filepath.Join(dir, "bundle"), id: "shellctl-it-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)}
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	src, err := unpackImage()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var umociCfg struct {
		Process struct {
			Args []string `json:"args"`
			Env  []string `json:"env"`
			Cwd  string   `json:"cwd"`
			User struct {
				UID int `json:"uid"`
				GID int `json:"gid"`
			} `json:"user"`
		} `json:"process"`
	}
	if err := json.Unmarshal(raw, &umociCfg); err != nil {
		t.Fatalf("umoci's config.json: %v", err)
	}
	p := umociCfg.Process
	if p.User.UID != uid || p.User.GID != uid {
		t.Fatalf("the image runs as %d:%d, want %d:%d", p.User.UID, p.User.GID, uid, uid)
	}
	if strings.Join(p.Args, " ") != "/usr/local/bin/shellctl serve --listen 0.0.0.0:5004 --state-dir /var/lib/shellctl" {
		t.Fatalf("the image's command is %q", p.Args)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	os.Chown(tokenFile, uid, uid)
	stateMount := map[string]any{"destination": stateDir, "type": "tmpfs", "source": "tmpfs",
		"options": []string{"nosuid", "nodev", "mode=0700", "uid=10001", "gid=10001", "size=256m"}}
	if o.stateHostDir != "" {
		stateMount = map[string]any{"destination": stateDir, "type": "bind", "source": o.stateHostDir,
			"options": []string{"rbind", "nosuid", "nodev"}}
	}
	// The token by --token-file here (the docker test gives it by
	// SHELLCTL_AUTH_TOKEN_FILE).
	spec := hardenedSpec(filepath.Join(src, "rootfs"), append(p.Args, "--token-file", tokenAt, "--require-auth-token", "--verbose"), p.Env, p.Cwd, tokenFile, stateMount)
	js, _ := json.MarshalIndent(spec, "", "  ")
	if err := os.WriteFile(filepath.Join(b.dir, "config.json"), js, 0o600); err != nil {
		t.Fatal(err)
	}
	b.logPath = filepath.Join(dir, "container.log")
	return b
}

// hardenedSpec is the OCI runtime config the image is tested with (and
// docs/deploy.md shows): read-only root, no capabilities at all,
// no_new_privs, every namespace of its own, tmpfs where it writes.
func hardenedSpec(rootfs string, args, env []string, cwd, tokenFile string, stateMount map[string]any) map[string]any {
	none := []string{}
	tmpfs := func(dst, opts string) map[string]any {
		return map[string]any{"destination": dst, "type": "tmpfs", "source": "tmpfs", "options": strings.Split(opts, ",")}
	}
	return map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal":        false,
			"user":            map[string]any{"uid": uid, "gid": uid},
			"args":            args,
			"env":             env,
			"cwd":             cwd,
			"noNewPrivileges": true,
			"capabilities":    map[string]any{"bounding": none, "effective": none, "inheritable": none, "permitted": none, "ambient": none},
			"rlimits":         []map[string]any{nofile()},
		},
		"root":     map[string]any{"path": rootfs, "readonly": true},
		"hostname": "shellctl",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
			tmpfs("/dev", "nosuid,strictatime,mode=755,size=65536k"),
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			tmpfs("/dev/shm", "nosuid,noexec,nodev,mode=1777,size=65536k"),
			{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			tmpfs("/tmp", "nosuid,nodev,mode=1777,size=256m"),
			tmpfs(home, "nosuid,nodev,mode=0750,uid=10001,gid=10001,size=512m"),
			tmpfs("/workspace", "nosuid,nodev,mode=0755,uid=10001,gid=10001,size=512m"),
			stateMount,
			{"destination": tokenAt, "type": "bind", "source": tokenFile, "options": []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
		},
		"linux": map[string]any{
			"namespaces": []map[string]any{{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "cgroup"}},
			"maskedPaths": []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

// nofile is RLIMIT_NOFILE for the container: 65536, or less where this
// process may not raise its own hard limit that far.
func nofile() map[string]any {
	n := uint64(65536)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Max < n {
		n = rl.Max
	}
	return map[string]any{"type": "RLIMIT_NOFILE", "hard": n, "soft": n}
}

// run starts the container detached and waits until it serves.
func (b *bundle) run(t *testing.T) {
	t.Helper()
	logf, err := os.Create(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// runc's own errors go to its log file; the container's stdout and
	// stderr (the server's log) to logf.
	runcLog := b.logPath + ".runc"
	cmd := exec.Command("runc", "--log", runcLog, "run", "--detach", "--bundle", b.dir, b.id)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(b.logPath)
		rlog, _ := os.ReadFile(runcLog)
		t.Fatalf("runc run: %v\n%s\n%s", err, rlog, log)
	}
	t.Cleanup(func() {
		exec.Command("runc", "delete", "--force", b.id).Run()
		if t.Failed() {
			log, _ := os.ReadFile(b.logPath)
			t.Logf("container log:\n%s", log)
		}
	})
	out, err := exec.Command("runc", "state", b.id).Output()
	if err != nil {
		t.Fatalf("runc state: %v", err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("runc state %s: %v", out, err)
	}
	b.pid = st.Pid
	b.netns = fmt.Sprintf("/proc/%d/ns/net", st.Pid)
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dialIn(b.netns), DisableKeepAlives: true}}
	b.c = &client.Client{BaseURL: "http://127.0.0.1:5004", Token: token, HTTP: hc}
	b.anon = &client.Client{BaseURL: "http://127.0.0.1:5004", HTTP: hc}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body, err := b.anon.Do(context.Background(), "GET", "/healthz", nil)
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(b.logPath)
			t.Fatalf("the container did not serve /healthz within 20 s (%d %s %v):\n%s", code, body, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialIn dials from inside the network namespace at nsPath: the socket is
// made on a thread that entered it (a socket stays in the namespace it was
// made in), and the thread goes back before it is used for anything else.
func dialIn(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			back, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, err}
				return
			}
			defer back.Close()
			target, err := os.Open(nsPath)
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, fmt.Errorf("enter %s: %w", nsPath, err)}
				return
			}
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			// A thread that cannot go back is not unlocked: it ends with
			// this goroutine.
			if unix.Setns(int(back.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// procs lists the processes of the container's PID namespace.
func (b *bundle) procs(t *testing.T) []nsprocs.Proc {
	t.Helper()
	ps, err := nsprocs.Of(b.pid)
	if err != nil {
		t.Fatalf("processes of the container's namespace: %v", err)
	}
	return ps
}

func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// runDone runs script to its end and returns its output.
func runDone(t *testing.T, c *client.Client, req client.RunRequest) (*client.JobResult, string) {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 30
	}
	res, err := c.Run(ctx(t), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Script, err)
	}
	out := res.Output
	for !res.Done {
		to := 30.0
		res, err = c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &to})
		if err != nil {
			t.Fatalf("wait %q: %v", req.Script, err)
		}
		out += res.Output
	}
	return res, out
}

func kv(out string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(strings.ReplaceAll(out, "\r", "")) {
		if k, v, ok := strings.Cut(f, "="); ok {
			if _, seen := m[k]; !seen {
				m[k] = v
			}
		}
	}
	return m
}

// The image under runc, hardened: everything an operator relies on,
// checked from outside over HTTP.
func TestImageUnderRunc(t *testing.T) {
	needs(t, "runc", "umoci")
	b := unpack(t, bundleOpts{})
	b.run(t)

	t.Run("health and token", func(t *testing.T) {
		code, body, err := b.anon.Do(ctx(t), "GET", "/healthz", nil)
		if err != nil || code != 200 {
			t.Fatalf("/healthz without a token: %d %s %v", code, body, err)
		}
		code, _, err = b.anon.Do(ctx(t), "GET", "/v1/jobs", nil)
		if err != nil || code != 401 {
			t.Errorf("/v1/jobs without the token: %d %v, want 401", code, err)
		}
		wrong := *b.anon
		wrong.Token = "not-" + token
		if code, _, err = wrong.Do(ctx(t), "GET", "/v1/jobs", nil); err != nil || code != 401 {
			t.Errorf("/v1/jobs with a wrong token: %d %v, want 401", code, err)
		}
		if code, _, err = b.c.Do(ctx(t), "GET", "/v1/jobs", nil); err != nil || code != 200 {
			t.Errorf("/v1/jobs with the token from --token-file: %d %v, want 200", code, err)
		}
	})

	t.Run("HEALTHCHECK", func(t *testing.T) {
		test := healthcheck(t)
		if code, out := b.runcExec(t, test...); code != 0 {
			t.Errorf("the image's HEALTHCHECK %q in the container: exit %d, want 0 (healthy)\n%s", test, code, out)
		}
		// It asks the server: on a port nothing serves it says unhealthy.
		other := append(slices.Clone(test[:len(test)-1]), "127.0.0.1:5999")
		if code, out := b.runcExec(t, other...); code != 1 {
			t.Errorf("%q (nothing listens): exit %d, want 1 (unhealthy)\n%s", other, code, out)
		}
	})

	t.Run("pty job runs as 10001 without capabilities", func(t *testing.T) {
		res, out := runDone(t, b.c, client.RunRequest{Mode: "pty", Script: "echo tty=$(tty) uid=$(id -u) gid=$(id -g) home=$HOME\ngrep -E '^Cap(Eff|Prm|Bnd|Amb):|^NoNewPrivs:' /proc/self/status | tr -d '\\t' | sed 's/:/=/'\n"})
		if res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("pty job: %+v\n%s", res, out)
		}
		m := kv(out)
		if !strings.HasPrefix(m["tty"], "/dev/pts/") {
			t.Errorf("pty job has no terminal: %q", out)
		}
		if m["uid"] != "10001" || m["gid"] != "10001" || m["home"] != home {
			t.Errorf("job runs as uid %s gid %s home %s; want 10001 10001 %s", m["uid"], m["gid"], m["home"], home)
		}
		for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb"} {
			if m[k] != "0000000000000000" {
				t.Errorf("%s of the job is %q, want 0000000000000000 (output %q)", k, m[k], out)
			}
		}
		if m["NoNewPrivs"] != "1" {
			t.Errorf("NoNewPrivs of the job is %q, want 1", m["NoNewPrivs"])
		}
	})

	t.Run("stdio job and the tools", func(t *testing.T) {
		script := "echo out; echo err >&2; for x in bash git curl jq rg ps less python3 node; do command -v $x >/dev/null || echo missing=$x; done\n" +
			"for x in gcc cc make apt-get; do command -v $x >/dev/null && [ $x != apt-get ] && echo buildtool=$x; done; ls /var/cache/apt/archives | grep -c deb | sed 's/^/debs=/'\n"
		res, out := runDone(t, b.c, client.RunRequest{Mode: "stdio", Script: script})
		if res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(out, "out") {
			t.Fatalf("stdio job: %+v %q", res, out)
		}
		if strings.Contains(out, "missing=") || strings.Contains(out, "buildtool=") || !strings.Contains(out, "debs=0") {
			t.Errorf("the image's tools: %q", out)
		}
		code, body, err := b.c.Do(ctx(t), "GET", "/v1/jobs/"+res.JobID+"/stderr", nil)
		if err != nil || code != 200 || !strings.Contains(string(body), "err") {
			t.Errorf("stderr of the stdio job: %d %s %v", code, body, err)
		}
		// A script with a #! line is executed from the state dir (which
		// therefore must not be mounted noexec).
		for _, interp := range []string{"#!/bin/bash\necho shebang=$BASH_VERSION", "#!/usr/bin/env python3\nprint('shebang=python')", "#!/usr/bin/env node\nconsole.log('shebang=node')"} {
			res, out := runDone(t, b.c, client.RunRequest{Mode: "stdio", Script: interp})
			if res.ExitCode == nil || *res.ExitCode != 0 || kv(out)["shebang"] == "" {
				t.Errorf("script %q: %+v %q", interp, res, out)
			}
		}
	})

	t.Run("Landlock denies /tmp and the state dir", func(t *testing.T) {
		script := "touch /tmp/x 2>/dev/null && echo tmp=written || echo tmp=denied\n" +
			"ls " + stateDir + " >/dev/null 2>&1 && echo state=listed || echo state=denied\n" +
			"cat " + stateDir + "/state.db >/dev/null 2>&1 && echo db=read || echo db=denied\n" +
			"cat " + tokenAt + " >/dev/null 2>&1 && echo token=read || echo token=denied\n" +
			"touch $HOME/mine && echo home=written || echo home=denied\n" +
			"touch /etc/x 2>/dev/null && echo etc=written || echo etc=denied\n"
		_, out := runDone(t, b.c, client.RunRequest{Script: script})
		m := kv(out)
		for k, want := range map[string]string{"tmp": "denied", "state": "denied", "db": "denied", "token": "denied", "home": "written", "etc": "denied"} {
			if m[k] != want {
				t.Errorf("%s: %q, want %q (output %q)", k, m[k], want, out)
			}
		}
		// /tmp is a world-writable tmpfs and the state dir is the job's
		// own user's: only Landlock stands there.
	})

	t.Run("a killed runner's job is reaped", func(t *testing.T) {
		res, err := b.c.Run(ctx(t), client.RunRequest{Script: "echo runner=$PPID\nsleep 300 & wait\n", Timeout: 1})
		if err != nil {
			t.Fatal(err)
		}
		runnerNS := atoi(kv(res.Output)["runner"])
		host := 0
		for _, p := range b.procs(t) {
			if p.NS == runnerNS && p.NS > 1 {
				host = p.Host
			}
		}
		if host == 0 {
			t.Fatalf("runner %d not found in the container (output %q)", runnerNS, res.Output)
		}
		unix.Kill(host, unix.SIGKILL)
		eventually(t, 10*time.Second, "the job to be lost", func() bool {
			v, err := b.c.Status(ctx(t), res.JobID)
			return err == nil && v.Status == "lost"
		})
		eventually(t, 3*time.Second, "no zombie in the container", func() bool {
			for _, p := range b.procs(t) {
				if p.State == 'Z' {
					return false
				}
			}
			return true
		})
	})

	t.Run("terminate leaves nothing", func(t *testing.T) {
		res, err := b.c.Run(ctx(t), client.RunRequest{Script: "sleep 301 & setsid sleep 302 & nohup sleep 303 >/dev/null 2>&1 & echo started; wait", Timeout: 1})
		if err != nil || !strings.Contains(res.Output, "started") {
			t.Fatalf("run: %+v %v", res, err)
		}
		v, err := b.c.Terminate(ctx(t), res.JobID, 1)
		if err != nil || v.Status != "terminated" {
			t.Fatalf("terminate: %+v %v", v, err)
		}
		for _, p := range b.procs(t) {
			// The server, its warm runners and their stages (named
			// shellctl-stage once started; for a moment before, "exe"
			// through /proc/self/exe, or the descriptor's number through
			// a descriptor: a warm runner started as the job ended).
			if p.Name != "shellctl" && p.Name != "shellctl-runner" && p.Name != "shellctl-stage" && p.Name != "exe" && !allDigits(p.Name) {
				t.Errorf("after terminate, %s (pid %d in the container, state %c) is left", p.Name, p.NS, p.State)
			}
		}
	})

	t.Run("snapshot save and restore", func(t *testing.T) {
		runDone(t, b.c, client.RunRequest{Script: "mkdir -p $HOME/proj && echo kept-across > $HOME/proj/notes.txt"})
		code, arc, err := b.c.Do(ctx(t), "POST", "/v1/snapshot/save", map[string]any{})
		if err != nil || code != 200 || len(arc) == 0 {
			t.Fatalf("snapshot save: %d %v (%d bytes)", code, err, len(arc))
		}
		runDone(t, b.c, client.RunRequest{Script: "rm -rf $HOME/proj"})
		req, _ := http.NewRequestWithContext(ctx(t), "POST", b.c.BaseURL+"/v1/snapshot/restore", bytes.NewReader(arc))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := b.c.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("snapshot restore: %d %s", resp.StatusCode, body)
		}
		_, out := runDone(t, b.c, client.RunRequest{Script: "cat $HOME/proj/notes.txt"})
		if !strings.Contains(out, "kept-across") {
			t.Errorf("after restore, notes.txt holds %q", out)
		}
	})

	t.Run("SIGTERM stops the container within a second", func(t *testing.T) {
		for _, s := range []string{"trap '' TERM; echo ready; sleep 300", "echo ready; sleep 301"} {
			if res, err := b.c.Run(ctx(t), client.RunRequest{Script: s, Timeout: 5}); err != nil || res.Done {
				t.Fatalf("run %q: %+v %v", s, res, err)
			}
		}
		took := b.stop(t)
		if took > time.Second {
			t.Errorf("the container took %v to stop after SIGTERM, over a second", took)
		}
		t.Logf("SIGTERM to stopped: %v", took)
		log, _ := os.ReadFile(b.logPath)
		if !bytes.Contains(log, []byte("stopping as PID 1")) {
			t.Errorf("the server's log does not say it stopped as PID 1:\n%s", log)
		}
	})
}

// stop sends SIGTERM to the container and waits until its PID 1 is gone.
func (b *bundle) stop(t *testing.T) time.Duration {
	t.Helper()
	pfd, err := pidfdOpen(b.pid)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if out, err := exec.Command("runc", "kill", b.id, "TERM").CombinedOutput(); err != nil {
		unix.Close(pfd)
		t.Fatalf("runc kill TERM: %v %s", err, out)
	}
	gone, err := waitPidfd(pfd, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return gone.Sub(sent)
}

func pidfdOpen(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd of the container's PID 1 (%d): %w", pid, err)
	}
	return fd, nil
}

// waitPidfd waits until the process of pidfd fd has exited (the pidfd turns
// readable) and closes fd; it says when.
func waitPidfd(fd int, limit time.Duration) (time.Time, error) {
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(limit/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("wait for the container's PID 1: %w", err)
		}
		if n == 0 {
			return time.Time{}, fmt.Errorf("the container's PID 1 is still there %v after SIGTERM", limit)
		}
		return time.Now(), nil
	}
}

// A container stop (SIGTERM to shellctl as PID 1) ends every job and
// records it: a server started afterwards on the container's state dir
// reads the ends (not jobs lost with the namespace).
func TestImageStopRecordsEveryEnd(t *testing.T) {
	needs(t, "runc", "umoci")
	state, err := os.MkdirTemp("/var/tmp", "shellctl-imagetest-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	os.Chown(state, uid, uid)
	os.Chmod(state, 0o700)
	b := unpack(t, bundleOpts{stateHostDir: state})
	b.run(t)
	var ids []string
	for _, req := range []client.RunRequest{
		{Mode: "pty", Script: "trap '' TERM HUP; echo ready; sleep 300"},
		{Mode: "stdio", Script: "echo ready; sleep 301"},
		{Mode: "stdio", Script: "sleep 302 & sleep 303 & echo ready; wait"},
	} {
		req.Timeout = 5
		res, err := b.c.Run(ctx(t), req)
		if err != nil || res.Done || !strings.Contains(res.Output, "ready") {
			t.Fatalf("run %q: %+v %v", req.Script, res, err)
		}
		ids = append(ids, res.JobID)
	}
	_, done := runDone(t, b.c, client.RunRequest{Script: "echo finished"})
	if !strings.Contains(done, "finished") {
		t.Fatalf("finished job: %q", done)
	}
	took := b.stop(t)
	if took > time.Second {
		t.Errorf("the container took %v to stop, over a second", took)
	}
	// The host's server, as the image's user, on the container's state dir.
	hostHome := filepath.Join(state + "-home")
	os.MkdirAll(hostHome, 0o700)
	os.Chown(hostHome, uid, uid)
	t.Cleanup(func() { os.RemoveAll(hostHome) })
	c := hostServer(t, state, hostHome)
	for _, id := range ids {
		code, body, err := c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/record", nil)
		if err != nil || code != 200 {
			t.Fatalf("record of %s: %d %s %v", id, code, body, err)
		}
		var rec struct {
			Status string  `json:"status"`
			Reason *string `json:"reason"`
			Ended  *string `json:"ended_at"`
		}
		json.Unmarshal(body, &rec)
		reason := "<nil>"
		if rec.Reason != nil {
			reason = *rec.Reason
		}
		if rec.Status != "terminated" || reason != "terminate_requested" || rec.Ended == nil {
			t.Errorf("job %s after the container stopped: status %q reason %s ended_at %v; want terminated, terminate_requested, recorded", id, rec.Status, reason, rec.Ended)
		}
	}
}

// hostServer starts bin/shellctl serve as uid 10001 on state and returns a
// client of it; the test's cleanup stops it.
func hostServer(t *testing.T, state, homeDir string) *client.Client {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join(*binDir, "shellctl"))
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--warm-runners", "0")
	cmd.Env = []string{"HOME=" + homeDir, "PATH=/usr/bin:/bin"}
	cmd.Dir = homeDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(unix.SIGTERM); cmd.Wait() })
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 512)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		n, err := stderr.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if i := bytes.Index(buf, []byte("serving on http://")); i >= 0 {
			rest := buf[i+len("serving on "):]
			if j := bytes.IndexByte(rest, ' '); j > 0 {
				go io.Copy(io.Discard, stderr)
				return &client.Client{BaseURL: string(rest[:j]), HTTP: &http.Client{Timeout: 30 * time.Second}}
			}
		}
		if err != nil {
			break
		}
	}
	t.Fatalf("the host's server did not start on the container's state dir:\n%s", buf)
	return nil
}

func atoi(s string) int { n, _ := strconv.Atoi(strings.TrimSpace(s)); return n }

// allDigits: a process started through a descriptor is named by its
// number until it names itself.
func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
