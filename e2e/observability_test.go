package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/isolation"
)

// addStderr keeps one line of the server's stderr and wakes waitStderr.
func (s *server) addStderr(line string) {
	s.stderrMu.Lock()
	s.stderr = append(s.stderr, line)
	if s.stderrGrew != nil {
		close(s.stderrGrew)
	}
	s.stderrGrew = make(chan struct{})
	s.stderrMu.Unlock()
}

// waitStderr returns the first stderr line match accepts, waiting for new
// lines (woken by each, no polling) up to 10 s.
func (s *server) waitStderr(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	seen := 0
	for {
		s.stderrMu.Lock()
		lines := s.stderr[seen:]
		seen = len(s.stderr)
		if s.stderrGrew == nil {
			s.stderrGrew = make(chan struct{})
		}
		grew := s.stderrGrew
		s.stderrMu.Unlock()
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		select {
		case <-grew:
		case <-deadline:
			t.Fatalf("the server logged no %s; its stderr:\n%s", what, strings.Join(s.allStderr(), "\n"))
		}
	}
}

func (s *server) allStderr() []string {
	s.stderrMu.Lock()
	defer s.stderrMu.Unlock()
	return append([]string(nil), s.stderr...)
}

// get sends a GET with the server's token (auth false: none) and returns
// the answer's status, body and headers.
func (s *server) get(t *testing.T, url string, auth bool, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// obsSecrets are a token and a credential in the server's environment
// that nothing the server answers or logs may show.
const (
	obsToken      = "obs-token-5f2c9a7e1b"
	obsCredential = "sk-obs-credential-8d41e6"
)

type infoAnswer struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Kernel    struct {
		Sysname, Release, Machine string
	} `json:"kernel"`
	Landlock struct {
		ABI      int      `json:"abi"`
		FSRights []string `json:"fs_rights"`
		Scopes   []string `json:"scopes"`
		Error    string   `json:"error"`
	} `json:"landlock"`
	Cgroup struct {
		Mode        string   `json:"mode"`
		Controllers []string `json:"controllers"`
		Why         string   `json:"why"`
	} `json:"cgroup"`
	Tracking string `json:"tracking"`
	Limits   struct {
		MaxRunningJobs       int     `json:"max_running_jobs"`
		MaxJobRuntimeSeconds float64 `json:"max_job_runtime_seconds"`
		JobPidsMax           int64   `json:"job_pids_max"`
		MaxOutputBytes       int64   `json:"max_output_bytes"`
		WarmRunners          int     `json:"warm_runners"`
	} `json:"limits"`
	Policy struct {
		Isolation struct {
			Enabled bool     `json:"enabled"`
			RO      []string `json:"ro"`
		} `json:"isolation"`
		DefaultShell string `json:"default_shell"`
		InheritEnv   string `json:"inherit_env"`
	} `json:"policy"`
	StateDir      string           `json:"state_dir"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	Jobs          map[string]int64 `json:"jobs"`
	AuthRequired  bool             `json:"auth_required"`
}

func (s *server) info(t *testing.T) (infoAnswer, string) {
	t.Helper()
	code, body, _ := s.get(t, s.URL+"/v1/info", true, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/info: %d %s", code, body)
	}
	var in infoAnswer
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatalf("GET /v1/info: %v in %s", err, body)
	}
	return in, body
}

// TestInfoReportsServer: GET /v1/info tells the build, kernel, Landlock,
// cgroup mode, limits, policy, state dir, uptime and jobs by status, needs
// the token, and shows no secret.
func TestInfoReportsServer(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(obsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{
		args: []string{"--token-file", tokFile, "--max-running-jobs", "7", "--job-pids-max", "99", "--max-job-runtime", "90"},
		env:  []string{"OPENAI_API_KEY=" + obsCredential},
	})
	s.Token, s.c.Token = obsToken, obsToken
	if code, body, _ := s.get(t, s.URL+"/v1/info", false, nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/info without the token: %d %s, want 401", code, body)
	}
	before, _ := s.info(t)
	s.runDone(t, client.RunRequest{Script: "exit 0"})
	s.runDone(t, client.RunRequest{Script: "exit 3", Mode: "stdio"})
	time.Sleep(10 * time.Millisecond) // uptime must grow: a clock, not a job's path
	in, body := s.info(t)

	if in.Jobs["exited"] != before.Jobs["exited"]+2 || in.Jobs["running"] != 0 {
		t.Errorf("jobs by status %v after two jobs exited (before %v)", in.Jobs, before.Jobs)
	}
	for _, st := range []string{"created", "starting", "running", "exited", "terminated", "failed", "lost"} {
		if _, ok := in.Jobs[st]; !ok {
			t.Errorf("jobs has no count for %q: %v", st, in.Jobs)
		}
	}
	if in.UptimeSeconds <= before.UptimeSeconds || in.UptimeSeconds <= 0 {
		t.Errorf("uptime %v then %v: must grow", before.UptimeSeconds, in.UptimeSeconds)
	}
	if in.GoVersion != runtime.Version() || in.Version == "" || in.Commit == "" {
		t.Errorf("build: version %q commit %q go %q (want go %q)", in.Version, in.Commit, in.GoVersion, runtime.Version())
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if in.Kernel.Release != unix.ByteSliceToString(u.Release[:]) || in.Kernel.Sysname != "Linux" {
		t.Errorf("kernel %+v, want release %q", in.Kernel, unix.ByteSliceToString(u.Release[:]))
	}
	want := isolation.DetectLandlock()
	if in.Landlock.ABI != want.ABI || strings.Join(in.Landlock.FSRights, ",") != strings.Join(want.FSRights, ",") ||
		strings.Join(in.Landlock.Scopes, ",") != strings.Join(want.Scopes, ",") {
		t.Errorf("landlock %+v, the kernel says %+v", in.Landlock, want)
	}
	if want.ABI >= 1 && len(in.Landlock.FSRights) == 0 {
		t.Errorf("landlock ABI %d but no rights listed", want.ABI)
	}
	if in.Cgroup.Mode != "cgroup2" && in.Cgroup.Mode != "subreaper" || in.Tracking != in.Cgroup.Mode {
		t.Errorf("cgroup mode %q tracking %q", in.Cgroup.Mode, in.Tracking)
	}
	if in.Limits.MaxRunningJobs != 7 || in.Limits.JobPidsMax != 99 || in.Limits.MaxJobRuntimeSeconds != 90 || in.Limits.MaxOutputBytes != 1<<30 || in.Limits.WarmRunners != 2 {
		t.Errorf("limits %+v, want max_running_jobs 7, job_pids_max 99, max_job_runtime 90, max_output_bytes 1GiB, warm_runners 2", in.Limits)
	}
	if !in.Policy.Isolation.Enabled || len(in.Policy.Isolation.RO) == 0 || in.Policy.DefaultShell != "/bin/sh" || in.Policy.InheritEnv != "all" {
		t.Errorf("policy %+v", in.Policy)
	}
	if in.StateDir != s.StateDir || !in.AuthRequired {
		t.Errorf("state_dir %q (want %q), auth_required %v", in.StateDir, s.StateDir, in.AuthRequired)
	}
	for _, secret := range []string{obsToken, obsCredential, tokFile} {
		if strings.Contains(body, secret) {
			t.Errorf("GET /v1/info shows a secret (or the token file) %q:\n%s", secret, body)
		}
	}

	// --no-cgroup: jobs are tracked as the subreaper's descendants.
	s2 := startServer(t, serverOpts{token: obsToken, args: []string{"--no-cgroup"}})
	if in2, _ := s2.info(t); in2.Cgroup.Mode != "subreaper" || in2.Tracking != "subreaper" || !strings.Contains(in2.Cgroup.Why, "--no-cgroup") {
		t.Errorf("with --no-cgroup: cgroup %+v tracking %q, want subreaper", in2.Cgroup, in2.Tracking)
	}
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$`)

// scrape reads the metrics at url into a map of "name{labels}" (labels
// as written, which client_golang sorts by name) to value.
func (s *server) scrape(t *testing.T, url string, auth bool) (map[string]float64, string) {
	t.Helper()
	code, body, h := s.get(t, url, auth, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET %s: Content-Type %q, want the Prometheus text format", url, ct)
	}
	// The Prometheus project's own parser of the text format must take it.
	tp := expfmt.NewTextParser(model.UTF8Validation)
	if fams, err := tp.TextToMetricFamilies(strings.NewReader(body)); err != nil {
		t.Fatalf("GET %s: the Prometheus text parser refuses the answer: %v", url, err)
	} else if len(fams) == 0 {
		t.Fatalf("GET %s: the Prometheus text parser found no metric family", url)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a sample line of the text format: %q", l)
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		out[m[1]] = v
	}
	return out, body
}

// TestMetricsCountJobs: /metrics needs the token, and its counters move
// as jobs start, run, write and end, as requests are answered and as a
// snapshot is saved.
func TestMetricsCountJobs(t *testing.T) {
	s := startServer(t, serverOpts{token: obsToken, env: []string{"OPENAI_API_KEY=" + obsCredential}})
	if code, _, _ := s.get(t, s.URL+"/metrics", false, nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the token: %d, want 401", code)
	}
	before, _ := s.scrape(t, s.URL+"/metrics", true)
	s.runDone(t, client.RunRequest{Script: "printf 0123456789"})
	s.runDone(t, client.RunRequest{Script: "head -c 5000 /dev/zero; exit 3", Mode: "stdio"})
	long, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo started; exec sleep 60", Mode: "stdio", Timeout: 0.2})
	if err != nil || long.Done {
		t.Fatalf("run sleep: %+v %v", long, err)
	}
	// It runs 0.3 s more at least once its output is there: the run's
	// timeout counts from the request, and a slow start (a race-detector
	// build) took most of it.
	for off := long.Offset; ; {
		to := 0.3
		w, err := s.c.Wait(ctx(t), long.JobID, client.WaitRequest{Offset: off, Timeout: &to})
		if err != nil || w.Done {
			t.Fatalf("wait for the sleeper: %+v %v", w, err)
		}
		if w.Offset == off && off > 0 {
			break // 0.3 s with no new output, after its "started"
		}
		off = w.Offset
	}
	during, _ := s.scrape(t, s.URL+"/metrics", true)
	if during["shellctl_jobs_running"] != 1 {
		t.Errorf("shellctl_jobs_running %v while one job sleeps, want 1", during["shellctl_jobs_running"])
	}
	if _, err := s.c.Terminate(ctx(t), long.JobID, 1); err != nil {
		t.Fatal(err)
	}
	for st, _ := s.c.Status(ctx(t), long.JobID); st == nil || st.Status == "running"; st, _ = s.c.Status(ctx(t), long.JobID) {
		to := 10.0
		s.c.Wait(ctx(t), long.JobID, client.WaitRequest{Timeout: &to})
	}
	code, _, _ := s.get(t, s.URL+"/v1/jobs/0000000000000000", true, nil)
	if code != http.StatusNotFound {
		t.Fatalf("GET an unknown job: %d", code)
	}
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, s.URL+"/v1/snapshot/save", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if err := os.WriteFile(filepath.Join(s.Home, "note.txt"), []byte(strings.Repeat("snapshot ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Trailer.Get("X-Snapshot-Status") != "ok" {
		t.Fatalf("snapshot save: %d %v", resp.StatusCode, resp.Trailer)
	}

	after, body := s.scrape(t, s.URL+"/metrics", true)
	grew := func(name string, by float64) {
		t.Helper()
		if got := after[name] - before[name]; got != by {
			t.Errorf("%s grew by %v (from %v to %v), want %v", name, got, before[name], after[name], by)
		}
	}
	grew(`shellctl_jobs_started_total{mode="pty"}`, 1)
	grew(`shellctl_jobs_started_total{mode="stdio"}`, 2)
	grew(`shellctl_jobs_ended_total{reason="exited",status="exited"}`, 2)
	grew(`shellctl_jobs_ended_total{reason="terminate_requested",status="terminated"}`, 1)
	grew(`shellctl_job_duration_seconds_count`, 3)
	grew(`shellctl_job_start_latency_seconds_count`, 3)
	grew(`shellctl_http_requests_total{code="200",method="POST",route="/v1/jobs/run"}`, 3)
	grew(`shellctl_http_requests_total{code="404",method="GET",route="/v1/jobs/{id}"}`, 1)
	grew(`shellctl_http_request_duration_seconds_count{code="200",route="/v1/jobs/run"}`, 3)
	grew(`shellctl_snapshot_duration_seconds_count{op="save",outcome="ok"}`, 1)
	grew(`shellctl_snapshot_bytes_total{op="save"}`, float64(archive))
	// 10 + 5000 bytes and the sleeper's "started\n".
	grew(`shellctl_job_output_bytes_total`, 10+5000+8)
	if after["shellctl_jobs_running"] != 0 {
		t.Errorf("shellctl_jobs_running %v once every job ended", after["shellctl_jobs_running"])
	}
	if sum := after["shellctl_job_start_latency_seconds_sum"] - before["shellctl_job_start_latency_seconds_sum"]; sum <= 0 || sum > 30 {
		t.Errorf("start latency of three jobs adds up to %vs", sum)
	}
	if sum := after["shellctl_job_duration_seconds_sum"] - before["shellctl_job_duration_seconds_sum"]; sum <= 0.2 {
		t.Errorf("three jobs, one ran 0.2s or more, took %vs in all", sum)
	}
	if _, ok := after["shellctl_warm_runners"]; !ok {
		t.Error("no shellctl_warm_runners")
	}
	if !regexp.MustCompile(`(?m)^shellctl_build_info\{commit="[^"]+",goversion="` + regexp.QuoteMeta(runtime.Version()) + `",version="[^"]+"\} 1$`).MatchString(body) {
		t.Error("no shellctl_build_info with commit, goversion and version")
	}
	for _, secret := range []string{obsToken, obsCredential} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics shows a secret %q", secret)
		}
	}
}

// TestMetricsListenWithoutAuth: --metrics-listen serves /metrics, and
// only it, on its own address without the token; /metrics on the API's
// address still wants the token.
func TestMetricsListenWithoutAuth(t *testing.T) {
	s := startServer(t, serverOpts{token: obsToken, args: []string{"--metrics-listen", "127.0.0.1:0"}})
	line := s.waitStderr(t, "metrics address", func(l string) bool { return strings.Contains(l, "metrics without auth on http://") })
	u := regexp.MustCompile(`http://\S+/metrics`).FindString(line)
	s.runDone(t, client.RunRequest{Script: "true"})
	m, body := s.scrape(t, u, false)
	if m[`shellctl_jobs_started_total{mode="pty"}`] != 1 || !strings.Contains(body, "shellctl_build_info{") {
		t.Errorf("metrics on --metrics-listen: jobs started %v, want 1; build info there: %v", m[`shellctl_jobs_started_total{mode="pty"}`], strings.Contains(body, "shellctl_build_info{"))
	}
	if code, _, _ := s.get(t, strings.TrimSuffix(u, "/metrics")+"/v1/jobs", false, nil); code != http.StatusNotFound {
		t.Errorf("GET /v1/jobs on the metrics address: %d, want 404 (only /metrics is served there)", code)
	}
	if code, _, _ := s.get(t, s.URL+"/metrics", false, nil); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics on the API address without the token: %d, want 401", code)
	}
}

// TestJSONLogsRequestIDs: --log-format json writes one JSON object a line;
// every request is logged with its id (the client's when sane, else a new
// one, sent back in X-Request-Id), route, status and duration; job
// transitions with the job id and reason; no secret anywhere.
func TestJSONLogsRequestIDs(t *testing.T) {
	s := startServer(t, serverOpts{token: obsToken, args: []string{"-v", "--log-format", "json"}, env: []string{"OPENAI_API_KEY=" + obsCredential}})
	code, _, h := s.get(t, s.URL+"/v1/jobs", true, map[string]string{"X-Request-Id": "obs-req-42"})
	if code != http.StatusOK || h.Get("X-Request-Id") != "obs-req-42" {
		t.Fatalf("GET /v1/jobs with X-Request-Id obs-req-42: %d, answered id %q", code, h.Get("X-Request-Id"))
	}
	_, _, h = s.get(t, s.URL+"/v1/jobs", true, map[string]string{"X-Request-Id": "forged\"id with spaces"})
	made := h.Get("X-Request-Id")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(made) {
		t.Fatalf("an unclean X-Request-Id was answered with id %q, want a new one of 32 hex", made)
	}
	_, _, h = s.get(t, s.URL+"/v1/info", false, nil)
	unauth := h.Get("X-Request-Id")
	if unauth == "" || unauth == made {
		t.Fatalf("a 401 got request id %q", unauth)
	}
	res, _ := s.runDone(t, client.RunRequest{Script: "echo $OPENAI_API_KEY; exit 4", Env: map[string]string{"SOME_VAR": "1"}})

	type entry struct {
		Msg        string   `json:"msg"`
		RequestID  string   `json:"request_id"`
		Route      string   `json:"route"`
		Method     string   `json:"method"`
		Status     any      `json:"status"`
		DurationMS *float64 `json:"duration_ms"`
		Job        string   `json:"job"`
		Reason     string   `json:"reason"`
	}
	parse := func(l string) (entry, bool) {
		var e entry
		return e, strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &e) == nil
	}
	find := func(what string, ok func(entry) bool) entry {
		l := s.waitStderr(t, what, func(l string) bool { e, j := parse(l); return j && ok(e) })
		e, _ := parse(l)
		return e
	}
	e := find("request obs-req-42", func(e entry) bool { return e.Msg == "request" && e.RequestID == "obs-req-42" })
	if e.Route != "/v1/jobs" || e.Method != "GET" || e.Status != float64(200) || e.DurationMS == nil || *e.DurationMS < 0 {
		t.Errorf("request log %+v", e)
	}
	find("request with a made id", func(e entry) bool { return e.Msg == "request" && e.RequestID == made })
	find("401 request", func(e entry) bool {
		return e.Msg == "request" && e.RequestID == unauth && e.Status == float64(401) && e.Route == "/v1/info"
	})
	run := find("run request naming its job", func(e entry) bool {
		return e.Msg == "request" && e.Route == "/v1/jobs/run" && e.Job == res.JobID && len(e.RequestID) == 32
	})
	find("job start with the run's request id", func(e entry) bool {
		return e.Msg == "job started" && e.Job == res.JobID && e.RequestID == run.RequestID
	})
	find("job running", func(e entry) bool { return e.Msg == "job running" && e.Job == res.JobID })
	find("job end with reason", func(e entry) bool { return e.Msg == "job ended" && e.Job == res.JobID && e.Reason == "exited" })

	banner := false
	for _, l := range s.allStderr() {
		e, ok := parse(l)
		banner = banner || (ok && strings.HasPrefix(e.Msg, "serving on http://"))
		if !ok {
			t.Errorf("not a JSON log line: %q", l)
		}
		for _, secret := range []string{obsToken, obsCredential} {
			if strings.Contains(l, secret) {
				t.Errorf("a log line shows a secret %q: %s", secret, l)
			}
		}
	}
	if !banner {
		t.Errorf("no JSON start-up line (msg \"serving on http://…\") among the server's lines:\n%s", strings.Join(s.allStderr(), "\n"))
	}
}

// TestJSONLogServeFailure: under --log-format json a serve that fails to
// start says why in a JSON line too, as every line it writes is one.
func TestJSONLogServeFailure(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "shellctl"), "serve", "--listen", "127.0.0.1:0", "--state-dir", "/proc/self/no-such-state-dir", "--log-format", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("serve on a state dir under /proc started")
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var last struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
	}
	for _, l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Errorf("not a JSON line: %q", l)
		}
	}
	if last.Level != "ERROR" || !strings.Contains(last.Msg, "no-such-state-dir") {
		t.Errorf("the last line %+v: want level ERROR and a message naming the state dir", last)
	}
}

// TestLogFormatRefused: a --log-format other than text or json stops
// serve with an error naming the flag, the value and the choices.
func TestLogFormatRefused(t *testing.T) {
	out, err := exec.Command(filepath.Join(binDir, "shellctl"), "serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(t.TempDir(), "s"), "--log-format", "yaml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--log-format "yaml" is not one of text, json`) {
		t.Fatalf("serve --log-format yaml: %v\n%s", err, out)
	}
}

// The text log's "job ended" line gives the job's exit code itself (it
// once gave the address of the number).
func TestTextLogJobEndedGivesTheExitCode(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--verbose"}})
	res, _ := s.runDone(t, client.RunRequest{Script: "exit 7", Mode: "stdio"})
	if code(res) != 7 {
		t.Fatalf("job: exit %d, want 7", code(res))
	}
	line := s.waitStderr(t, `"job ended" line of job `+res.JobID, func(l string) bool {
		return strings.Contains(l, `msg="job ended"`) && strings.Contains(l, "job="+res.JobID)
	})
	if !strings.Contains(line, " exit_code=7 ") {
		t.Errorf("job ended line: %s\nwant exit_code=7", line)
	}
}
