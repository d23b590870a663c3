package openapicheck

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/shellctl/shellctl/internal/api"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/runner"
)

func load(t *testing.T) *Checker {
	t.Helper()
	c, err := Load(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTheDocumentLoadsAndHasEveryRoute(t *testing.T) {
	c := load(t)
	for _, want := range []string{
		"GET /healthz", "POST /v1/jobs/run", "GET /v1/jobs", "GET /v1/jobs/{id}", "DELETE /v1/jobs/{id}",
		"POST /v1/jobs/{id}/wait", "POST /v1/jobs/{id}/input", "GET /v1/jobs/{id}/log/tail", "POST /v1/jobs/{id}/terminate",
		"POST /v1/snapshot/save", "POST /v1/snapshot/restore",
		"GET /v1/info", "GET /metrics", "GET /v1/openapi.json", "GET /v1/jobs/{id}/record", "GET /v1/jobs/{id}/stderr",
		"POST /v1/jobs/{id}/signal", "POST /v1/jobs/{id}/resize", "GET /v1/jobs/{id}/stream",
		"GET /v1/jobs/{id}/screen", "POST /v1/jobs/{id}/keys", "POST /mcp", "GET /mcp",
	} {
		method, path, _ := strings.Cut(want, " ")
		item := c.Doc().Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("the document has no %s", want)
		}
	}
}

const okResult = `{"job_id":"0123456789abcdef","done":true,"status":"exited","exit_code":0,"output_path":"/s/jobs/0123456789abcdef/output.log","output":"hi\n","offset":3,"truncated":false}`

// A fake server answers each case; the Transport must pass the right
// answers and report each wrong one.
func TestTransportCatchesDrift(t *testing.T) {
	c := load(t)
	type answer struct {
		status  int
		ct      string
		body    string
		headers map[string]string
	}
	cases := []struct {
		name, method, path string
		a                  answer
		wrong              string // "" = must pass; else a word of the report
	}{
		{"job result", "POST", "/v1/jobs/0123456789abcdef/wait", answer{200, "application/json", okResult, nil}, ""},
		{"run with its job id", "POST", "/v1/jobs/run", answer{200, "application/json", okResult, map[string]string{"X-Shellctl-Job-Id": "0123456789abcdef"}}, ""},
		{"run without its job id", "POST", "/v1/jobs/run", answer{200, "application/json", okResult, nil}, "X-Shellctl-Job-Id"},
		{"a key too many", "POST", "/v1/jobs/0123456789abcdef/wait", answer{200, "application/json", strings.Replace(okResult, `"truncated":false`, `"truncated":false,"input_wait":true`, 1), nil}, "input_wait"},
		{"a key missing", "GET", "/v1/jobs/0123456789abcdef/log/tail", answer{200, "application/json", strings.Replace(okResult, `,"truncated":false`, ``, 1), nil}, "truncated"},
		{"a wrong type", "POST", "/v1/jobs/0123456789abcdef/wait", answer{200, "application/json", strings.Replace(okResult, `"offset":3`, `"offset":"3"`, 1), nil}, "offset"},
		{"an unknown state", "POST", "/v1/jobs/0123456789abcdef/wait", answer{200, "application/json", strings.Replace(okResult, `"exited"`, `"finished"`, 1), nil}, "status"},
		{"a status not listed", "GET", "/v1/jobs/0123456789abcdef", answer{418, "application/json", `{"error":{"code":"teapot","message":"x"}}`, nil}, "418"},
		{"an error outside the envelope", "GET", "/v1/jobs/0123456789abcdef", answer{404, "application/json", `{"code":"job_not_found"}`, nil}, "error"},
		{"a wrong content type", "GET", "/v1/jobs/0123456789abcdef/record", answer{200, "text/plain", "hello", nil}, "content type"},
		{"an undocumented route", "GET", "/v1/secret", answer{200, "application/json", `{}`, nil}, "no such path"},
		{"no route, rightly", "GET", "/v1/nope", answer{404, "application/json", `{"error":{"code":"not_found","message":"no route"}}`, nil}, ""},
		{"wrong method, rightly", "PUT", "/v1/jobs/run", answer{405, "application/json", `{"error":{"code":"method_not_allowed","message":"no"}}`, map[string]string{"Allow": "POST"}}, ""},
		{"a compatible time with milliseconds", "GET", "/v1/jobs/0123456789abcdef", answer{200, "application/json",
			`{"job_id":"0123456789abcdef","status":"running","done":false,"exit_code":null,"created_at":"2026-12-01T06:29:01.123Z","started_at":null,"ended_at":null,"offset":0}`, nil}, "created_at"},
		{"an event stream is not read", "GET", "/v1/jobs/0123456789abcdef/stream", answer{200, "text/event-stream", "event: end\ndata: {}\n\n", nil}, ""},
		{"a bad input-wait header", "POST", "/v1/jobs/0123456789abcdef/wait", answer{200, "application/json", okResult, map[string]string{"X-Shellctl-Input-Wait": "yes"}}, "X-Shellctl-Input-Wait"},
	}
	var cur int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := cases[cur].a
		w.Header().Set("Content-Type", a.ct)
		w.Header().Set("X-Request-Id", "r1")
		for k, v := range a.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	var reports []error
	hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Checker: c, Report: func(_ *http.Request, err error) { reports = append(reports, err) }}}
	for i, tc := range cases {
		cur = i
		reports = nil
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != tc.a.body {
			t.Errorf("%s: the caller got %q, want the body unchanged %q", tc.name, body, tc.a.body)
		}
		switch {
		case tc.wrong == "" && len(reports) > 0:
			t.Errorf("%s: a right answer was reported: %v", tc.name, reports)
		case tc.wrong != "" && len(reports) == 0:
			t.Errorf("%s: a wrong answer passed", tc.name)
		case tc.wrong != "" && !strings.Contains(fmt.Sprint(reports), tc.wrong):
			t.Errorf("%s: the report does not name %q: %v", tc.name, tc.wrong, reports)
		}
	}
}

// The record's Go type, marshalled for a job that runs (every optional
// value null) and for one that ended (every value set), matches the
// document's Record.
func TestRecordTypeMatchesTheDocument(t *testing.T) {
	c := load(t)
	sch := c.Doc().Components.Schemas["Record"].Value
	s := func(v string) *string { return &v }
	n := func(v int) *int { return &v }
	n64 := func(v int64) *int64 { return &v }
	b := true
	running := jobs.Record{JobID: "0123456789abcdef", Status: "running", Mode: "pty", Stdin: "pty", Cwd: "/w", Home: "/w", EnvNames: []string{},
		CreatedAt: "2026-12-01T06:29:01.123Z", OutputComplete: true}
	ended := jobs.Record{JobID: "0123456789abcdef", Status: "terminated", Done: true, ExitCode: n(130), Signal: s("SIGINT"),
		Reason: s("terminate_requested"), Message: s("m"), Mode: "pty", Stdin: "pty", Cwd: "/w", Home: "/w", Terminal: &jobs.Terminal{Cols: 80, Rows: 24},
		SessionID: s("s1"), EnvNames: []string{"A"}, CreatedAt: "2026-12-01T06:29:01.123Z", StartedAt: s("2026-12-01T06:29:01.124Z"),
		EndedAt: s("2026-12-01T06:29:02.000Z"), OutputBytes: 5, InputWait: &b, PID: n(7), Pgid: n(7),
		Isolation: &jobs.RecordIsol{Enabled: true, LandlockABI: 6, Rules: []isolation.AppliedRule{{Path: "/usr", Access: []string{"read_file"}}}, Scoped: []string{"signal"}},
		Limits:    jobs.RecordLimits{Asked: jobs.Limits{OutputBytes: n64(1 << 30)}, Applied: &runner.AppliedLimits{OutputBytes: n64(1 << 30), Why: "no memory controller"}},
		Usage:     &runner.Usage{CPUUserMS: 1, Source: "rusage_children"}, IdempotencyKey: s("k")}
	for name, rec := range map[string]jobs.Record{"running": running, "ended": ended} {
		raw, _ := json.Marshal(rec)
		var v any
		json.Unmarshal(raw, &v)
		if err := sch.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("record of a %s job does not match the document: %v\n%s", name, err, raw)
		}
	}
	// And a key the document does not know is caught.
	raw, _ := json.Marshal(running)
	var v map[string]any
	json.Unmarshal(raw, &v)
	v["surprise"] = 1
	if err := sch.VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
		t.Error("a record with a key too many passed")
	}
}
