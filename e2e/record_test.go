package e2e

// The extended API's job routes (shared/spec/extended-api.md §2, §3): the
// full record, stderr paging, signals and resize.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

var recordKeys = []string{"job_id", "status", "done", "exit_code", "signal", "reason", "message", "mode", "stdin", "cwd", "home",
	"terminal", "session_id", "env_names", "created_at", "started_at", "ended_at", "output_bytes", "stderr_bytes",
	"output_complete", "input_wait", "screen_available", "pid", "pgid", "isolation", "limits", "usage", "idempotency_key", "egress"}

type recLimits struct {
	RuntimeMS   *int64 `json:"runtime_ms"`
	OutputBytes *int64 `json:"output_bytes"`
	MemoryBytes *int64 `json:"memory_bytes"`
	Pids        *int64 `json:"pids"`
}

type record struct {
	JobID          string  `json:"job_id"`
	Status         string  `json:"status"`
	Done           bool    `json:"done"`
	ExitCode       *int    `json:"exit_code"`
	Signal         *string `json:"signal"`
	Reason         *string `json:"reason"`
	Message        *string `json:"message"`
	Mode           string  `json:"mode"`
	Cwd            string  `json:"cwd"`
	Home           string  `json:"home"`
	Terminal       *struct{ Cols, Rows int }
	SessionID      *string  `json:"session_id"`
	EnvNames       []string `json:"env_names"`
	CreatedAt      string   `json:"created_at"`
	StartedAt      *string  `json:"started_at"`
	EndedAt        *string  `json:"ended_at"`
	OutputBytes    int64    `json:"output_bytes"`
	StderrBytes    int64    `json:"stderr_bytes"`
	OutputComplete bool     `json:"output_complete"`
	// screen_available: e2e/screen_test.go
	ScreenAvailable bool `json:"screen_available"`
	PID             *int `json:"pid"`
	Pgid            *int `json:"pgid"`
	Isolation       *struct {
		Enabled bool     `json:"enabled"`
		Scoped  []string `json:"scoped"`
		Error   *string  `json:"error"`
		// e2e/powers_test.go
		Capabilities []string `json:"capabilities"`
		Seccomp      *string  `json:"seccomp"`
		IPCNamespace bool     `json:"ipc_namespace"`
	} `json:"isolation"`
	Limits struct {
		Asked   recLimits  `json:"asked"`
		Applied *recLimits `json:"applied"`
	} `json:"limits"`
	Usage *struct {
		User   int64  `json:"cpu_user_ms"`
		System int64  `json:"cpu_system_ms"`
		RSS    int64  `json:"max_rss_kib"`
		Source string `json:"source"`
	} `json:"usage"`
}

var msTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// getRecord reads job id's record, checking its keys are exactly the spec's.
func (s *server) getRecord(t *testing.T, id string) *record {
	t.Helper()
	st, raw, err := s.c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/record", nil)
	if err != nil || st != 200 {
		t.Fatalf("record of %s = %d %s %v", id, st, raw, err)
	}
	return decodeRecord(t, raw)
}

func decodeRecord(t *testing.T, raw []byte) *record {
	t.Helper()
	wantKeys(t, "record", raw, recordKeys...)
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode record %s: %v", raw, err)
	}
	return &r
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// wantError checks an answer is an error envelope of status and code.
func wantError(t *testing.T, what string, st int, raw []byte, err error, status int, code string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err != nil || st != status || json.Unmarshal(raw, &e) != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s = %d %s %v, want %d %s with a message", what, st, raw, err, status, code)
	}
}

// waitFor follows job id's output from *off until it contains want (or
// the job ends), with blocking waits, for at most 30 seconds.
func (s *server) waitFor(t *testing.T, id string, off *int64, out *strings.Builder, want string) *client.JobResult {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("job %s printed no %q in 30 s: %q", id, want, out.String())
		}
		r, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: *off, Timeout: f64(20), IdleFlushSeconds: 0.05})
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		out.WriteString(r.Output)
		*off = r.Offset
		if strings.Contains(out.String(), want) || r.Done {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("job ended (%s, code %d) without printing %q: %q", r.Status, code(r), want, out.String())
			}
			return r
		}
	}
}

func TestRecordOfAnExitedJob(t *testing.T) {
	s := startServer(t, serverOpts{})
	// The CPU is spent in a grandchild, reaped by its parent: the usage
	// is the tree's.
	script := `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; echo out; echo err >&2; exit 3`
	res, _ := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Env: map[string]string{"ZED": "secret-value", "ALPHA": "1"}, SessionID: "sess-1"})
	st, raw, err := s.c.Do(ctx(t), "GET", "/v1/jobs/"+res.JobID+"/record", nil)
	if err != nil || st != 200 {
		t.Fatalf("record = %d %s %v", st, raw, err)
	}
	if strings.Contains(string(raw), "secret-value") {
		t.Errorf("the record shows an env value: %s", raw)
	}
	r := decodeRecord(t, raw)
	if r.JobID != res.JobID || r.Status != "exited" || !r.Done || r.ExitCode == nil || *r.ExitCode != 3 || r.Signal != nil ||
		str(r.Reason) != "exited" || !strings.Contains(str(r.Message), "3") {
		t.Errorf("end = %s", raw)
	}
	if r.Mode != "stdio" || r.Terminal != nil || r.Home != s.Home || r.Cwd != s.Home || str(r.SessionID) != "sess-1" ||
		strings.Join(r.EnvNames, ",") != "ALPHA,ZED" {
		t.Errorf("as run = %s", raw)
	}
	for name, v := range map[string]*string{"created_at": &r.CreatedAt, "started_at": r.StartedAt, "ended_at": r.EndedAt} {
		if v == nil || !msTime.MatchString(*v) {
			t.Errorf("%s = %s, want RFC 3339 UTC with milliseconds", name, str(v))
		}
	}
	if r.OutputBytes != 4 || r.StderrBytes != 4 || !r.OutputComplete {
		t.Errorf("sizes = %d %d complete %v", r.OutputBytes, r.StderrBytes, r.OutputComplete)
	}
	if r.PID == nil || r.Pgid == nil || *r.Pgid != *r.PID {
		t.Errorf("pid %v pgid %v: the job leads its own group", r.PID, r.Pgid)
	}
	if r.Isolation == nil || r.Isolation.Scoped == nil {
		t.Errorf("isolation = %s", raw)
	}
	// The server's defaults: no runtime limit, 1 GiB of output.
	if r.Limits.Asked.RuntimeMS != nil || r.Limits.Asked.OutputBytes == nil || r.Limits.Applied == nil || r.Limits.Applied.RuntimeMS != nil ||
		r.Limits.Applied.OutputBytes == nil || *r.Limits.Applied.OutputBytes != *r.Limits.Asked.OutputBytes {
		t.Errorf("limits at the defaults = %+v", r.Limits)
	}
	if r.Usage == nil || r.Usage.User+r.Usage.System < 20 || r.Usage.RSS <= 0 || r.Usage.Source == "" {
		t.Errorf("usage of a job that counted to 300000 in a grandchild = %s", raw)
	}
	t.Logf("usage %+v", *r.Usage)

	// A pty job: its terminal, no stderr of its own.
	res, _ = s.runDone(t, client.RunRequest{Script: "echo hi", Terminal: &client.Terminal{Cols: 90, Rows: 20}})
	r = s.getRecord(t, res.JobID)
	if r.Mode != "pty" || r.Terminal == nil || r.Terminal.Cols != 90 || r.Terminal.Rows != 20 || len(r.EnvNames) != 0 || r.EnvNames == nil ||
		r.SessionID != nil || r.StderrBytes != 0 {
		t.Errorf("pty record = %+v", r)
	}

	// A running job: no end yet.
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo started; sleep 60", Timeout: 5, IdleFlushSeconds: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	r = s.getRecord(t, run.JobID)
	if r.Done || r.Status != "running" || r.Reason != nil || r.Message != nil || r.ExitCode != nil || r.EndedAt != nil || r.PID == nil || r.Usage != nil {
		t.Errorf("running record = %+v", r)
	}

	expectErr(t, "record of an unknown job", 404, "job_not_found")(s.c.Do(ctx(t), "GET", "/v1/jobs/0123456789abcdef/record", nil))
	expectErr(t, "POST record", 405, "method_not_allowed")(s.c.Do(ctx(t), "POST", "/v1/jobs/"+run.JobID+"/record", nil))
}

// expectErr is wantError over an answer's three results.
func expectErr(t *testing.T, what string, status int, code string) func(int, []byte, error) {
	return func(st int, raw []byte, err error) {
		t.Helper()
		wantError(t, what, st, raw, err, status, code)
	}
}

func TestRecordOfTerminatedLimitedAndFailedJobs(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{args: []string{"--max-job-runtime", "1", "--max-output-bytes", "1000"}})
	// terminate
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.Terminate(ctx(t), run.JobID, 0); err != nil {
		t.Fatal(err)
	}
	r := s.getRecord(t, run.JobID)
	if r.Status != "terminated" || str(r.Reason) != "terminate_requested" || str(r.Message) == "" || r.Signal == nil {
		t.Errorf("terminated record: status %s reason %s message %s signal %s", r.Status, str(r.Reason), str(r.Message), str(r.Signal))
	}
	// runtime limit
	res, _ := s.runDone(t, client.RunRequest{Script: "sleep 30", Mode: "stdio"})
	r = s.getRecord(t, res.JobID)
	if str(r.Reason) != "runtime_limit" || !strings.Contains(str(r.Message), "1000 ms") ||
		r.Limits.Asked.RuntimeMS == nil || *r.Limits.Asked.RuntimeMS != 1000 || r.Limits.Applied == nil || r.Limits.Applied.RuntimeMS == nil {
		t.Errorf("runtime-limited record: reason %s message %s limits %+v", str(r.Reason), str(r.Message), r.Limits)
	}
	// output limit
	res, _ = s.runDone(t, client.RunRequest{Script: "yes", Mode: "stdio"})
	r = s.getRecord(t, res.JobID)
	if str(r.Reason) != "output_limit" || r.OutputComplete || r.OutputBytes != 1000 || !strings.Contains(str(r.Message), "1000 bytes") {
		t.Errorf("output-limited record: reason %s message %s complete %v bytes %d", str(r.Reason), str(r.Message), r.OutputComplete, r.OutputBytes)
	}
	// a program that cannot be executed
	res, _ = s.runDone(t, client.RunRequest{Script: "#!/nonexistent/interpreter\necho no\n"})
	r = s.getRecord(t, res.JobID)
	if str(r.Reason) != "start_failed" || !strings.Contains(str(r.Message), "no such file") {
		t.Errorf("exec-failed record: status %s code %v reason %s message %s", r.Status, r.ExitCode, str(r.Reason), str(r.Message))
	}
}

func TestRecordOfAJobWhoseIsolationFailed(t *testing.T) {
	s := startServer(t, serverOpts{env: []string{"SHELLCTL_TEST_FORCE_ISOLATION_FAILURE=forced for the record test"}})
	res, _ := s.runDone(t, client.RunRequest{Script: "echo never"})
	r := s.getRecord(t, res.JobID)
	if str(r.Reason) != "isolation_failed" || !strings.Contains(str(r.Message), "forced for the record test") ||
		r.Isolation == nil || !strings.Contains(str(r.Isolation.Error), "forced for the record test") {
		t.Errorf("isolation-failed record: status %s reason %s message %s isolation %+v", r.Status, str(r.Reason), str(r.Message), r.Isolation)
	}
}

func TestStderrRoute(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, out := s.runDone(t, client.RunRequest{Script: `printf 'e1\n' >&2; printf 'o\n'; printf 'e2\n' >&2; exit 4`, Mode: "stdio"})
	if out != "o\n" {
		t.Fatalf("stdout = %q", out)
	}
	get := func(q string) (int, []byte, error) {
		return s.c.Do(ctx(t), "GET", "/v1/jobs/"+res.JobID+"/stderr"+q, nil)
	}
	st, raw, err := get("")
	if err != nil || st != 200 {
		t.Fatalf("stderr = %d %s %v", st, raw, err)
	}
	wantKeys(t, "stderr", raw, resultKeys...)
	var jr client.JobResult
	json.Unmarshal(raw, &jr)
	if jr.Output != "e1\ne2\n" || jr.Offset != 6 || !jr.Done || code(&jr) != 4 || !strings.HasSuffix(jr.OutputPath, "/stderr.log") || jr.Truncated {
		t.Errorf("stderr = %s", raw)
	}
	// Paged: output_limit and offset.
	_, raw, _ = get("?output_limit=3")
	json.Unmarshal(raw, &jr)
	if jr.Output != "e1\n" || jr.Offset != 3 || !jr.Truncated {
		t.Errorf("first page = %s", raw)
	}
	_, raw, _ = get("?offset=3&output_limit=3")
	json.Unmarshal(raw, &jr)
	if jr.Output != "e2\n" || jr.Offset != 6 || jr.Truncated {
		t.Errorf("second page = %s", raw)
	}
	expectErr(t, "offset past the end", 400, "invalid_offset")(get("?offset=7"))
	expectErr(t, "negative offset", 400, "invalid_offset")(get("?offset=-1"))
	expectErr(t, "offset not a number", 400, "invalid_offset")(get("?offset=abc"))
	expectErr(t, "stderr of an unknown job", 404, "job_not_found")(s.c.Do(ctx(t), "GET", "/v1/jobs/0123456789abcdef/stderr", nil))

	// A running job answers at once (timeout 0), not done.
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo e >&2; echo o; sleep 60", Mode: "stdio", Timeout: 5, IdleFlushSeconds: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	st, raw, err = s.c.Do(ctx(t), "GET", "/v1/jobs/"+run.JobID+"/stderr", nil)
	json.Unmarshal(raw, &jr)
	if err != nil || st != 200 || jr.Done || jr.Status != "running" {
		t.Errorf("stderr of a running job = %d %s %v", st, raw, err)
	}
	// A pty job's stderr is its terminal: empty here.
	pres, _ := s.runDone(t, client.RunRequest{Script: "echo x >&2"})
	_, raw, _ = s.c.Do(ctx(t), "GET", "/v1/jobs/"+pres.JobID+"/stderr", nil)
	json.Unmarshal(raw, &jr)
	if jr.Output != "" || jr.Offset != 0 || !jr.Done {
		t.Errorf("stderr of a pty job = %s", raw)
	}
}

func (s *server) signal(t *testing.T, id string, body any) (int, []byte, error) {
	t.Helper()
	return s.c.Do(ctx(t), "POST", "/v1/jobs/"+id+"/signal", body)
}

func TestSignalReachesATrappingJob(t *testing.T) {
	s := startServer(t, serverOpts{})
	// pty: the default target is the terminal's foreground group.
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: `trap 'echo got INT; exit 7' INT; echo ready; while :; do sleep 0.2; done`, Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	off := int64(0)
	s.waitFor(t, run.JobID, &off, &out, "ready")
	st, raw, err := s.signal(t, run.JobID, map[string]any{"signal": "INT"})
	if err != nil || st != 200 {
		t.Fatalf("signal INT = %d %s %v", st, raw, err)
	}
	decodeRecord(t, raw)
	r := s.waitFor(t, run.JobID, &off, &out, "got INT")
	for !r.Done {
		r, _ = s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Offset: r.Offset, Timeout: f64(20)})
	}
	if code(r) != 7 {
		t.Errorf("after INT: code %d output %q", code(r), out.String())
	}
	expectErr(t, "signal a finished job", 409, "job_not_running")(s.signal(t, run.JobID, map[string]any{"signal": "INT"}))

	// stdio: the default target is the job's group; SIG-prefixed names
	// and numbers both work.
	for _, sig := range []any{"SIGUSR1", 10, "usr1", "10"} {
		run, err := s.c.Run(ctx(t), client.RunRequest{Script: `trap 'echo got USR1; exit 5' USR1; echo ready; while :; do sleep 0.2; done`, Mode: "stdio", Timeout: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		off = 0
		s.waitFor(t, run.JobID, &off, &out, "ready")
		if st, raw, err := s.signal(t, run.JobID, map[string]any{"signal": sig}); err != nil || st != 200 {
			t.Fatalf("signal %v = %d %s %v", sig, st, raw, err)
		}
		r := s.waitFor(t, run.JobID, &off, &out, "got USR1")
		for !r.Done {
			r, _ = s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Offset: r.Offset, Timeout: f64(20)})
		}
		if code(r) != 5 {
			t.Errorf("signal %v: code %d output %q", sig, code(r), out.String())
		}
	}
}

func TestSignalTreeReachesASetsidChild(t *testing.T) {
	s := startServer(t, serverOpts{})
	script := `setsid sh -c 'trap "echo child got USR1; exit 0" USR1; echo child ready; while :; do sleep 0.2; done' &
c=$!
trap 'echo parent got USR1' USR1
wait $c; wait $c
echo end`
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	off := int64(0)
	s.waitFor(t, run.JobID, &off, &out, "child ready")
	// The group target reaches the job's group only: not the child, which
	// made a session (and a group) of its own.
	if st, raw, err := s.signal(t, run.JobID, map[string]any{"signal": "USR1", "target": "group"}); err != nil || st != 200 {
		t.Fatalf("signal group = %d %s %v", st, raw, err)
	}
	s.waitFor(t, run.JobID, &off, &out, "parent got USR1")
	if strings.Contains(out.String(), "child got") {
		t.Fatalf("the group target reached the setsid child: %q", out.String())
	}
	if st, raw, err := s.signal(t, run.JobID, map[string]any{"signal": "USR1", "target": "tree"}); err != nil || st != 200 {
		t.Fatalf("signal tree = %d %s %v", st, raw, err)
	}
	r := s.waitFor(t, run.JobID, &off, &out, "child got USR1")
	for !r.Done {
		r, _ = s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Offset: r.Offset, Timeout: f64(20)})
		out.WriteString(r.Output)
	}
	if !strings.Contains(out.String(), "end") || code(r) != 0 {
		t.Errorf("after the tree signal: code %d output %q", code(r), out.String())
	}
}

func TestSignalErrors(t *testing.T) {
	s := startServer(t, serverOpts{})
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	id := run.JobID
	for _, b := range []any{
		map[string]any{"signal": "NOPE"},
		map[string]any{"signal": 0},
		map[string]any{"signal": 65},
		map[string]any{},
		map[string]any{"signal": "INT", "target": "everyone"},
	} {
		st, raw, err := s.signal(t, id, b)
		wantError(t, "signal "+string(mustJSON(b)), st, raw, err, 422, "validation_error")
	}
	expectErr(t, "foreground of a stdio job", 409, "input_unsupported")(s.signal(t, id, map[string]any{"signal": "INT", "target": "foreground"}))
	expectErr(t, "signal an unknown job", 404, "job_not_found")(s.signal(t, "0123456789abcdef", map[string]any{"signal": "INT"}))
	expectErr(t, "GET signal", 405, "method_not_allowed")(s.c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/signal", nil))
	// The job still runs: none of those reached it.
	if r := s.getRecord(t, id); r.Done {
		t.Fatalf("a refused signal ended the job: %+v", r)
	}
	// SIGKILL by number ends it; the record says how.
	if st, raw, err := s.signal(t, id, map[string]any{"signal": 9}); err != nil || st != 200 {
		t.Fatalf("signal 9 = %d %s %v", st, raw, err)
	}
	res, _ := s.c.Wait(ctx(t), id, client.WaitRequest{Timeout: f64(20)})
	r := s.getRecord(t, id)
	if !res.Done || str(r.Signal) != "SIGKILL" || str(r.Reason) != "signaled" || code(res) != 137 {
		t.Errorf("after SIGKILL: %+v record signal %s reason %s", res, str(r.Signal), str(r.Reason))
	}
	expectErr(t, "signal a finished job", 409, "job_not_running")(s.signal(t, id, map[string]any{"signal": "TERM"}))
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestResizeSeenByStty(t *testing.T) {
	s := startServer(t, serverOpts{})
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: `stty size; read x; stty size`, Terminal: &client.Terminal{Cols: 80, Rows: 24}, Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	off := int64(0)
	s.waitFor(t, run.JobID, &off, &out, "24 80")
	resize := func(id string, b any) (int, []byte, error) {
		return s.c.Do(ctx(t), "POST", "/v1/jobs/"+id+"/resize", b)
	}
	for _, b := range []any{
		map[string]any{"cols": 0, "rows": 30},
		map[string]any{"cols": 4097, "rows": 30},
		map[string]any{"cols": 100, "rows": -1},
		map[string]any{"cols": 100},
	} {
		st, raw, err := resize(run.JobID, b)
		wantError(t, "resize "+string(mustJSON(b)), st, raw, err, 422, "validation_error")
	}
	st, raw, err := resize(run.JobID, map[string]any{"cols": 100, "rows": 30})
	if err != nil || st != 200 {
		t.Fatalf("resize = %d %s %v", st, raw, err)
	}
	if r := decodeRecord(t, raw); r.Terminal == nil || r.Terminal.Cols != 100 || r.Terminal.Rows != 30 {
		t.Errorf("record after resize: %s", raw)
	}
	if _, err := s.c.Input(ctx(t), run.JobID, "\n", client.WaitRequest{Offset: off, Timeout: f64(0)}); err != nil {
		t.Fatal(err)
	}
	r := s.waitFor(t, run.JobID, &off, &out, "30 100")
	for !r.Done {
		r, _ = s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Offset: r.Offset, Timeout: f64(20)})
	}
	expectErr(t, "resize a finished job", 409, "job_not_running")(resize(run.JobID, map[string]any{"cols": 100, "rows": 30}))

	srun, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	expectErr(t, "resize a stdio job", 409, "input_unsupported")(resize(srun.JobID, map[string]any{"cols": 100, "rows": 30}))
	expectErr(t, "resize an unknown job", 404, "job_not_found")(resize("0123456789abcdef", map[string]any{"cols": 100, "rows": 30}))
}

// A job that ends while no server is there has its end recorded by its
// runner (shellctl-runner-exit): its record still has the usage, the
// process group and the limits applied.
func TestRecordOfAJobThatEndedWithoutAServer(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: `mkfifo f; echo ready; read line < f; echo "got $line"`, Mode: "stdio", Cwd: dir, Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	off := int64(0)
	s.waitFor(t, run.JobID, &off, &out, "ready")
	s.kill(syscall.SIGKILL)
	f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x\n")
	f.Close()
	s.start()
	res, err := s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Timeout: f64(30)})
	for err == nil && !res.Done {
		res, err = s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Offset: res.Offset, Timeout: f64(30)})
	}
	if err != nil {
		t.Fatal(err)
	}
	r := s.getRecord(t, run.JobID)
	if r.Status != "exited" || str(r.Reason) != "exited" || r.Usage == nil || r.Pgid == nil || r.Limits.Applied == nil {
		t.Errorf("record of a job whose runner recorded its end: status %s reason %s usage %v pgid %v applied %v",
			r.Status, str(r.Reason), r.Usage, r.Pgid, r.Limits.Applied)
	}
}

// A job whose runner dies is lost, and its record says so.
func TestRecordOfALostJob(t *testing.T) {
	s := startServer(t, serverOpts{})
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo ready; sleep 60", Mode: "stdio", Timeout: 5, IdleFlushSeconds: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	var rpid int
	fxEventually(t, 5*time.Second, "runner process", func() bool { rpid = fxRunnerPID(s, run.JobID); return rpid != 0 })
	if err := syscall.Kill(rpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res, err := s.c.Wait(ctx(t), run.JobID, client.WaitRequest{Offset: run.Offset, Timeout: f64(30)})
	if err != nil || !res.Done {
		t.Fatalf("wait after the runner died: %+v %v", res, err)
	}
	r := s.getRecord(t, run.JobID)
	if r.Status != "lost" || str(r.Reason) != "runner_lost" || str(r.Message) == "" || r.PID == nil {
		t.Errorf("lost record: status %s reason %s message %s pid %v", r.Status, str(r.Reason), str(r.Message), r.PID)
	}
}

// With a memory limit the job's cgroup applies, a job killed at it is
// memory_limit (skipped where the machine gives jobs no memory controller).
func TestRecordOfAJobAtItsMemoryLimit(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--job-memory-max", "64MiB"}})
	probe, _ := s.runDone(t, client.RunRequest{Script: "true", Mode: "stdio"})
	r := s.getRecord(t, probe.JobID)
	if r.Limits.Asked.MemoryBytes == nil || *r.Limits.Asked.MemoryBytes != 64<<20 {
		t.Fatalf("asked memory limit = %v", r.Limits.Asked.MemoryBytes)
	}
	if r.Limits.Applied == nil || r.Limits.Applied.MemoryBytes == nil {
		_, raw, _ := s.c.Do(ctx(t), "GET", "/v1/jobs/"+probe.JobID+"/record", nil)
		t.Skipf("no memory limit applied here: %s", raw)
	}
	// Writes 256 MiB into memory at once (a shell variable grown by
	// doubling would take minutes).
	res, _ := s.runDone(t, client.RunRequest{Script: `python3 -c 'b = b"x" * (256 << 20); print(len(b))' || perl -e '$b = "x" x (256 << 20); print length($b)'`, Mode: "stdio"})
	r = s.getRecord(t, res.JobID)
	if str(r.Reason) != "memory_limit" || !strings.Contains(str(r.Message), "67108864 bytes") {
		t.Errorf("job past its memory limit: status %s code %v reason %s message %s", r.Status, r.ExitCode, str(r.Reason), str(r.Message))
	}
}
