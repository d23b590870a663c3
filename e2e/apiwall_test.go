package e2e

// "No job can use the API" (docs/security.md): a job that reaches the API
// starts a job with any cwd — writable — and leaves its confinement. These
// tests try it from inside real jobs, on every listener and address, with
// and without the token; and check that clients outside any job, and the
// Host/Origin rules against DNS rebinding, work as documented.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// otherLocalAddr is an address of this machine that is not loopback ("" if
// none): a job may try the API there when the server listens on all.
func otherLocalAddr() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			if n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return ""
}

func ipv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// wallTargets are the base URLs a job tries: the port of addr on
// 127.0.0.1, [::1] and the machine's other address.
func wallTargets(t *testing.T, addr string) []string {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	out := []string{"http://127.0.0.1:" + port}
	if ipv6Loopback() {
		out = append(out, "http://[::1]:"+port)
	}
	if o := otherLocalAddr(); o != "" {
		out = append(out, "http://"+o+":"+port)
	} else {
		t.Log("no non-loopback address here: the second-address case is not tried")
	}
	return out
}

func randHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// attackScript is what a hostile job does: every route that would let it
// act, on every target, with the token when it has one; each answer's
// status is printed as "<code> <what> <target>".
func attackScript(targets []string, metrics string, token, outside string) string {
	pwned := filepath.Join(outside, "pwned")
	auth := ""
	if token != "" {
		auth = `-H "Authorization: Bearer ` + token + `"`
	}
	// cwd "/" (the whole machine writable), and a cwd outside every rule
	// that the server would accept from a client: either way a job would run.
	runRoot := `{"script":"echo pwned > ` + pwned + `","cwd":"/"}`
	run := `{"script":"echo pwned > ` + pwned + `","cwd":"` + outside + `"}`
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	mcpCall := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell_run","arguments":{"script":"echo pwned > ` + pwned + `","cwd":"/"}}}`
	var b strings.Builder
	b.WriteString("command -v curl >/dev/null || { echo NO_CURL; exit 3; }\n")
	b.WriteString("try() { what=$1; base=$2; shift 2; code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' \"$@\"); echo \"$code $what $base\"; }\n")
	for _, base := range append(targets, metrics) {
		if base == "" {
			continue
		}
		fmt.Fprintf(&b, "try run %s %s -X POST -H 'Content-Type: application/json' -d '%s' %s/v1/jobs/run\n", base, auth, run, base)
		fmt.Fprintf(&b, "try run-cwd-root %s %s -X POST -H 'Content-Type: application/json' -d '%s' %s/v1/jobs/run\n", base, auth, runRoot, base)
		fmt.Fprintf(&b, "try list %s %s %s/v1/jobs\n", base, auth, base)
		fmt.Fprintf(&b, "try mcp-initialize %s %s -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d '%s' %s/mcp\n", base, auth, mcpInit, base)
		// A real session: the id initialize gave, then the call.
		fmt.Fprintf(&b, "sid=$(curl -s -m 10 -D - -o /dev/null %s -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d '%s' %s/mcp | tr -d '\\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *//p')\n", auth, mcpInit, base)
		fmt.Fprintf(&b, "curl -s -m 10 -o /dev/null %s -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H \"Mcp-Session-Id: $sid\" -d '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}' %s/mcp\n", auth, base)
		fmt.Fprintf(&b, "try mcp-call %s %s -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H \"Mcp-Session-Id: $sid\" -d '%s' %s/mcp\n", base, auth, mcpCall, base)
		fmt.Fprintf(&b, "try metrics %s %s %s/metrics\n", base, auth, base)
		fmt.Fprintf(&b, "try healthz %s %s/healthz\n", base, base)
		// Bytes written on a connection the job then closes at once, as
		// `echo ... > /dev/tcp/...` does: no answer is read, yet the
		// request must not be served either.
		u, _ := url.Parse(base)
		body := run
		fmt.Fprintf(&b, "python3 - <<'PY' 2>/dev/null || true\nimport socket\ns=socket.create_connection((%q,%s))\nb=%q\ns.sendall(('POST /v1/jobs/run HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Type: application/json\\r\\n%sContent-Length: %%d\\r\\n\\r\\n' %% len(b)).encode()+b.encode())\ns.close()\nPY\n",
			strings.Trim(u.Hostname(), "[]"), u.Port(), body, authLine(token))
	}
	return b.String()
}

func authLine(token string) string {
	if token == "" {
		return ""
	}
	return `Authorization: Bearer ` + token + `\r\n`
}

// checkRefused reads the job's report: every try refused with 403.
func checkRefused(t *testing.T, out string, wantLines int) {
	t.Helper()
	if strings.Contains(out, "NO_CURL") {
		t.Skip("no curl on this machine for the job to use")
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		n++
		if f[0] != "403" {
			t.Errorf("a job's %s on %s answered %s, want 403 forbidden_from_job", f[1], f[2], f[0])
		}
	}
	if n < wantLines {
		t.Errorf("the job reported %d tries, want %d:\n%s", n, wantLines, out)
	}
}

// checkNothingWritten: no job ever ran the attacker's script.
func checkNothingWritten(t *testing.T, pwned string) {
	t.Helper()
	// A job started through the API would run asynchronously: give it the
	// time such a job takes, then look.
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(pwned); err == nil {
		os.Remove(pwned)
		t.Errorf("%s was written: a job used the API to run a job of its choosing", pwned)
	}
}

func metricsBase(t *testing.T, s *server) string {
	line := s.waitStderr(t, "metrics address", func(l string) bool { return strings.Contains(l, "metrics without auth on http://") })
	i := strings.Index(line, "http://")
	return strings.TrimSuffix(strings.Fields(line[i:])[0], "/metrics")
}

// TestWallJobsCannotUseTheAPI: from inside pty and stdio jobs, with and
// without a token (the job knowing it), in the default layout and with
// --workspace-root, every route on every listener and address is refused
// and nothing is written outside.
func TestWallJobsCannotUseTheAPI(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name      string
		token     string
		workspace bool
	}{
		{"no-token", "", false},
		{"token", "wall-token", false},
		{"no-token-workspace-root", "", true},
		{"token-workspace-root", "wall-token", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--listen", "[::]:0", "--metrics-listen", "[::]:0"}
			var ws string
			if tc.workspace {
				ws = t.TempDir()
				args = append(args, "--workspace-root", ws)
			}
			s := startServer(t, serverOpts{token: tc.token, args: args})
			targets := wallTargets(t, s.URL)
			mb := metricsBase(t, s)
			mu, _ := url.Parse(mb)
			metricsTargets := wallTargets(t, "http://x:"+mu.Port())
			for _, mode := range []string{"pty", "stdio"} {
				t.Run(mode, func(t *testing.T) {
					outside := t.TempDir()
					pwned := filepath.Join(outside, "pwned")
					script := attackScript(targets, "", tc.token, outside)
					for _, m := range metricsTargets {
						script += fmt.Sprintf("try metrics-listener %s %s/metrics\ntry healthz-metrics-listener %s %s/healthz\n", m, m, m, m)
					}
					req := client.RunRequest{Script: script, Mode: mode, Timeout: 60}
					if tc.workspace {
						req.Cwd = ws
					}
					_, out := s.runDone(t, req)
					checkRefused(t, out, 7*len(targets)+2*len(metricsTargets))
					checkNothingWritten(t, pwned)
				})
			}
			// Each refusal is logged once, naming the job.
			s.waitStderr(t, "refusal logged", func(l string) bool {
				return strings.Contains(l, "refused a connection opened by a job's process") && strings.Contains(l, "job=")
			})
		})
	}
}

// TestWallLeftoverOfEndedJobCannotUseTheAPI: a `setsid`'d, `nohup`'d child
// of a job is the job's: refused while the job runs (with and without
// cgroups: the runner is its subreaper), and — with cgroups — after the job
// ended by itself and its runner left, too. (Without cgroups that last case
// is a documented limit of the fallback: docs/security.md.)
func TestWallLeftoverOfEndedJobCannotUseTheAPI(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name  string
		args  []string
		ended bool
		init  bool // the server is PID 1 of its namespace, as in a container
	}{
		{"cgroup/job-ended", nil, true, false},
		{"cgroup/job-running", nil, false, false},
		{"no-cgroup/job-running", []string{"--no-cgroup"}, false, false},
		// Without cgroups, the server adopts what an ended job left (it is
		// a child subreaper, and PID 1 in a container): its descendants
		// are jobs' processes.
		{"no-cgroup/job-ended", []string{"--no-cgroup"}, true, false},
		{"no-cgroup/pid1/job-ended", []string{"--no-cgroup"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s struct {
				URL, Home string
				c         *client.Client
			}
			if tc.init {
				is := startInitServer(t, tc.args...)
				s.URL, s.Home, s.c = is.c.BaseURL, is.Home, is.c
			} else {
				srv := startServer(t, serverOpts{args: tc.args})
				s.URL, s.Home, s.c = srv.URL, srv.Home, srv.c
			}
			report := filepath.Join(s.Home, "late-"+randHex(t))
			outside := t.TempDir()
			pwned := filepath.Join(outside, "pwned")
			goFile := filepath.Join(s.Home, "go-"+randHex(t))
			// An ended job's child waits for the test's word (a file
			// appearing), so the job has surely ended and its runner left
			// before it connects; a running job waits for its child's report.
			wait, after := "", fmt.Sprintf("; while [ ! -e %s ]; do sleep 0.05; done", report)
			if tc.ended {
				wait, after = fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done; ", goFile), ""
			}
			late := fmt.Sprintf(`%scurl -s -m 10 -o /dev/null -w '%%{http_code}' -X POST -d '{"script":"echo pwned > %s","cwd":"%s"}' %s/v1/jobs/run > %s.tmp; mv %s.tmp %s`,
				wait, pwned, outside, s.URL, report, report, report)
			res, err := s.c.Run(ctx(t), client.RunRequest{Script: "command -v curl >/dev/null || exit 3; setsid nohup sh -c '" + strings.ReplaceAll(late, "'", `'\''`) + "' >/dev/null 2>&1 < /dev/null & echo started" + after, Mode: "stdio", Timeout: 30})
			for err == nil && !res.Done {
				res, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: f64(30)})
			}
			if err != nil {
				t.Fatal(err)
			}
			if code(res) == 3 {
				t.Skip("no curl for the job")
			}
			if code(res) != 0 {
				t.Fatalf("job: exit %d", code(res))
			}
			if err := os.WriteFile(goFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			var got []byte
			for time.Now().Before(deadline) {
				if b, err := os.ReadFile(report); err == nil {
					got = b
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if got == nil {
				t.Fatal("the job's child never reported")
			}
			if string(got) != "403" {
				t.Errorf("the setsid'd, nohup'd child (job ended: %v) got %s, want 403", tc.ended, got)
			}
			checkNothingWritten(t, pwned)
		})
	}
}

// TestAPIClientsOutsideJobsServed: the CLI and a client shaped like Dify's
// Python SDK (python-requests headers; a real Python process where there is
// one), outside any job, are served as before.
func TestAPIClientsOutsideJobsServed(t *testing.T) {
	parallel(t)
	for _, listen := range []string{"127.0.0.1:0", "[::]:0"} {
		t.Run(listen, func(t *testing.T) {
			s := startServer(t, serverOpts{token: "cli-token", args: []string{"--listen", listen}})
			cli := exec.Command(filepath.Join(binDir, "shellctl"), "run", "echo", "from-cli")
			cli.Env = append(os.Environ(), "SHELLCTL_URL="+s.URL, "SHELLCTL_SERVER="+s.URL, "SHELLCTL_AUTH_TOKEN=cli-token")
			out, err := cli.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "from-cli") {
				t.Errorf("CLI run: %v\n%s", err, out)
			}
			// The SDK's shape (http-api.md): python-requests headers, JSON body.
			req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/jobs/run", strings.NewReader(`{"script":"echo sdk","timeout":30}`))
			req.Header.Set("User-Agent", "python-requests/2.32.3")
			req.Header.Set("Accept", "*/*")
			req.Header.Set("Accept-Encoding", "gzip, deflate")
			req.Header.Set("Connection", "keep-alive")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer cli-token")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "sdk") {
				t.Errorf("SDK-shaped run: %d %s", resp.StatusCode, body)
			}
			if py, err := exec.LookPath("python3"); err == nil {
				script := `import json,sys,urllib.request
r=urllib.request.Request(sys.argv[1]+"/v1/jobs/run",data=json.dumps({"script":"echo py"}).encode(),headers={"Content-Type":"application/json","Authorization":"Bearer cli-token"})
print(json.load(urllib.request.urlopen(r,timeout=30))["output"].strip())`
				out, err := exec.Command(py, "-c", script, s.URL).CombinedOutput()
				if err != nil || strings.TrimSpace(string(out)) != "py" {
					t.Errorf("Python client: %v %s", err, out)
				}
			}
		})
	}
}

// TestAPIHostAndOriginChecked: DNS-rebinding shapes are refused with the
// envelope, on the API and the metrics listener; addresses, localhost and
// what --allowed-hosts / --allowed-origins list are answered.
func TestAPIHostAndOriginChecked(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok", args: []string{"--metrics-listen", "127.0.0.1:0",
		"--allowed-hosts", "shellctl.sandbox.svc,Other.Example:8765", "--allowed-origins", "https://ok.example"}})
	mb := metricsBase(t, s)
	// Not the tests' checked transport: these 403s are the point.
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	do := func(base, path, host, origin string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %q, Origin %q): %v", path, host, origin, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	for _, tc := range []struct {
		base, path, host, origin string
		want                     int
		code                     string
	}{
		{s.URL, "/v1/jobs", "evil.example", "", 403, "forbidden_host"},
		{s.URL, "/v1/jobs", "evil.example:" + port, "", 403, "forbidden_host"},
		{s.URL, "/mcp", "evil.example", "", 403, "forbidden_host"},
		{s.URL, "/healthz", "evil.example", "", 403, "forbidden_host"},
		{s.URL, "/v1/jobs", "", "http://evil.example", 403, "forbidden_origin"},
		{s.URL, "/v1/jobs", "localhost:" + port, "http://evil.example", 403, "forbidden_origin"},
		{s.URL, "/v1/jobs", "", "null", 403, "forbidden_origin"},
		{mb, "/metrics", "evil.example", "", 403, "forbidden_host"},
		{mb, "/metrics", "", "http://evil.example", 403, "forbidden_origin"},
		{s.URL, "/v1/jobs", "", "", 200, ""},
		{s.URL, "/v1/jobs", "localhost:" + port, "", 200, ""},
		{s.URL, "/v1/jobs", "LOCALHOST", "", 200, ""},
		{s.URL, "/v1/jobs", "127.0.0.1", "", 200, ""},
		{s.URL, "/v1/jobs", "[::1]:" + port, "", 200, ""},
		{s.URL, "/v1/jobs", "shellctl.sandbox.svc:" + port, "", 200, ""},
		{s.URL, "/v1/jobs", "other.example", "", 200, ""},
		{s.URL, "/v1/jobs", "", "https://ok.example", 200, ""},
		{mb, "/metrics", "", "", 200, ""},
	} {
		got, body := do(tc.base, tc.path, tc.host, tc.origin)
		if got != tc.want || (tc.code != "" && !strings.Contains(body, `"code":"`+tc.code+`"`)) {
			t.Errorf("GET %s%s Host %q Origin %q: %d %s, want %d %s", tc.base, tc.path, tc.host, tc.origin, got, strings.TrimSpace(body), tc.want, tc.code)
		}
	}
}

// TestAllowJobClientsTurnsTheWallOff: the documented, unsafe way out.
func TestAllowJobClientsTurnsTheWallOff(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--allow-job-clients"}})
	_, out := s.runDone(t, client.RunRequest{Script: "command -v curl >/dev/null || { echo NO_CURL; exit; }; curl -s -m 10 -o /dev/null -w '%{http_code}' " + s.URL + "/healthz", Mode: "stdio"})
	if strings.Contains(out, "NO_CURL") {
		t.Skip("no curl for the job")
	}
	if strings.TrimSpace(out) != "200" {
		t.Errorf("with --allow-job-clients a job's /healthz answered %q, want 200", out)
	}
}

// TestServersShareACgroupParent is issue 34's reproduction: two servers
// whose runners make their job groups under one parent, one of them in a
// PID namespace of its own, run jobs in turn. A runner used to remove
// every empty sibling group whose pid it could not see — the other
// server's warm groups — and that server's next job failed to start.
// Then: a killed runner's empty group is still collected.
func TestServersShareACgroupParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (unshare -p, cgroups)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	g, err := newE2EGroup()
	if err != nil {
		t.Skipf("no cgroup of our own here: %v", err)
	}
	t.Cleanup(func() { g.kill() })
	parent := filepath.Join(g.dir, "srv")
	type srv struct {
		url, state string
		c          *client.Client
	}
	start := func(ns bool) srv {
		port := accFreePort(t)
		state := filepath.Join(t.TempDir(), "state")
		cmd := accServeCmd(t, port, state, []string{"--warm-runners", "2"}, nil)
		if ns {
			// --kill-child: the namespace (its server, runners and jobs)
			// ends with unshare.
			cmd.Args = append([]string{unshare, "-p", "-f", "--kill-child", "--mount-proc"}, cmd.Args...)
			cmd.Path = unshare
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.leafFD}
		cmd.Stderr = os.Stderr
		if !testing.Verbose() {
			cmd.Stderr = nil
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		u := fmt.Sprintf("http://127.0.0.1:%d", port)
		c := &client.Client{BaseURL: u, HTTP: &http.Client{Timeout: 60 * time.Second}}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if resp, err := http.Get(u + "/healthz"); err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server (unshare %v) did not start", ns)
			}
			time.Sleep(50 * time.Millisecond)
		}
		oaRegister(t, u)
		return srv{u, state, c}
	}
	a, b := start(false), start(true)
	const jobs = 30
	failed := 0
	for i := range jobs {
		s := a
		if i%2 == 1 {
			s = b
		}
		res, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo ok", Mode: "stdio", Timeout: 30})
		if err != nil || !res.Done || code(res) != 0 || strings.TrimSpace(res.Output) != "ok" {
			failed++
			out := ""
			if res != nil {
				out = fmt.Sprintf("exit %d, %q", code(res), res.Output)
			}
			t.Errorf("job %d on server %s: %v %s", i, s.url, err, out)
		}
	}
	t.Logf("%d of %d alternating jobs failed", failed, jobs)

	// A warm runner of a is killed: its group, empty, is removed by the
	// next sweep (the end of a's next job), as no runner holds its lock.
	sid, err := os.ReadFile(filepath.Join(a.state, "server-id"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := "shellctl-" + strings.TrimSpace(string(sid)) + "-"
	var victim string
	var victimPID int
	// Warm runners are made again after each job, in the background: under
	// load the last one may still be on its way.
	for deadline := time.Now().Add(15 * time.Second); victim == "" && time.Now().Before(deadline); {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			f := strings.Split(strings.TrimPrefix(e.Name(), prefix), "-")
			pid := atoiOr0(f[0])
			procs, _ := os.ReadFile(filepath.Join(parent, e.Name(), "cgroup.procs"))
			if pid > 0 && len(strings.TrimSpace(string(procs))) == 0 && syscall.Kill(pid, 0) == nil {
				victim, victimPID = filepath.Join(parent, e.Name()), pid
				break
			}
		}
		if victim == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if victim == "" {
		t.Fatalf("no warm runner's group of server a under %s", parent)
	}
	syscall.Kill(victimPID, syscall.SIGKILL)
	for syscall.Kill(victimPID, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	// The other server's sweeps never take it (not its own)...
	if _, err := b.c.Run(ctx(t), client.RunRequest{Script: "true", Mode: "stdio", Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("server b's sweep removed a group of server a (%s): %v", victim, err)
	}
	// ...its own server's do.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := a.c.Run(ctx(t), client.RunRequest{Script: "true", Mode: "stdio", Timeout: 30}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(victim); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed runner's empty group %s is still there", victim)
		}
	}
}

// TestWallHandedOnSocketRefused: a job writes its request, then hands the
// socket to a unix socket's queue (SCM_RIGHTS) and closes its own
// descriptor, so no process holds it while the server decides; and one
// that forks the socket on and closes it in the parent. Refused with and
// without cgroups.
func TestWallHandedOnSocketRefused(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the job")
	}
	for _, nocg := range []bool{false, true} {
		name, args := "cgroup", []string(nil)
		if nocg {
			name, args = "no-cgroup", []string{"--no-cgroup"}
		}
		t.Run(name, func(t *testing.T) {
			s := startServer(t, serverOpts{args: args})
			u, _ := url.Parse(s.URL)
			outside := t.TempDir()
			pwned := filepath.Join(outside, "pwned")
			body := `{"script":"echo pwned > ` + pwned + `","cwd":"` + outside + `"}`
			script := handedOnScript(u.Hostname(), u.Port(), body)
			_, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Timeout: 30})
			if !strings.Contains(out, "done") {
				t.Fatalf("the job did not run its attack: %q", out)
			}
			checkNothingWritten(t, pwned)
			s.waitStderr(t, "refusal logged", func(l string) bool {
				return strings.Contains(l, "refused a connection opened by a job's process")
			})
		})
	}
}

// TestWallNonRootServerJobsCannotUseTheAPI: the documented deployment, a
// server that is not root (its jobs get no cgroup of their own here, so the
// walk decides): a job's request is refused, and so is one from a job's
// process that made itself non-dumpable, whose descriptors the server may
// not read.
func TestWallNonRootServerJobsCannotUseTheAPI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a server as another user")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the job")
	}
	const uid = 65534
	base, home, outside := nonRootDirs(t, uid)
	s := startServer(t, serverOpts{home: home, stateDir: filepath.Join(base, "state"), cred: &syscall.Credential{Uid: uid, Gid: uid}})
	u, _ := url.Parse(s.URL)
	pwned := filepath.Join(outside, "pwned")
	body := `{"script":"echo pwned > ` + pwned + `","cwd":"` + outside + `"}`
	script := nonDumpableScript(u.Hostname(), u.Port(), body)
	_, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Timeout: 30})
	for _, tag := range []string{"plain", "non-dumpable"} {
		if !strings.Contains(out, tag+" HTTP/1.1 403 Forbidden") {
			t.Errorf("a non-root server's job (%s) was not refused: %q", tag, out)
		}
	}
	checkNothingWritten(t, pwned)
}

// handedOnScript is a job's attack on the API at host:port with a request
// whose socket the job hands on before the server can look: once in flight
// in a unix socket's queue, once to a forked child. body is the run
// request it sends.
func handedOnScript(host, port, body string) string {
	return fmt.Sprintf(`python3 - <<'PY'
import array, os, socket, time
def request():
    s = socket.create_connection((%[1]q, %[2]s))
    b = %[3]q.encode()
    s.sendall(b"POST /v1/jobs/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %%d\r\n\r\n" %% len(b) + b)
    return s
# in flight while the server decides: the only reference is in a unix
# socket's queue; taken back after, to write the request
a, b = socket.socketpair(socket.AF_UNIX)
s = socket.create_connection((%[1]q, %[2]s))
a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [s.fileno()]))])
s.close()
time.sleep(1)
_, anc, _, _ = b.recvmsg(1, socket.CMSG_LEN(4))
fd = array.array("i", anc[0][2])[0]
s = socket.socket(fileno=fd)
body = %[3]q.encode()
s.sendall(b"POST /v1/jobs/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %%d\r\n\r\n" %% len(body) + body)
# forked on: the child holds it, the parent closes it
s2 = request()
if os.fork() == 0:
    time.sleep(3)
    os._exit(0)
s2.close()
time.sleep(3)
print("done")
PY`, host, port, body)
}

// TestWallServerWithoutCgroupFS: a server as a container runs it — PID 1,
// a cgroup namespace and no cgroup file system to be seen — serves a client
// in its network namespace but outside its PID namespace and group (a
// sidecar, `docker exec` into the network, the image tests' client), and
// still refuses its jobs, handed-on sockets included.
func TestWallServerWithoutCgroupFS(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the job")
	}
	s := startInitServerIn(t, initNS{noCgroupFS: true})
	for _, path := range []string{"/healthz", "/v1/jobs"} {
		code, body, err := s.c.Do(ctx(t), "GET", path, nil)
		if err != nil || code != 200 {
			t.Fatalf("GET %s from outside the server's namespaces: %d %s %v\n%s", path, code, body, err, s.log())
		}
	}
	u, _ := url.Parse(s.c.BaseURL)
	outside := t.TempDir()
	pwned := filepath.Join(outside, "pwned")
	body := `{"script":"echo pwned > ` + pwned + `","cwd":"` + outside + `"}`
	script := fmt.Sprintf(`python3 - <<'PY'
import socket
s = socket.create_connection((%[1]q, %[2]s))
b = %[3]q.encode()
s.sendall(b"POST /v1/jobs/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %%d\r\n\r\n" %% len(b) + b)
print(s.recv(4096).split(b"\r\n")[0].decode())
PY
`, u.Hostname(), u.Port(), body) + handedOnScript(u.Hostname(), u.Port(), body)
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Mode: "stdio", Timeout: 30})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Output
	for !res.Done {
		to := 30.0
		if res, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &to}); err != nil {
			t.Fatal(err)
		}
		out += res.Output
	}
	if !strings.Contains(out, "HTTP/1.1 403") || !strings.Contains(out, "done") {
		t.Fatalf("the job's direct request was not refused, or its attack did not run: %q\n%s", out, s.log())
	}
	checkNothingWritten(t, pwned)
}

// nonRootDirs makes a base directory with a Home and an outside directory
// in it, owned by uid, for a server that runs as uid.
func nonRootDirs(t *testing.T, uid int) (base, home, outside string) {
	t.Helper()
	var err error
	base, err = os.MkdirTemp("", "shellctl-e2e-apiwall-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, outside = filepath.Join(base, "home"), filepath.Join(base, "outside")
	for _, d := range []string{home, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{base, home, outside} {
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return base, home, outside
}

// TestNonRootServerServesClientsBesideIt: a server that is not root, in
// the same cgroup as its clients (no cgroup of its own: a systemd user
// service, a container's PID 1 beside a `docker exec`), serves a client of
// another user, whose descriptors it may not read (the jobs are all its
// own user), and the shellctl CLI of its own user (a client is dumpable);
// its jobs are still refused, a non-dumpable one and handed-on sockets
// included.
func TestNonRootServerServesClientsBesideIt(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a server as another user")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the job")
	}
	const uid = 65534
	base, home, outside := nonRootDirs(t, uid)
	s := &server{t: t, Home: home, StateDir: filepath.Join(base, "state"), cred: &syscall.Credential{Uid: uid, Gid: uid}, noGroup: true}
	s.start()
	t.Cleanup(func() { s.terminateAll(); s.kill(syscall.SIGKILL); s.cleanupJobs() })
	// The test, root, beside the server.
	if code, body, err := s.c.Do(ctx(t), "GET", "/v1/jobs", nil); err != nil || code != 200 {
		t.Fatalf("GET /v1/jobs from root beside a non-root server: %d %s %v\n%s", code, body, err, strings.Join(s.allStderr(), "\n"))
	}
	// The CLI as the server's own user.
	cli := exec.Command(filepath.Join(binDir, "shellctl"), "ps", "-a", "--server", s.URL)
	cli.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	cli.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("shellctl ps as the server's user: %v\n%s\n%s", err, out, strings.Join(s.allStderr(), "\n"))
	}
	u, _ := url.Parse(s.URL)
	pwned := filepath.Join(outside, "pwned")
	body := `{"script":"echo pwned > ` + pwned + `","cwd":"` + outside + `"}`
	script := nonDumpableScript(u.Hostname(), u.Port(), body) + "\n" + handedOnScript(u.Hostname(), u.Port(), body)
	_, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Timeout: 30})
	for _, tag := range []string{"plain", "non-dumpable"} {
		if !strings.Contains(out, tag+" HTTP/1.1 403 Forbidden") {
			t.Errorf("a non-root server's job (%s) was not refused: %q", tag, out)
		}
	}
	if !strings.Contains(out, "done") {
		t.Errorf("the job's handed-on attack did not run: %q", out)
	}
	checkNothingWritten(t, pwned)
}

// nonDumpableScript is a job's request to the API at host:port, sent once
// as it is and once after the job made itself non-dumpable (PR_SET_DUMPABLE
// 0: its /proc/PID/fd is then readable only with CAP_SYS_PTRACE); it
// prints each answer's status line after "plain" and "non-dumpable".
func nonDumpableScript(host, port, body string) string {
	return fmt.Sprintf(`python3 - <<'PY'
import ctypes, socket
def ask(tag):
    s = socket.create_connection((%[1]q, %[2]s))
    b = %[3]q.encode()
    s.sendall(b"POST /v1/jobs/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %%d\r\n\r\n" %% len(b) + b)
    print(tag, s.recv(64).split(b"\r\n")[0].decode())
ask("plain")
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
ask("non-dumpable")
PY`, host, port, body)
}
