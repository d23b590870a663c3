package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/shellctl/shellctl/internal/client"
)

func keysOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func wantKeys(t *testing.T, what string, raw []byte, want ...string) {
	t.Helper()
	sort.Strings(want)
	got := keysOf(t, raw)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s keys = %v, want exactly %v (body %s)", what, got, want, raw)
	}
}

var resultKeys = []string{"job_id", "done", "status", "exit_code", "output_path", "output", "offset", "truncated"}
var statusKeys = []string{"job_id", "status", "done", "exit_code", "created_at", "started_at", "ended_at", "offset"}

func TestResponseKeySets(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := ctx(t)
	st, raw, err := s.c.Do(c, "GET", "/healthz", nil)
	if err != nil || st != 200 || strings.TrimSpace(string(raw)) != `{"status":"ok"}` {
		t.Fatalf("healthz = %d %s %v", st, raw, err)
	}
	st, raw, _ = s.c.Do(c, "POST", "/v1/jobs/run", map[string]any{"script": "echo hi", "timeout": 10})
	if st != 200 {
		t.Fatalf("run = %d %s", st, raw)
	}
	wantKeys(t, "run", raw, resultKeys...)
	var res client.JobResult
	json.Unmarshal(raw, &res)
	for !res.Done {
		_, raw, _ = s.c.Do(c, "POST", "/v1/jobs/"+res.JobID+"/wait", map[string]any{"offset": res.Offset, "timeout": 10})
		json.Unmarshal(raw, &res)
	}
	_, raw, _ = s.c.Do(c, "POST", "/v1/jobs/"+res.JobID+"/wait", map[string]any{})
	wantKeys(t, "wait", raw, resultKeys...)
	_, raw, _ = s.c.Do(c, "GET", "/v1/jobs/"+res.JobID+"/log/tail", nil)
	wantKeys(t, "tail", raw, resultKeys...)
	_, raw, _ = s.c.Do(c, "GET", "/v1/jobs/"+res.JobID, nil)
	wantKeys(t, "status", raw, statusKeys...)
	_, raw, _ = s.c.Do(c, "POST", "/v1/jobs/"+res.JobID+"/terminate", nil)
	wantKeys(t, "terminate", raw, statusKeys...)
	_, raw, _ = s.c.Do(c, "GET", "/v1/jobs", nil)
	wantKeys(t, "list", raw, "jobs")
	var list struct{ Jobs []json.RawMessage }
	json.Unmarshal(raw, &list)
	if len(list.Jobs) != 1 {
		t.Fatalf("list = %s", raw)
	}
	wantKeys(t, "list item", list.Jobs[0], "job_id", "status", "created_at", "started_at", "ended_at")
	// A job that has not started has no started_at / ended_at keys at all —
	// checked through a running job's ended_at.
	r2, _ := s.c.Run(c, client.RunRequest{Script: "sleep 30", Timeout: 0.2})
	_, raw, _ = s.c.Do(c, "GET", "/v1/jobs?status=running", nil)
	json.Unmarshal(raw, &list)
	if len(list.Jobs) != 1 {
		t.Fatalf("running list = %s", raw)
	}
	wantKeys(t, "running list item", list.Jobs[0], "job_id", "status", "created_at", "started_at")
	// An input answer has the JobResult keys too.
	_, raw, _ = s.c.Do(c, "POST", "/v1/jobs/"+r2.JobID+"/input", map[string]any{"text": "x", "timeout": 0.1})
	wantKeys(t, "input", raw, resultKeys...)
	_, raw, _ = s.c.Do(c, "DELETE", "/v1/jobs/"+r2.JobID+"?force=true&grace_seconds=1", nil)
	wantKeys(t, "delete", raw, "job_id", "deleted")
	// The error envelope.
	_, raw, _ = s.c.Do(c, "GET", "/v1/jobs/0123456789abcdef", nil)
	wantKeys(t, "error", raw, "error")
	var env struct{ Error json.RawMessage }
	json.Unmarshal(raw, &env)
	wantKeys(t, "error body", env.Error, "code", "message")
}

func TestTimesFormat(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, _ := s.runDone(t, client.RunRequest{Script: "true"})
	v, err := s.c.Status(ctx(t), res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []string{v.CreatedAt, *v.StartedAt, *v.EndedAt} {
		if _, err := time.Parse("2006-01-02T15:04:05Z", ts); err != nil || len(ts) != 20 {
			t.Errorf("time %q is not YYYY-MM-DDTHH:MM:SSZ", ts)
		}
	}
}

func TestPTYMergesStreams(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, out := s.runDone(t, client.RunRequest{Script: "echo out; echo err >&2"})
	if res.Status != "exited" || code(res) != 0 {
		t.Fatalf("status %s code %d", res.Status, code(res))
	}
	if out != "out\nerr\n" {
		t.Fatalf("pty output = %q, want both streams", out)
	}
}

func TestStdioOutputIsExactlyStdout(t *testing.T) {
	s := startServer(t, serverOpts{})
	script := "printf 'a\\r\\nb\\033[31mc'; echo err >&2; printf '\\377end'"
	res, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio"})
	if code(res) != 0 {
		t.Fatalf("code %d", code(res))
	}
	raw, err := os.ReadFile(res.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != "a\r\nb\x1b[31mc\xffend" {
		t.Fatalf("output.log = %q, want stdout byte for byte", raw)
	}
	if out != "a\r\nb\x1b[31mc\uFFFDend" {
		t.Fatalf("served output = %q", out)
	}
	errLog, _ := os.ReadFile(filepath.Join(filepath.Dir(res.OutputPath), "stderr.log"))
	if string(errLog) != "err\n" {
		t.Fatalf("stderr.log = %q", errLog)
	}
}

func TestStdioInputUnsupported(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 5", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.c.Input(ctx(t), res.JobID, "x\n", client.WaitRequest{})
	if ae, ok := err.(*client.Error); !ok || ae.Status != 409 || ae.Code != "input_unsupported" {
		t.Fatalf("input to stdio job: %v, want 409 input_unsupported", err)
	}
}

func TestEnvAndCwd(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := filepath.Join(s.Home, "work dir")
	os.Mkdir(dir, 0o755)
	res, out := s.runDone(t, client.RunRequest{Script: `printf '%s|%s|%s|%s' "$FOO" "$PWD" "$TMPDIR" "$TERM"`, Cwd: dir + "/./", Env: map[string]string{"FOO": "bar baz"}})
	if code(res) != 0 {
		t.Fatalf("code %d out %q", code(res), out)
	}
	if want := "bar baz|" + dir + "|" + dir + "|xterm-256color"; out != want {
		t.Fatalf("out = %q, want %q", out, want)
	}
	// The default cwd is the server's $HOME.
	_, out = s.runDone(t, client.RunRequest{Script: "pwd", Mode: "stdio"})
	if out != s.Home+"\n" {
		t.Fatalf("default cwd = %q, want %q", out, s.Home)
	}
}

func TestExitCodes(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, tc := range []struct {
		script string
		mode   string
		want   int
	}{
		{"exit 42", "", 42},
		{"exit 42", "stdio", 42},
		{"kill -9 $$", "", 137},
		{"kill -9 $$", "stdio", 137},
		{"kill -TERM $$", "stdio", 143},
		{"true", "", 0},
	} {
		res, _ := s.runDone(t, client.RunRequest{Script: tc.script, Mode: tc.mode})
		if res.Status != "exited" || code(res) != tc.want {
			t.Errorf("%q (%s): status %s code %d, want exited %d", tc.script, tc.mode, res.Status, code(res), tc.want)
		}
	}
}

func TestShebangScript(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, out := s.runDone(t, client.RunRequest{Script: "#!/bin/sh\necho \"$0\" | grep -c script\n"})
	if code(res) != 0 || out != "1\n" {
		t.Fatalf("shebang script: code %d out %q", code(res), out)
	}
}

func TestWaitTimeoutZeroAnswersAtOnce(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 30", Timeout: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+res.JobID+"/wait", map[string]any{"timeout": 0})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 300*time.Millisecond {
		t.Fatalf("wait with timeout 0 took %v (%s)", el, raw)
	}
	// No body at all is the same: timeout defaults to 0.
	start = time.Now()
	s.c.Do(ctx(t), "POST", "/v1/jobs/"+res.JobID+"/wait", nil)
	if el := time.Since(start); el > 300*time.Millisecond {
		t.Fatalf("wait without body took %v", el)
	}
}

func TestSeqPagedReassemblesExactly(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range []string{"pty", "stdio"} {
		res, _ := s.runDone(t, client.RunRequest{Script: "seq 1 20000", Mode: mode, OutputLimit: 1})
		var b strings.Builder
		off := int64(0)
		pages := 0
		for {
			r, err := s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: off, OutputLimit: 1024})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Output) > 1024 {
				t.Fatalf("window of %d bytes with limit 1024", len(r.Output))
			}
			b.WriteString(r.Output)
			pages++
			if r.Offset == off {
				break
			}
			off = r.Offset
			if !r.Truncated {
				break
			}
		}
		var want strings.Builder
		for i := 1; i <= 20000; i++ {
			want.WriteString(strconv.Itoa(i) + "\n")
		}
		if b.String() != want.String() {
			t.Fatalf("%s: reassembled %d bytes in %d pages, want %d bytes", mode, b.Len(), pages, want.Len())
		}
	}
}

func TestMultibytePagingNeverSplits(t *testing.T) {
	s := startServer(t, serverOpts{})
	text := "héllo 世界 🙂 ünïcødé ✓\n"
	res, _ := s.runDone(t, client.RunRequest{Script: "printf '%s' '" + text + "'", Mode: "stdio"})
	var b strings.Builder
	off := int64(0)
	for i := 0; i < 1000; i++ {
		r, err := s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: off, OutputLimit: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(r.Output) || strings.ContainsRune(r.Output, utf8.RuneError) {
			t.Fatalf("window %q at %d splits a character", r.Output, off)
		}
		b.WriteString(r.Output)
		if r.Offset == off {
			break
		}
		off = r.Offset
	}
	if b.String() != text {
		t.Fatalf("reassembled %q, want %q", b.String(), text)
	}
}

func TestInvalidUTF8PagesToTheEnd(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, _ := s.runDone(t, client.RunRequest{Script: `printf 'ok\377\376\300tail\342\202'`, Mode: "stdio"})
	size := int64(0)
	if fi, err := os.Stat(res.OutputPath); err == nil {
		size = fi.Size()
	}
	off := int64(0)
	var b strings.Builder
	for i := 0; i < 100 && off < size; i++ {
		r, err := s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: off, OutputLimit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset <= off {
			t.Fatalf("offset did not advance from %d", off)
		}
		b.WriteString(r.Output)
		off = r.Offset
	}
	if off != size {
		t.Fatalf("stopped at %d of %d", off, size)
	}
	if !strings.HasPrefix(b.String(), "ok\uFFFD") || !strings.Contains(b.String(), "tail") {
		t.Fatalf("pages = %q", b.String())
	}
}

func TestPromptShowsBeforeInputAndInputReachesRead(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: `printf 'Password: '; read -r pw; echo "got [$pw]"`, Timeout: 5, IdleFlushSeconds: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done || !strings.Contains(res.Output, "Password: ") {
		t.Fatalf("prompt not shown before input: %+v", res)
	}
	r, err := s.c.Input(ctx(t), res.JobID, "s3cret\n", client.WaitRequest{Offset: res.Offset, Timeout: f64(10)})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Output
	for !r.Done {
		r, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: r.Offset, Timeout: f64(10)})
		if err != nil {
			t.Fatal(err)
		}
		out += r.Output
	}
	if !strings.Contains(out, "got [s3cret]") || code(r) != 0 {
		t.Fatalf("after input: %q code %d", out, code(r))
	}
	// Input to a finished job: 409 job_not_running.
	_, err = s.c.Input(ctx(t), res.JobID, "x", client.WaitRequest{})
	if ae, ok := err.(*client.Error); !ok || ae.Status != 409 || ae.Code != "job_not_running" {
		t.Fatalf("input to finished job: %v", err)
	}
}

func TestTerminateAnswersFast(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range []string{"pty", "stdio"} {
		res, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Mode: mode, Timeout: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		v, err := s.c.Terminate(ctx(t), res.JobID, -1)
		el := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != "terminated" || !v.Done || v.ExitCode == nil {
			t.Fatalf("%s: terminate answered %+v", mode, v)
		}
		if el > time.Second {
			t.Fatalf("%s: terminate of sleep 60 took %v", mode, el)
		}
		// A second terminate answers the same view.
		v2, err := s.c.Terminate(ctx(t), res.JobID, -1)
		if err != nil || v2.Status != "terminated" || *v2.ExitCode != *v.ExitCode {
			t.Fatalf("second terminate: %+v %v", v2, err)
		}
	}
}

func TestDeleteRules(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := ctx(t)
	res, _ := s.c.Run(c, client.RunRequest{Script: "sleep 60", Timeout: 0.1})
	err := s.c.Delete(c, res.JobID, false, -1)
	if ae, ok := err.(*client.Error); !ok || ae.Status != 409 || ae.Code != "job_running" {
		t.Fatalf("delete of running job: %v", err)
	}
	// force must be exactly "true".
	st, raw, _ := s.c.Do(c, "DELETE", "/v1/jobs/"+res.JobID+"?force=1", nil)
	if st != 409 {
		t.Fatalf("force=1: %d %s", st, raw)
	}
	dir := filepath.Dir(res.OutputPath)
	if err := s.c.Delete(c, res.JobID, true, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("job dir still there: %v", err)
	}
	_, err = s.c.Status(c, res.JobID)
	if ae, ok := err.(*client.Error); !ok || ae.Status != 404 || ae.Code != "job_not_found" {
		t.Fatalf("status after delete: %v", err)
	}
	// A finished job is deleted without force.
	done, _ := s.runDone(t, client.RunRequest{Script: "true"})
	if err := s.c.Delete(c, done.JobID, false, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Delete(c, done.JobID, false, -1); err == nil {
		t.Fatal("second delete succeeded")
	}
}

func TestUnknownAndMalformedIDs(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := ctx(t)
	// An id that could be one (of this server or the original's) is 404
	// job_not_found; one that cannot be an id at all is 400
	// invalid_job_id, as the original answers.
	for _, id := range []string{"0123456789abcdef", "xyz", "0123456789ABCDEF", "0123456789abcdef0", "..%2F..%2Fetc%2Fpasswd", "a.b", strings.Repeat("a", 129)} {
		wantStatus, wantCode := 404, `"job_not_found"`
		if strings.ContainsAny(id, ".%") || len(id) > 128 {
			wantStatus, wantCode = 400, `"invalid_job_id"`
		}
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/jobs/" + id},
			{"POST", "/v1/jobs/" + id + "/wait"},
			{"POST", "/v1/jobs/" + id + "/input"},
			{"POST", "/v1/jobs/" + id + "/terminate"},
			{"GET", "/v1/jobs/" + id + "/log/tail"},
			{"DELETE", "/v1/jobs/" + id},
		} {
			var body any
			if r.path[len(r.path)-5:] == "input" {
				body = map[string]any{"text": "x"}
			}
			st, raw, _ := s.c.Do(c, r.method, r.path, body)
			if st != wantStatus || !strings.Contains(string(raw), wantCode) {
				t.Errorf("%s %s = %d %s, want %d %s", r.method, r.path, st, raw, wantStatus, wantCode)
			}
		}
	}
	st, raw, _ := s.c.Do(c, "GET", "/v1/nothing", nil)
	if st != 404 || !strings.Contains(string(raw), `"not_found"`) {
		t.Errorf("unknown route = %d %s", st, raw)
	}
	st, raw, _ = s.c.Do(c, "GET", "/v1/jobs/run", nil)
	if st != 405 || !strings.Contains(string(raw), `"method_not_allowed"`) {
		t.Errorf("wrong method = %d %s", st, raw)
	}
}

func TestValidationErrors(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := ctx(t)
	running, _ := s.c.Run(c, client.RunRequest{Script: "sleep 30", Timeout: 0.1})
	file := filepath.Join(s.Home, "file")
	os.WriteFile(file, nil, 0o600)
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"not json", "POST", "/v1/jobs/run", []byte("{nope"), 400, "invalid_request"},
		{"not an object", "POST", "/v1/jobs/run", []byte(`["echo"]`), 400, "invalid_request"},
		{"missing script", "POST", "/v1/jobs/run", map[string]any{}, 400, "invalid_request"},
		{"empty script", "POST", "/v1/jobs/run", map[string]any{"script": ""}, 400, "invalid_request"},
		{"script wrong type", "POST", "/v1/jobs/run", map[string]any{"script": 5}, 400, "invalid_request"},
		{"env value wrong type", "POST", "/v1/jobs/run", map[string]any{"script": "true", "env": map[string]any{"A": 1}}, 400, "invalid_request"},
		{"bad mode", "POST", "/v1/jobs/run", map[string]any{"script": "true", "mode": "tmux"}, 422, "validation_error"},
		{"env name with =", "POST", "/v1/jobs/run", map[string]any{"script": "true", "env": map[string]string{"A=B": "x"}}, 422, "validation_error"},
		{"empty env name", "POST", "/v1/jobs/run", map[string]any{"script": "true", "env": map[string]string{"": "x"}}, 422, "validation_error"},
		{"env name NUL", "POST", "/v1/jobs/run", map[string]any{"script": "true", "env": map[string]string{"A\x00": "x"}}, 422, "validation_error"},
		{"env value NUL", "POST", "/v1/jobs/run", map[string]any{"script": "true", "env": map[string]string{"A": "x\x00"}}, 422, "validation_error"},
		// Run and input bodies up to --max-request-bytes: e2e/limits2_test.go.
		{"cols 0", "POST", "/v1/jobs/run", map[string]any{"script": "true", "terminal": map[string]int{"cols": 0, "rows": 10}}, 422, "validation_error"},
		{"rows 4097", "POST", "/v1/jobs/run", map[string]any{"script": "true", "terminal": map[string]int{"cols": 10, "rows": 4097}}, 422, "validation_error"},
		{"session id chars", "POST", "/v1/jobs/run", map[string]any{"script": "true", "session_id": "a b"}, 422, "validation_error"},
		{"session id long", "POST", "/v1/jobs/run", map[string]any{"script": "true", "session_id": strings.Repeat("a", 129)}, 422, "validation_error"},
		{"cwd missing", "POST", "/v1/jobs/run", map[string]any{"script": "true", "cwd": "/does/not/exist"}, 400, "invalid_cwd"},
		{"cwd a file", "POST", "/v1/jobs/run", map[string]any{"script": "true", "cwd": file}, 400, "invalid_cwd"},
		{"offset past end", "POST", "/v1/jobs/" + running.JobID + "/wait", map[string]any{"offset": 999999}, 400, "invalid_offset"},
		{"negative offset", "POST", "/v1/jobs/" + running.JobID + "/wait", map[string]any{"offset": -1}, 400, "invalid_offset"},
		{"input offset past end", "POST", "/v1/jobs/" + running.JobID + "/input", map[string]any{"text": "x", "offset": 999999}, 400, "invalid_offset"},
		{"wait body too large", "POST", "/v1/jobs/" + running.JobID + "/wait", map[string]any{"pad": strings.Repeat("y", 65<<10)}, 413, "request_too_large"},
		{"grace too large", "POST", "/v1/jobs/" + running.JobID + "/terminate", map[string]any{"grace_seconds": 301}, 422, "validation_error"},
		{"offset wrong type", "POST", "/v1/jobs/" + running.JobID + "/wait", map[string]any{"offset": "zero"}, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, raw, err := s.c.Do(c, tc.method, tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.status || !strings.Contains(string(raw), fmt.Sprintf(`"code":"%s"`, tc.code)) {
				t.Fatalf("= %d %s, want %d %s", st, raw, tc.status, tc.code)
			}
			var env struct {
				Error struct{ Message string } `json:"error"`
			}
			json.Unmarshal(raw, &env)
			if env.Error.Message == "" || strings.Contains(env.Error.Message, "goroutine") {
				t.Fatalf("message %q", env.Error.Message)
			}
		})
	}
	// The invalid_offset message names both numbers.
	_, raw, _ := s.c.Do(c, "POST", "/v1/jobs/"+running.JobID+"/wait", map[string]any{"offset": 999999})
	if !strings.Contains(string(raw), "999999") {
		t.Errorf("invalid_offset message does not name the offset: %s", raw)
	}
}

func TestEmptyListIsArray(t *testing.T) {
	s := startServer(t, serverOpts{})
	_, raw, _ := s.c.Do(ctx(t), "GET", "/v1/jobs", nil)
	if strings.TrimSpace(string(raw)) != `{"jobs":[]}` {
		t.Fatalf("empty list = %s", raw)
	}
	_, raw, _ = s.c.Do(ctx(t), "GET", "/v1/jobs?status=lost&limit=abc", nil)
	if strings.TrimSpace(string(raw)) != `{"jobs":[]}` {
		t.Fatalf("empty filtered list = %s", raw)
	}
}

func TestListNewestFirstAndLimit(t *testing.T) {
	s := startServer(t, serverOpts{})
	var ids []string
	for i := 0; i < 5; i++ {
		r, _ := s.runDone(t, client.RunRequest{Script: "true"})
		ids = append(ids, r.JobID)
	}
	list, err := s.c.List(ctx(t), "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].JobID != ids[4] || list[1].JobID != ids[3] || list[2].JobID != ids[2] {
		t.Fatalf("list = %+v, want newest first %v", list, ids)
	}
	list, _ = s.c.List(ctx(t), "exited", 0)
	if len(list) != 5 {
		t.Fatalf("exited filter = %d jobs", len(list))
	}
}

func TestAuth(t *testing.T) {
	s := startServer(t, serverOpts{token: " t0k en"})
	c := ctx(t)
	st, _, _ := s.c.Do(c, "GET", "/healthz", nil)
	if st != 200 {
		t.Fatalf("healthz with auth configured = %d", st)
	}
	noTok := &client.Client{BaseURL: s.URL, HTTP: http.DefaultClient}
	st, raw, _ := noTok.Do(c, "GET", "/v1/jobs", nil)
	if st != 401 || !strings.Contains(string(raw), `"unauthorized"`) {
		t.Fatalf("no token = %d %s", st, raw)
	}
	wrong := &client.Client{BaseURL: s.URL, Token: "t0k en", HTTP: http.DefaultClient}
	if st, _, _ = wrong.Do(c, "GET", "/v1/jobs", nil); st != 401 {
		t.Fatalf("token without its leading space accepted: %d", st)
	}
	if st, raw, _ = s.c.Do(c, "GET", "/v1/jobs", nil); st != 200 {
		t.Fatalf("right token = %d %s", st, raw)
	}
}

func TestTailStartsOnBoundary(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, _ := s.runDone(t, client.RunRequest{Script: "printf 'aaa世界'", Mode: "stdio"})
	r, err := s.c.Tail(ctx(t), res.JobID, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r.Output != "界" || r.Offset != 9 || r.Truncated {
		t.Fatalf("tail = %+v", r)
	}
	st, raw, _ := s.c.Do(ctx(t), "GET", "/v1/jobs/"+res.JobID+"/log/tail?output_limit=garbage", nil)
	if st != 200 || !strings.Contains(string(raw), "aaa世界") {
		t.Fatalf("garbage limit = %d %s", st, raw)
	}
}

func TestGCRemovesFinishedJobs(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--gc-interval", "0.2", "--gc-retention", "0.5"}})
	res, _ := s.runDone(t, client.RunRequest{Script: "true"})
	running, _ := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 30", Timeout: 0.1})
	dir := filepath.Dir(res.OutputPath)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.c.Status(ctx(t), res.JobID)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("finished job not collected")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir of collected job remains: %v", err)
	}
	if v, err := s.c.Status(ctx(t), running.JobID); err != nil || v.Status != "running" {
		t.Fatalf("running job collected: %+v %v", v, err)
	}
}

// The runner catches SIGHUP and SIGPIPE for itself; the job must still start
// with no signal ignored (an ignored signal would survive the exec).
func TestJobStartsWithDefaultSignals(t *testing.T) {
	// A server whose parent ignored a signal Go leaves alone (32, glibc's
	// thread-cancel signal) passes the ignore on to every process it
	// starts unless the stage resets it.
	restore := ignoreSignal(t, 32)
	s := startServer(t, serverOpts{})
	restore()
	for _, mode := range []string{"pty", "stdio"} {
		// exec: the shell's own mask is racy to read while it waits for a
		// child (dash blocks everything around its wait).
		res, out := s.runDone(t, client.RunRequest{Script: "exec grep -E '^Sig(Ign|Blk)' /proc/self/status", Mode: mode})
		if code(res) != 0 || !strings.Contains(out, "SigIgn:\t0000000000000000") || !strings.Contains(out, "SigBlk:\t0000000000000000") {
			t.Errorf("%s: job signal state %q", mode, out)
		}
	}
}

// A job gets fds 0, 1 and 2 and nothing else, even from a server whose own
// parent leaked descriptors to it.
func TestJobGetsOnlyItsStandardFiles(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// fds 3 and 4 get overwritten on the way; 5 would survive to the job.
	s := startServer(t, serverOpts{extraFiles: []*os.File{w, w, w}})
	for _, mode := range []string{"pty", "stdio"} {
		// ls's own directory descriptor is 3.
		res, out := s.runDone(t, client.RunRequest{Script: "exec ls /proc/self/fd", Mode: mode})
		if code(res) != 0 || strings.Fields(out)[0] != "0" || strings.Join(strings.Fields(out), " ") != "0 1 2 3" {
			t.Errorf("%s: the job's descriptors are %q, want 0 1 2 (and ls's 3)", mode, out)
		}
	}
}

// ignoreSignal sets sig to SIG_IGN in this process (children started now
// inherit it) and returns a func that restores the old disposition.
func ignoreSignal(t *testing.T, sig int) func() {
	t.Helper()
	type sigaction struct {
		handler, flags, restorer, mask uint64
	}
	var old sigaction
	ign := sigaction{handler: 1}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&ign)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
		t.Fatalf("ignore signal %d: %v", sig, e)
	}
	return func() {
		syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	}
}

// Job directories made ahead are used by jobs, removed when the server
// stops, and a previous server's leftovers are removed at start.
func TestReadyDirsLeaveNothingBehind(t *testing.T) {
	s := startServer(t, serverOpts{})
	jobsDir := filepath.Join(s.StateDir, "jobs")
	ready := func() []string {
		m, _ := filepath.Glob(filepath.Join(jobsDir, ".ready-*"))
		return m
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(ready()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(ready()) == 0 {
		t.Fatal("no job directory made ahead")
	}
	res, _ := s.runDone(t, client.RunRequest{Script: "true"})
	if fi, err := os.Stat(filepath.Dir(res.OutputPath)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("job dir: %v %v", fi, err)
	}
	s.kill(syscall.SIGTERM)
	if left := ready(); len(left) != 0 {
		t.Fatalf("made-ahead dirs left after stop: %v", left)
	}
	stale := filepath.Join(jobsDir, ".ready-0000000000000000")
	os.Mkdir(stale, 0o700)
	s.start()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a previous server's made-ahead dir survived a start: %v", err)
	}
	if _, err := s.c.Status(ctx(t), res.JobID); err != nil {
		t.Fatalf("job lost over the restart: %v", err)
	}
}

// A run request at its size limit — nearly all of it environment — starts
// its job: the spec that carries that environment to the runner is a little
// larger than the request, and travels in one message.
func TestLargeEnvironmentStarts(t *testing.T) {
	s := startServer(t, serverOpts{})
	const limit = 2 << 20 // the run body limit
	// Four variables (one may not pass 128 KiB at exec) of \x01, which JSON
	// writes \u0001: six bytes each.
	names := []string{"BIG1", "BIG2", "BIG3", "BIG4"}
	req := client.RunRequest{Script: `printf '%s' "$BIG1$BIG2$BIG3$BIG4" | wc -c`, Mode: "stdio", Env: map[string]string{}}
	for _, k := range names {
		req.Env[k] = ""
	}
	base, _ := json.Marshal(req)
	per := (limit - 64 - len(base)) / 6 / len(names)
	for _, k := range names {
		req.Env[k] = strings.Repeat("\x01", per)
	}
	n := per * len(names)
	body, _ := json.Marshal(req)
	if len(body) >= limit || len(body) < limit-200 {
		t.Fatalf("request of %d bytes, want just under %d", len(body), limit)
	}
	res, out := s.runDone(t, req)
	if code(res) != 0 || strings.TrimSpace(out) != fmt.Sprint(n) {
		t.Fatalf("job with a %d-byte request: %s code %d out %q", len(body), res.Status, code(res), out)
	}
}

// Right after run answers "running", status and list say so too, with a
// start time.
func TestStatusAgreesWithRunAtOnce(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	for i := 0; i < 10; i++ {
		// Long enough for a start on a loaded machine or a race-detector
		// build (a run answers "starting" until the job runs).
		res, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 30", Timeout: 0.5})
		if err != nil || res.Status != "running" {
			t.Fatalf("run: %+v %v", res, err)
		}
		v, err := s.c.Status(ctx(t), res.JobID)
		if err != nil || v.Status != "running" || v.StartedAt == nil {
			t.Fatalf("status right after run: %+v %v", v, err)
		}
		list, err := s.c.List(ctx(t), "running", 0)
		if err != nil || len(list) == 0 || list[0].JobID != res.JobID || list[0].StartedAt == nil {
			t.Fatalf("running list right after run: %+v %v", list, err)
		}
		s.c.Terminate(ctx(t), res.JobID, 0)
	}
}

// TestOriginalsLenience: where the original is lenient, so are we. An
// unknown status filter lists nothing (no job is ever in it), and a
// terminate whose body does not parse ends the job with the default
// grace; a body that parses but is out of range is still refused.
func TestOriginalsLenience(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := ctx(t)
	if _, err := s.c.Run(c, client.RunRequest{Script: "true", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	st, raw, err := s.c.Do(c, "GET", "/v1/jobs?status=bogus", nil)
	if err != nil || st != 200 || strings.TrimSpace(string(raw)) != `{"jobs":[]}` {
		t.Fatalf("status=bogus = %d %s %v, want 200 {\"jobs\":[]}", st, raw, err)
	}
	for _, body := range [][]byte{[]byte("{nope"), []byte(`["x"]`), []byte("grace_seconds=1")} {
		running, err := s.c.Run(c, client.RunRequest{Script: "sleep 60", Timeout: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		st, raw, err := s.c.Do(c, "POST", "/v1/jobs/"+running.JobID+"/terminate", body)
		if err != nil || st != 200 || !strings.Contains(string(raw), `"status":"terminated"`) {
			t.Fatalf("terminate with body %q = %d %s %v, want 200 terminated", body, st, raw, err)
		}
	}
}
