//go:build imagetest

package imagetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// dockerd is a Docker daemon the test started for itself: its own data and
// exec roots and socket, no bridge, no iptables rules, so nothing of the
// machine's networking changes and nothing is left when it stops.
type dockerd struct {
	dir  string
	sock string
	cmd  *exec.Cmd
}

func startDockerd(t *testing.T) *dockerd {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "shellctl-imagetest-docker-")
	if err != nil {
		t.Fatal(err)
	}
	d := &dockerd{dir: dir, sock: filepath.Join(dir, "docker.sock")}
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command("dockerd", "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "-H", "unix://"+d.sock,
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--userland-proxy=false")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		t.Skipf("cannot start dockerd: %v", err)
	}
	logf.Close()
	t.Cleanup(func() {
		d.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := d.docker("info").Run(); err == nil {
			return d
		}
		if d.cmd.ProcessState != nil || time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Skipf("the private dockerd did not come up within 60 s:\n%s", log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *dockerd) docker(args ...string) *exec.Cmd {
	cmd := exec.Command("docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+d.sock)
	return cmd
}

func (d *dockerd) out(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.docker(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// jobRecord is what these tests read of GET /v1/jobs/{id}/record.
type jobRecord struct {
	Status   string  `json:"status"`
	Reason   *string `json:"reason"`
	Message  *string `json:"message"`
	ExitCode *int    `json:"exit_code"`
	Signal   any     `json:"signal"` // a name such as "SIGKILL", or null
}

func recordOf(t *testing.T, c *client.Client, id string) jobRecord {
	t.Helper()
	code, body, err := c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/record", nil)
	if err != nil || code != 200 {
		t.Fatalf("record of %s: %d %s %v", id, code, body, err)
	}
	var r jobRecord
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r jobRecord) String() string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	i := func(p *int) string {
		if p == nil {
			return "<nil>"
		}
		return strconv.Itoa(*p)
	}
	return fmt.Sprintf("status %s reason %s exit_code %s signal %v message %q", r.Status, s(r.Reason), i(r.ExitCode), r.Signal, s(r.Message))
}

// The same image under Debian's docker.io, started with the flags a careful
// operator uses: a fork storm and a memory hog inside a job end that job,
// with the reason in its record, and the server goes on serving.
func TestImageUnderDocker(t *testing.T) {
	needs(t, "dockerd", "docker")
	tarball := filepath.Join(*imageDir, "shellctl-image.tar")
	d := startDockerd(t)
	d.out(t, "load", "-i", tarball)
	tokenFile := filepath.Join(d.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	os.Chown(tokenFile, uid, uid)
	name := "shellctl-it-" + strconv.Itoa(os.Getpid())
	const maxRuntime = 15 * time.Second
	d.out(t, "run", "-d", "--name", name, "--network", "none",
		"--read-only",
		"--tmpfs", "/tmp:rw,nosuid,nodev,size=256m",
		"--tmpfs", "/var/lib/shellctl:rw,exec,nosuid,nodev,size=256m,uid=10001,gid=10001,mode=0700",
		"--tmpfs", "/home/dify:rw,exec,nosuid,nodev,size=1g,uid=10001,gid=10001,mode=0750",
		"--tmpfs", "/workspace:rw,exec,nosuid,nodev,size=1g,uid=10001,gid=10001,mode=0755",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", "128", "--memory", "512m", "--cpus", "1",
		"--mount", "type=bind,src="+tokenFile+",dst="+tokenAt+",readonly",
		"-e", "SHELLCTL_AUTH_TOKEN_FILE="+tokenAt,
		// The image's HEALTHCHECK, probed every second here rather than
		// every 30 s (its command and retries stay the image's).
		"--health-interval", "1s",
		"shellctl:latest", "serve", "--listen", "0.0.0.0:5004", "--state-dir", stateDir,
		"--require-auth-token", "--max-job-runtime", maxRuntime.String(), "--verbose")
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := d.docker("logs", name).CombinedOutput()
			t.Logf("container log:\n%s", log)
			// The runners' logs: a runner that died says why there.
			rl, _ := d.docker("exec", name, "sh", "-c", "grep -h -m 12 -B 2 -A 8 -E '^(fatal|runtime:|panic)' "+stateDir+"/runner.log "+stateDir+"/jobs/*/runner.log 2>/dev/null | head -n 60").CombinedOutput()
			t.Logf("runner logs:\n%s", rl)
		}
		d.docker("rm", "-f", name).Run()
	})
	pid, err := strconv.Atoi(d.out(t, "inspect", "-f", "{{.State.Pid}}", name))
	if err != nil || pid <= 0 {
		t.Fatalf("pid of the container: %v", err)
	}
	b := &bundle{pid: pid, netns: fmt.Sprintf("/proc/%d/ns/net", pid)}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dialIn(b.netns), DisableKeepAlives: true}}
	b.c = &client.Client{BaseURL: "http://127.0.0.1:5004", Token: token, HTTP: hc}
	b.anon = &client.Client{BaseURL: "http://127.0.0.1:5004", HTTP: hc}
	eventually(t, 20*time.Second, "the container to serve /healthz", func() bool {
		code, _, err := b.anon.Do(ctx(t), "GET", "/healthz", nil)
		return err == nil && code == 200
	})
	// docker takes the HEALTHCHECK from the image and finds it healthy
	// (shellctl healthcheck, run inside the hardened container).
	if hc := d.out(t, "inspect", "-f", "{{json .Config.Healthcheck.Test}}", name); !strings.Contains(hc, "healthcheck") {
		t.Errorf("the container's Healthcheck test is %s, want the image's shellctl healthcheck", hc)
	}
	eventually(t, 30*time.Second, "docker to call the container healthy", func() bool {
		return d.out(t, "inspect", "-f", "{{.State.Health.Status}}", name) == "healthy"
	})
	serving := func(t *testing.T, after string) {
		t.Helper()
		if code, _, err := b.anon.Do(ctx(t), "GET", "/healthz", nil); err != nil || code != 200 {
			t.Fatalf("/healthz after %s: %d %v", after, code, err)
		}
		res, out := runDone(t, b.c, client.RunRequest{Script: "echo still-serving"})
		if res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(out, "still-serving") {
			// How it ended (status, reason, exit code, signal, message).
			t.Fatalf("a job after %s: %s, output %q", after, recordOf(t, b.c, res.JobID), out)
		}
	}

	t.Run("runs as 10001 without capabilities", func(t *testing.T) {
		_, out := runDone(t, b.c, client.RunRequest{Script: "echo uid=$(id -u); grep -E '^CapEff:' /proc/self/status | tr -d '\\t' | sed 's/:/=/'"})
		if m := kv(out); m["uid"] != "10001" || m["CapEff"] != "0000000000000000" {
			t.Errorf("job under docker: %q", out)
		}
	})

	t.Run("a memory hog ends its job, the server serves", func(t *testing.T) {
		// 64 MiB at a time, touched, until the container's 512 MiB limit
		// (about 6 s on this machine under load: hence the 15 s runtime
		// limit): the kernel's OOM killer takes the biggest process, the hog.
		res, out := runDone(t, b.c, client.RunRequest{Mode: "stdio", Script: "exec python3 -c 'b = []\nwhile True: b.append(bytearray(64 << 20))'", Timeout: 60})
		rec := recordOf(t, b.c, res.JobID)
		t.Logf("memory hog: %s (output %q)", rec, out)
		sig := fmt.Sprint(rec.Signal)
		killed := sig == "9" || strings.Contains(sig, "KILL") || (rec.ExitCode != nil && *rec.ExitCode == 137) || (rec.Reason != nil && strings.Contains(*rec.Reason, "oom"))
		if !killed || rec.Reason == nil || *rec.Reason == "" {
			t.Errorf("the memory hog's record does not say it was killed: %s", rec)
		}
		serving(t, "the memory hog")
	})

	t.Run("a fork storm ends its job, the server serves", func(t *testing.T) {
		// bash retries a fork that fails: this storm never ends by itself
		// and holds every pid the container may have.
		res, err := b.c.Run(ctx(t), client.RunRequest{Mode: "stdio", Script: "#!/bin/bash\nwhile :; do sleep 1000 & done\n", Timeout: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done {
			t.Fatalf("the fork storm ended by itself: %+v", res)
		}
		if code, _, err := b.anon.Do(ctx(t), "GET", "/healthz", nil); err != nil || code != 200 {
			t.Errorf("/healthz during the fork storm: %d %v", code, err)
		}
		to := 60.0
		for !res.Done {
			if res, err = b.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &to}); err != nil {
				t.Fatal(err)
			}
		}
		rec := recordOf(t, b.c, res.JobID)
		t.Logf("fork storm: %s", rec)
		if rec.Status != "terminated" || rec.Reason == nil || !strings.Contains(*rec.Reason, "runtime") {
			t.Errorf("the fork storm's record: %s; want terminated by the runtime limit (%v)", rec, maxRuntime)
		}
		serving(t, "the fork storm")
		for _, p := range b.procs(t) {
			if p.Name == "sleep" || p.Name == "bash" {
				t.Errorf("the storm's %s (pid %d in the container) is left", p.Name, p.NS)
				break
			}
		}
	})

	t.Run("docker stop ends and records the jobs within a second", func(t *testing.T) {
		if res, err := b.c.Run(ctx(t), client.RunRequest{Script: "trap '' TERM; echo ready; sleep 300", Timeout: 5}); err != nil || res.Done {
			if err == nil {
				t.Fatalf("the job ended at once: %s, output %q", recordOf(t, b.c, res.JobID), res.Output)
			}
			t.Fatalf("run: %v", err)
		}
		pfd, err := pidfdOpen(pid)
		if err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		d.out(t, "kill", "--signal", "TERM", name)
		took, err := waitPidfd(pfd, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("docker kill TERM to stopped: %v", took.Sub(sent))
		if took.Sub(sent) > time.Second {
			t.Errorf("the container took %v to stop after SIGTERM, over a second", took.Sub(sent))
		}
		log, _ := d.docker("logs", name).CombinedOutput()
		if !strings.Contains(string(log), "stopping as PID 1") || !strings.Contains(string(log), "stopped as PID 1") {
			t.Errorf("the server's log does not say it ended the jobs as PID 1:\n%s", log)
		}
	})
}
