package e2e

// Limits of issues 11 and 12: run and input bodies up to
// --max-request-bytes, input precedence, numbers that are not finite,
// terminal sizes, slow bodies, connection floods, and a 40 MB file moved
// in and out the way Dify's adapter does it.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// wantAPIError checks an answer's status and code, and that the message
// names want.
func wantAPIError(t *testing.T, what string, st int, raw []byte, err error, status int, code, want string) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	json.Unmarshal(raw, &env)
	if st != status || env.Error.Code != code || !strings.Contains(env.Error.Message, want) {
		if len(raw) > 300 {
			raw = raw[:300]
		}
		t.Errorf("%s = %d %s, want %d %s naming %q", what, st, raw, status, code, want)
	}
}

func TestLimitRequestBytesFlag(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--max-request-bytes", "1MiB"}})
	c := fxCtx(t, time.Minute)
	running, _ := fxStart(t, s, "pty", "sleep 30", 0.1)

	// Over the limit by Content-Length: refused before reading.
	big := strings.Repeat("x", 1<<20)
	st, raw, err := s.c.Do(c, "POST", "/v1/jobs/run", map[string]any{"script": big})
	wantAPIError(t, "run over --max-request-bytes", st, raw, err, 413, "request_too_large", "--max-request-bytes")
	st, raw, err = s.c.Do(c, "POST", "/v1/jobs/"+running.JobID+"/input", map[string]any{"text": big})
	wantAPIError(t, "input over --max-request-bytes", st, raw, err, 413, "request_too_large", "--max-request-bytes")

	// Over the limit without a Content-Length (chunked): cut while read.
	body, _ := json.Marshal(map[string]any{"script": big})
	req, _ := http.NewRequestWithContext(c, "POST", s.URL+"/v1/jobs/run", io.MultiReader(bytes.NewReader(body)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	wantAPIError(t, "chunked run over the limit", resp.StatusCode, raw, nil, 413, "request_too_large", "larger than 1048576")

	// Just under it: accepted, the script byte for byte.
	script := "cat <<'EOF' | wc -c\n" + strings.Repeat("y", 1<<20-200) + "\nEOF\n"
	res, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio"})
	if res.Status != "exited" || strings.TrimSpace(out) != strconv.Itoa(1<<20-200+1) {
		t.Errorf("run under the limit = %s %q", res.Status, out)
	}

	// Other bodies stay at 64 KiB.
	st, raw, err = s.c.Do(c, "POST", "/v1/jobs/"+running.JobID+"/wait", map[string]any{"pad": strings.Repeat("y", 65<<10)})
	wantAPIError(t, "wait over 64 KiB", st, raw, err, 413, "request_too_large", "65536")
}

// A script of several MiB (over the old 1 MiB cap) goes through the spool
// file: shebang detected, nothing left behind in jobs/.
func TestLimitLargeScripts(t *testing.T) {
	s := startServer(t, serverOpts{})
	payload := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MiB
	for _, tc := range []struct{ name, script string }{
		{"shell", "wc -c <<'EOF'\n" + payload + "\nEOF\n"},
		{"shebang", "#!/bin/sh\nwc -c <<'EOF'\n" + payload + "\nEOF\n"},
		{"escapes and UTF-8", "wc -c <<'EOF'\n" + strings.Repeat("é\t\"\\ 🙂\n", 400000) + "EOF\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, out := s.runDone(t, client.RunRequest{Script: tc.script, Mode: "stdio"})
			heredoc := tc.script[strings.Index(tc.script, "<<'EOF'\n")+8 : strings.LastIndex(tc.script, "EOF\n")]
			if res.Status != "exited" || strings.TrimSpace(out) != strconv.Itoa(len(heredoc)) {
				t.Fatalf("= %s %s %q, want the heredoc's %d bytes counted", res.Status, fxCode(res.ExitCode), out, len(heredoc))
			}
			got, err := os.ReadFile(filepath.Join(filepath.Dir(res.OutputPath), "script"))
			if err != nil || string(got) != tc.script {
				t.Fatalf("script file differs from the request's (%d bytes, want %d): %v", len(got), len(tc.script), err)
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(s.StateDir, "jobs", ".spool-*"))
	if len(left) != 0 {
		t.Errorf("spool files left: %v", left)
	}
	// A refused large run leaves no spool file either.
	st, raw, err := s.c.Do(fxCtx(t, time.Minute), "POST", "/v1/jobs/run", map[string]any{"script": payload, "mode": "tmux"})
	wantAPIError(t, "large run with a bad mode", st, raw, err, 422, "validation_error", "tmux")
	if left, _ := filepath.Glob(filepath.Join(s.StateDir, "jobs", ".spool-*")); len(left) != 0 {
		t.Errorf("spool files left after a refused run: %v", left)
	}
}

// Input of 9 MiB (three control messages) reaches a pty job byte for
// byte and in order.
func TestLimitLargeInput(t *testing.T) {
	s := startServer(t, serverOpts{})
	running, dir := fxStart(t, s, "pty", `stty -echo; cat > got`, 0.2)
	var b strings.Builder
	for i := 0; b.Len() < 9<<20; i++ {
		fmt.Fprintf(&b, "%08d %s\n", i, strings.Repeat("z", 54))
	}
	text := b.String()
	start := time.Now()
	if _, err := s.c.Input(fxCtx(t, time.Minute), running.JobID, text, client.WaitRequest{Offset: running.Offset, Timeout: f64(0.1)}); err != nil {
		t.Fatalf("input of %d bytes: %v", len(text), err)
	}
	got := filepath.Join(dir, "got")
	fxEventually(t, 60*time.Second, "the job to read all input", func() bool {
		fi, err := os.Stat(got)
		return err == nil && fi.Size() >= int64(len(text))
	})
	t.Logf("%d bytes of input read by the job after %v", len(text), time.Since(start).Round(time.Millisecond))
	if raw, _ := os.ReadFile(got); string(raw) != text {
		t.Errorf("job read %d bytes, not the %d sent in order", len(raw), len(text))
	}
}

// A finished job answers job_not_running whatever its mode: the terminal
// state is checked before the mode (as the original does).
func TestInputToFinishedJob(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range []string{"stdio", "pty"} {
		res, _ := s.runDone(t, client.RunRequest{Script: "true", Mode: mode})
		_, err := s.c.Input(ctx(t), res.JobID, "x\n", client.WaitRequest{})
		if ae, ok := err.(*client.Error); !ok || ae.Status != 409 || ae.Code != "job_not_running" {
			t.Errorf("input to a finished %s job: %v, want 409 job_not_running", mode, err)
		}
	}
}

// NaN and the infinities are refused as 422 wherever a number is read,
// and so are terminal sizes outside 1..4096 (in both modes).
func TestLimitNumbersMustBeFinite(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := fxCtx(t, time.Minute)
	// Running before the refused requests come: the run answers once the
	// job's first output went idle, and a job with output runs (a slow
	// start, as of a race-detector build, could still be starting after a
	// fixed wait).
	running, err := s.c.Run(c, client.RunRequest{Script: "echo up; exec sleep 30", Mode: "pty", Cwd: fxJobDir(t), Timeout: 30, IdleFlushSeconds: 0.05})
	if err != nil || running.Status != "running" || running.Output != "up\r\n" && running.Output != "up\n" {
		t.Fatalf("run: %+v %v, want running with its output", running, err)
	}
	id := running.JobID
	type tc struct {
		name, method, path, body, names string
	}
	cases := []tc{
		{"run timeout NaN", "POST", "/v1/jobs/run", `{"script":"true","timeout":NaN}`, "timeout"},
		{"run timeout Infinity", "POST", "/v1/jobs/run", `{"script":"true","timeout":Infinity}`, "timeout"},
		{"run timeout 1e400", "POST", "/v1/jobs/run", `{"script":"true","timeout":1e400}`, "timeout"},
		{"run idle NaN", "POST", "/v1/jobs/run", `{"script":"true","idle_flush_seconds":NaN}`, "idle_flush_seconds"},
		{"run idle -Infinity", "POST", "/v1/jobs/run", `{"script":"true","idle_flush_seconds":-Infinity}`, "idle_flush_seconds"},
		{"wait timeout NaN", "POST", "/v1/jobs/" + id + "/wait", `{"timeout":NaN}`, "timeout"},
		{"wait idle Infinity", "POST", "/v1/jobs/" + id + "/wait", `{"idle_flush_seconds":Infinity}`, "idle_flush_seconds"},
		{"input timeout NaN", "POST", "/v1/jobs/" + id + "/input", `{"text":"","timeout":NaN}`, "timeout"},
		{"terminate grace NaN", "POST", "/v1/jobs/" + id + "/terminate", `{"grace_seconds":NaN}`, "grace_seconds"},
		{"terminate grace Infinity", "POST", "/v1/jobs/" + id + "/terminate", `{"grace_seconds":Infinity}`, "grace_seconds"},
		{"terminate grace 1e300", "POST", "/v1/jobs/" + id + "/terminate", `{"grace_seconds":1e300}`, "grace_seconds"},
		{"terminate grace -1", "POST", "/v1/jobs/" + id + "/terminate", `{"grace_seconds":-1}`, "grace_seconds"},
		{"delete grace NaN", "DELETE", "/v1/jobs/" + id + "?force=true&grace_seconds=NaN", ``, "grace_seconds"},
		{"delete grace Inf", "DELETE", "/v1/jobs/" + id + "?force=true&grace_seconds=Inf", ``, "grace_seconds"},
		{"delete grace -Inf", "DELETE", "/v1/jobs/" + id + "?force=true&grace_seconds=-Inf", ``, "grace_seconds"},
		{"delete grace 1e300", "DELETE", "/v1/jobs/" + id + "?force=true&grace_seconds=1e300", ``, "grace_seconds"},
	}
	for _, mode := range []string{"pty", "stdio"} {
		for _, side := range []string{"cols", "rows"} {
			for _, v := range []string{"0", "-1", "100000", "NaN"} {
				other := map[string]string{"cols": "rows", "rows": "cols"}[side]
				cases = append(cases, tc{fmt.Sprintf("%s terminal %s %s", mode, side, v), "POST", "/v1/jobs/run",
					fmt.Sprintf(`{"script":"true","mode":%q,"terminal":{%q:%s,%q:24}}`, mode, side, v, other), side})
			}
		}
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			var body any
			if k.body != "" {
				body = []byte(k.body)
			}
			st, raw, err := s.c.Do(c, k.method, k.path, body)
			wantAPIError(t, k.name, st, raw, err, 422, "validation_error", k.names)
		})
	}
	if v, err := s.c.Status(c, id); err != nil || v.Status != "running" {
		t.Errorf("after the refused terminates and deletes the job is %+v %v, want running", v, err)
	}
	if list, _ := s.c.List(c, "", 200); len(list) != 1 {
		t.Errorf("refused runs started jobs: %+v", list)
	}
	// Sizes inside the range still work.
	res, out := s.runDone(t, client.RunRequest{Script: "stty size", Terminal: &client.Terminal{Cols: 4096, Rows: 1}})
	if res.Status != "exited" || strings.TrimSpace(out) != "1 4096" {
		t.Errorf("terminal 4096x1 = %s %q", res.Status, out)
	}
}

// slack scales the time bounds of these tests for race-detector builds
// (SHELLCTL_E2E_RACE), which run the server several times slower; the
// figures are claims about the real build.
func slack() time.Duration {
	if os.Getenv("SHELLCTL_E2E_RACE") != "" {
		return 5
	}
	return 1
}

// probe times /healthz and an authenticated run on a fresh connection.
type probe struct {
	url, token string
	// storm: the probe runs while other clients open connections as fast
	// as they can. A fresh connection may then wait for the kernel's SYN
	// retry (1 s) when the listen queue is momentarily full — no server
	// can answer a connection it has not been given — so time is only
	// reported; answers must still be right.
	storm bool
	mu    sync.Mutex
	worst time.Duration
	fails []string
	slow  []string
	n     int
}

func (p *probe) once() {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for _, step := range []struct{ name, method, path, body string }{
		{"healthz", "GET", "/healthz", ""},
		{"run", "POST", "/v1/jobs/run", `{"script":"echo ok","mode":"stdio","timeout":5}`},
	} {
		start := time.Now()
		req, _ := http.NewRequest(step.method, p.url+step.path, strings.NewReader(step.body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := hc.Do(req)
		var raw []byte
		if err == nil {
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		el := time.Since(start)
		p.mu.Lock()
		p.n++
		p.worst = max(p.worst, el)
		switch {
		case err != nil:
			p.fails = append(p.fails, fmt.Sprintf("%s: %v", step.name, err))
		case resp.StatusCode != 200 || step.name == "run" && !strings.Contains(string(raw), `"output":"ok\n"`):
			p.fails = append(p.fails, fmt.Sprintf("%s: %d %.200s", step.name, resp.StatusCode, raw))
		case el > slack()*time.Second && p.storm:
			p.slow = append(p.slow, fmt.Sprintf("%s took %v", step.name, el.Round(time.Millisecond)))
		case el > slack()*time.Second:
			p.fails = append(p.fails, fmt.Sprintf("%s took %v", step.name, el.Round(time.Millisecond)))
		}
		p.mu.Unlock()
	}
}

// every runs the probe on a ticker until stop is closed.
func (p *probe) every(d time.Duration, stop chan struct{}, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			p.once()
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
}

func (p *probe) check(t *testing.T, what string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("%s: %d probes, slowest %v", what, p.n, p.worst.Round(time.Millisecond))
	if len(p.slow) > 0 {
		t.Logf("%s: %d probes over the limit while connections were being opened (a SYN retry), e.g. %v", what, len(p.slow), p.slow[:min(len(p.slow), 5)])
	}
	if len(p.fails) > 0 {
		t.Errorf("%s: %d of %d probes failed, e.g. %v", what, len(p.fails), p.n, p.fails[:min(len(p.fails), 5)])
	}
}

func fdCount(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents)
}

func procStatusKB(pid int, field string) int64 {
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// 3000 clients that send their headers and then trickle nothing of their
// bodies: a third without the token (answered 401 at once and closed, not
// read), a third with small bodies and a third with 10 MiB ones (cut by
// --body-read-timeout: 408, or 503 for the ones still waiting for room in
// --max-body-memory). Meanwhile /healthz and a run answer within a second.
func TestLimitSlowBodies(t *testing.T) {
	const n = 3000
	const readTimeout = 3 * time.Second
	s := startServer(t, serverOpts{token: "slowtok", args: []string{"--body-read-timeout", "3"}})
	pid := s.cmd.Process.Pid
	addr := strings.TrimPrefix(s.URL, "http://")
	rssBefore := procStatusKB(pid, "VmRSS")
	p := &probe{url: s.URL, token: s.Token}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	p.every(100*time.Millisecond, stop, &wg)

	type result struct {
		kind   int
		status int
		after  time.Duration
		err    error
	}
	results := make([]result, n)
	var opened atomic.Int32
	var cw sync.WaitGroup
	sem := make(chan struct{}, 64)
	begin := time.Now()
	for i := 0; i < n; i++ {
		cw.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer cw.Done()
			kind := i % 3
			results[i].kind = kind
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			<-sem
			if err != nil {
				results[i].err = err
				return
			}
			defer conn.Close()
			auth := "Authorization: Bearer slowtok\r\n"
			length := 60000
			switch kind {
			case 0:
				auth = ""
			case 2:
				length = 10 << 20
			}
			start := time.Now()
			fmt.Fprintf(conn, "POST /v1/jobs/run HTTP/1.1\r\nHost: localhost\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"script\":\"", auth, length)
			opened.Add(1)
			conn.SetReadDeadline(time.Now().Add(readTimeout + 20*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			results[i].after = time.Since(start)
			if err != nil {
				results[i].err = err
				return
			}
			resp.Body.Close()
			results[i].status = resp.StatusCode
		}(i)
	}
	// Probe while all of them are held.
	fxEventually(t, 30*time.Second, "the slow clients to connect", func() bool { return opened.Load() == n })
	t.Logf("%d slow clients connected after %v; server fds %d, RSS %d → %d KiB", n, time.Since(begin).Round(time.Millisecond), fdCount(pid), rssBefore, procStatusKB(pid, "VmRSS"))
	cw.Wait()
	close(stop)
	wg.Wait()
	p.check(t, "healthz and run beside 3000 slow bodies")
	byKind := [3]map[int]int{{}, {}, {}}
	var slowest [3]time.Duration
	for _, r := range results {
		if r.err != nil {
			byKind[r.kind][-1]++
			continue
		}
		byKind[r.kind][r.status]++
		slowest[r.kind] = max(slowest[r.kind], r.after)
	}
	t.Logf("without token %v (slowest %v); small bodies %v (slowest %v); 10 MiB bodies %v (slowest %v)",
		byKind[0], slowest[0].Round(time.Millisecond), byKind[1], slowest[1].Round(time.Millisecond), byKind[2], slowest[2].Round(time.Millisecond))
	if byKind[0][401] != n/3 || slowest[0] > slack()*2*time.Second {
		t.Errorf("clients without the token: %v, slowest %v; want all 401 at once", byKind[0], slowest[0])
	}
	if byKind[1][408] != n/3 || slowest[1] > readTimeout+slack()*5*time.Second {
		t.Errorf("slow small bodies: %v, slowest %v; want all 408 after about %v", byKind[1], slowest[1], readTimeout)
	}
	if byKind[2][408]+byKind[2][503] != n/3 || slowest[2] > 2*readTimeout+slack()*5*time.Second {
		t.Errorf("slow 10 MiB bodies: %v, slowest %v; want 408 or 503 after about %v", byKind[2], slowest[2], readTimeout)
	}
	if fd := fdCount(pid); fd > 200 {
		t.Errorf("server holds %d descriptors after the slow clients were cut", fd)
	}
}

// floodHelperEnv makes the test binary a connection flooder (see init):
// one process cannot hold 20 000 sockets under this machine's descriptor
// limit, so two helpers hold 10 000 each.
const floodHelperEnv = "SHELLCTL_E2E_FLOOD"

func init() {
	spec := os.Getenv(floodHelperEnv)
	if spec == "" {
		return
	}
	// addr,count,source ip
	parts := strings.Split(spec, ",")
	n, _ := strconv.Atoi(parts[1])
	os.Exit(flood(parts[0], n, parts[2]))
}

// flood opens n idle connections to addr from source, says how many, and
// holds them until its stdin closes (at most two minutes).
func flood(addr string, n int, source string) int {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	conns := make([]net.Conn, n)
	var failed atomic.Int32
	var wg sync.WaitGroup
	next := atomic.Int32{}
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	fmt.Printf("opened %d failed %d\n", n-int(failed.Load()), failed.Load())
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
	}
	return 0
}

// 20 000 connections that never send a byte (no token, nothing): the
// server keeps at most --max-connections of them, displacing the oldest,
// and /healthz and an authenticated run on fresh connections answer
// within a second throughout. A client that keeps its connection (and
// made an authorized request on it) is not displaced.
func TestLimitConnectionFlood(t *testing.T) {
	const perHelper = 10000
	s := startServer(t, serverOpts{token: "floodtok"})
	pid := s.cmd.Process.Pid
	addr := strings.TrimPrefix(s.URL, "http://")
	kept := &client.Client{BaseURL: s.URL, Token: s.Token, HTTP: &http.Client{Timeout: 5 * time.Second}}
	if _, err := kept.Run(fxCtx(t, 10*time.Second), client.RunRequest{Script: "true", Mode: "stdio"}); err != nil {
		t.Fatal(err)
	}
	p := &probe{url: s.URL, token: s.Token, storm: true}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	p.every(100*time.Millisecond, stop, &wg)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	type helper struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		line  chan string
	}
	var helpers []*helper
	for i, src := range []string{"127.0.0.2", "127.0.0.3"} {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s", floodHelperEnv, addr, perHelper, src))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start flood helper %d: %v", i, err)
		}
		h := &helper{cmd: cmd, stdin: in, line: make(chan string, 1)}
		go func() {
			l, _ := bufio.NewReader(out).ReadString('\n')
			h.line <- l
		}()
		helpers = append(helpers, h)
		t.Cleanup(func() {
			in.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill() // by its PID: our own child
				<-done
			}
		})
	}
	total := 0
	for i, h := range helpers {
		select {
		case l := <-h.line:
			var opened, failed int
			fmt.Sscanf(l, "opened %d failed %d", &opened, &failed)
			t.Logf("helper %d: %s", i, strings.TrimSpace(l))
			total += opened
		case <-time.After(90 * time.Second):
			t.Fatalf("flood helper %d did not finish opening its connections", i)
		}
	}
	t.Logf("%d connections opened in %v; server holds %d descriptors", total, time.Since(begin).Round(time.Millisecond), fdCount(pid))
	if total < 2*perHelper*9/10 {
		t.Errorf("only %d of %d connections could be opened", total, 2*perHelper)
	}
	close(stop)
	wg.Wait()
	p.check(t, "healthz and run while 20 000 connections were opened")
	// With the flood held, idle: every probe within the limit.
	held := &probe{url: s.URL, token: s.Token}
	for i := 0; i < 20; i++ {
		held.once()
	}
	held.check(t, "healthz and run beside 20 000 idle connections")
	if fd := fdCount(pid); fd > 4096+200 {
		t.Errorf("server holds %d descriptors with --max-connections 4096", fd)
	}
	// The kept client's connection survived and still works.
	if _, err := kept.Run(fxCtx(t, 5*time.Second), client.RunRequest{Script: "true", Mode: "stdio"}); err != nil {
		t.Errorf("client that kept its connection through the flood: %v", err)
	}
}

// A 40 MB binary file moved into a job's cwd the way Dify's adapter does
// it (base64 between markers inside a script, `base64 -d` into a file)
// and back out (a job prints it as base64 between markers; read page by
// page with output_limit 16384 and wait(timeout=0) until not truncated),
// compared byte for byte. The server never holds the file in memory.
func TestTransfer40MBFile(t *testing.T) {
	parallel(t)
	const size = 40_000_000
	s := startServer(t, serverOpts{})
	pid := s.cmd.Process.Pid
	c := fxCtx(t, 5*time.Minute)
	cwd := fxJobDir(t)
	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	rng.Read(data)
	want := sha256.Sum256(data)
	hwmBefore := procStatusKB(pid, "VmHWM")

	// Upload: base64 wrapped at 76 columns, as `base64` writes it.
	enc := base64.StdEncoding.EncodeToString(data)
	var sb strings.Builder
	sb.Grow(len(enc) + len(enc)/76 + 200)
	sb.WriteString("base64 -d > blob.bin <<'__SHELLCTL_B64_END__'\n")
	for i := 0; i < len(enc); i += 76 {
		sb.WriteString(enc[i:min(i+76, len(enc))])
		sb.WriteByte('\n')
	}
	sb.WriteString("__SHELLCTL_B64_END__\necho upload-done\n")
	script := sb.String()
	enc = ""
	start := time.Now()
	res, err := s.c.Run(c, client.RunRequest{Script: script, Cwd: cwd, Timeout: 120})
	if err != nil {
		t.Fatalf("upload run (%d byte script): %v", len(script), err)
	}
	for !res.Done {
		res, err = s.c.Wait(c, res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: f64(60)})
		if err != nil {
			t.Fatal(err)
		}
	}
	upload := time.Since(start)
	if res.Status != "exited" || code(res) != 0 {
		t.Fatalf("upload job = %s %s", res.Status, fxCode(res.ExitCode))
	}
	if got, err := os.ReadFile(filepath.Join(cwd, "blob.bin")); err != nil || sha256.Sum256(got) != want {
		t.Fatalf("the uploaded file differs (%d bytes): %v", len(got), err)
	}
	hwmUpload := procStatusKB(pid, "VmHWM")

	// Download, page by page.
	start = time.Now()
	res, err = s.c.Run(c, client.RunRequest{Script: "echo __SHELLCTL_B64_BEGIN__; base64 -w 0 blob.bin; echo; echo __SHELLCTL_B64_END__", Cwd: cwd, Timeout: 1, OutputLimit: 16384})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.WriteString(res.Output)
	pages := 1
	for res.Truncated || !res.Done {
		timeout := 0.0
		if !res.Truncated {
			timeout = 30 // nothing more yet: wait for it
		}
		res, err = s.c.Wait(c, res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &timeout, OutputLimit: 16384})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		out.WriteString(res.Output)
		pages++
	}
	download := time.Since(start)
	hwmDownload := procStatusKB(pid, "VmHWM")
	text := out.String()
	b := strings.Index(text, "__SHELLCTL_B64_BEGIN__")
	e := strings.LastIndex(text, "__SHELLCTL_B64_END__")
	if b < 0 || e < b {
		t.Fatalf("markers not found in %d bytes of output", len(text))
	}
	payload := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, text[b+len("__SHELLCTL_B64_BEGIN__"):e])
	got, err := base64.StdEncoding.DecodeString(payload)
	if err != nil || sha256.Sum256(got) != want {
		t.Fatalf("downloaded file differs (%d bytes): %v", len(got), err)
	}
	t.Logf("40 MB file: upload %v (script %d bytes), download %v (%d pages of 16384); server VmHWM %d KiB before, %d after upload, %d after download",
		upload.Round(time.Millisecond), len(script), download.Round(time.Millisecond), pages, hwmBefore, hwmUpload, hwmDownload)
	if slack() > 1 {
		t.Logf("race-detector build: memory bound not checked")
	} else if hwmDownload*1024 > size {
		t.Errorf("server peak RSS %d KiB is above the file's size: it held the file in memory", hwmDownload)
	}
}

// The body read deadline ends with the body: a wait (and a run) that
// lasts longer than --body-read-timeout is not cut by it.
func TestLimitBodyDeadlineEndsWithTheBody(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--body-read-timeout", "1"}})
	c := fxCtx(t, time.Minute)
	running, _ := fxStart(t, s, "stdio", "sleep 30", 0.1)
	start := time.Now()
	res, err := s.c.Wait(c, running.JobID, client.WaitRequest{Offset: 0, Timeout: f64(2.5)})
	if el := time.Since(start); err != nil || res.Done || el < 2400*time.Millisecond {
		t.Fatalf("wait with timeout 2.5 beside --body-read-timeout 1 = %+v %v after %v", res, err, el)
	}
	start = time.Now()
	res, err = s.c.Run(c, client.RunRequest{Script: "sleep 2; echo late", Mode: "stdio", Timeout: 10})
	if el := time.Since(start); err != nil || res.Output != "late\n" || el < 2*time.Second {
		t.Fatalf("run of 2 s beside --body-read-timeout 1 = %+v %v after %v", res, err, el)
	}
}

// An input's room in --max-body-memory is given back once its text is
// sent, not after the wait that follows: a second large input is not held
// up by the first one's long wait.
func TestLimitBodyMemoryReleasedBeforeWait(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--max-body-memory", "1MiB", "--body-read-timeout", "2"}})
	running, dir := fxStart(t, s, "pty", `stty -echo; cat > got`, 0.2)
	line := strings.Repeat("q", 63) + "\n"
	text := strings.Repeat(line, 600<<10/len(line))
	first := make(chan error, 1)
	go func() {
		_, err := s.c.Input(fxCtx(t, time.Minute), running.JobID, text, client.WaitRequest{Offset: running.Offset, Timeout: f64(8)})
		first <- err
	}()
	got := filepath.Join(dir, "got")
	fxEventually(t, 20*time.Second, "the first input to reach the job", func() bool {
		fi, err := os.Stat(got)
		return err == nil && fi.Size() >= int64(len(text))
	})
	start := time.Now()
	_, err := s.c.Input(fxCtx(t, time.Minute), running.JobID, text, client.WaitRequest{Offset: running.Offset, Timeout: f64(0.1)})
	if el := time.Since(start); err != nil || el > slack()*1500*time.Millisecond {
		t.Fatalf("second large input while the first waits: %v after %v", err, el)
	}
	select {
	case err := <-first:
		t.Fatalf("the first input's wait ended early: %v", err)
	default:
	}
	if err := <-first; err != nil {
		t.Fatalf("first input: %v", err)
	}
}
