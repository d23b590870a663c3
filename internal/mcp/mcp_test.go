package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/client"
)

// fakeJobs holds one job's output and answers windows of it as the API does.
type fakeJobs struct {
	mu      sync.Mutex
	output  string
	waits   []WaitRequest // every wait and input, as asked
	inputs  []string
	runs    []RunRequest
	signals []string
	wait    *bool // input_wait to report

	lines, scrollback []string             // the screen (screen_test.go)
	keys              []client.KeysRequest // every keys request
}

const fakeID = "00000000000000aa"

func (f *fakeJobs) window(off int64, limit int) *Window {
	end := min(int64(len(f.output)), off+int64(limit))
	return &Window{JobResult: client.JobResult{JobID: fakeID, Status: "running", Output: f.output[off:end], Offset: end,
		Truncated: end < int64(len(f.output))}, InputWait: f.wait}
}

func (f *fakeJobs) Run(_ context.Context, r RunRequest) (*Window, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Cwd == "/nope" {
		return nil, &client.Error{Status: 400, Code: "invalid_cwd", Message: `cwd "/nope" does not exist`}
	}
	f.runs = append(f.runs, r)
	return f.window(0, r.OutputLimit), nil
}

func (f *fakeJobs) Wait(_ context.Context, id string, w WaitRequest) (*Window, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != fakeID {
		return nil, &client.Error{Status: 404, Code: "job_not_found", Message: "job " + id + " not found"}
	}
	f.waits = append(f.waits, w)
	return f.window(w.Offset, w.OutputLimit), nil
}

func (f *fakeJobs) Input(ctx context.Context, id, text string, _ bool, w WaitRequest) (*Window, error) {
	f.mu.Lock()
	f.inputs = append(f.inputs, text)
	f.mu.Unlock()
	return f.Wait(ctx, id, w)
}

func (f *fakeJobs) Signal(_ context.Context, id, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, sig)
	return nil
}

func (f *fakeJobs) Terminate(context.Context, string, float64) error { return nil }

func (f *fakeJobs) Record(_ context.Context, id string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Keys in the API's order, not sorted.
	// A whole record of a running job, as the API gives one.
	return json.RawMessage(fmt.Sprintf(`{"job_id":%q,"status":"running","done":false,"exit_code":null,"signal":null,"reason":null,"message":null,`+
		`"mode":"pty","stdin":"pty","cwd":"/home/agent","home":"/home/agent","terminal":{"cols":200,"rows":50},"session_id":null,"egress":null,"env_names":[],`+
		`"created_at":"2026-12-04T05:36:38.928Z","started_at":"2026-12-04T05:36:38.934Z","ended_at":null,"output_bytes":%d,"stderr_bytes":0,`+
		`"output_complete":false,"input_wait":false,"screen_available":true,"pid":1184,"pgid":1184,`+
		`"isolation":{"enabled":true,"landlock_abi":7,"rules":[{"path":"/usr","access":["execute","read_file","read_dir"]}],"scoped":["signal","abstract_unix"],"error":null,`+
		`"capabilities":["CHOWN","DAC_OVERRIDE","FOWNER","FSETID","KILL","SETGID","SETUID","SETPCAP","NET_BIND_SERVICE","NET_RAW","SYS_CHROOT","MKNOD","AUDIT_WRITE","SETFCAP"],"seccomp":"default","ipc_namespace":true},`+
		`"limits":{"asked":{"runtime_ms":null,"output_bytes":1073741824,"memory_bytes":null,"pids":null},"applied":{"runtime_ms":null,"output_bytes":1073741824,"memory_bytes":null,"pids":null}},`+
		`"usage":null,"idempotency_key":null}`+"\n", id, len(f.output))), nil
}

// connect opens one MCP session on s (in memory) with the Go SDK's client.
func connect(t *testing.T, s *Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.SDK().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, Answer) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var a Answer
	if !res.IsError {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
	}
	return res, a
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Each session reads a job from where it stopped, in pieces of the cap;
// another session reads the same job from its start.
func TestCursorPerSessionAndCap(t *testing.T) {
	f := &fakeJobs{output: strings.Repeat("x", 250)}
	s := New(f, Options{OutputCap: 100})
	a := connect(t, s)
	res, ans := callTool(t, a, "shell_run", map[string]any{"script": "yes x"})
	if len(ans.Output) != 100 || !ans.MoreOutput || !strings.Contains(text(res), "cap of 100 bytes") {
		t.Fatalf("first answer: %+v / %q", ans, text(res))
	}
	if f.runs[0].OutputLimit != 100 || !f.runs[0].ReturnOnInputWait || !strings.HasPrefix(f.runs[0].SessionID, "mcp-") {
		t.Errorf("run asked %+v", f.runs[0])
	}
	_, ans = callTool(t, a, "shell_wait", map[string]any{"job_id": fakeID})
	_, last := callTool(t, a, "shell_wait", map[string]any{"job_id": fakeID})
	if f.waits[0].Offset != 100 || f.waits[1].Offset != 200 || len(ans.Output) != 100 || len(last.Output) != 50 || last.MoreOutput {
		t.Errorf("waits %+v, answers %d then %d bytes (more %v)", f.waits, len(ans.Output), len(last.Output), last.MoreOutput)
	}
	b := connect(t, s)
	callTool(t, b, "shell_wait", map[string]any{"job_id": fakeID})
	if got := f.waits[2].Offset; got != 0 {
		t.Errorf("a second session starts reading at %d, want 0", got)
	}
	// shell_status tells what this session has not read.
	res, _ = callTool(t, b, "shell_status", map[string]any{"job_id": fakeID})
	var rec map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &rec)
	if rec["unread_bytes"] != float64(150) {
		t.Errorf("unread_bytes %v, want 150", rec["unread_bytes"])
	}
	// shell_list: only the session's own runs.
	res, _ = callTool(t, b, "shell_list", nil)
	raw, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"jobs":[]`) {
		t.Errorf("session b lists %s, want none (it ran nothing)", raw)
	}
	res, _ = callTool(t, a, "shell_list", nil)
	raw, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), fakeID) || !strings.Contains(string(raw), `"script":"yes x"`) {
		t.Errorf("session a lists %s", raw)
	}
}

// shell_status answers the record as the API wrote it, unread_bytes added
// at its end, in the structured answer and its text.
func TestStatusIsTheRecordAsWritten(t *testing.T) {
	f := &fakeJobs{output: strings.Repeat("x", 250)}
	cs := connect(t, New(f, Options{OutputCap: 100}))
	callTool(t, cs, "shell_run", map[string]any{"script": "yes x"})
	res, _ := callTool(t, cs, "shell_status", map[string]any{"job_id": fakeID})
	rec, _ := f.Record(context.Background(), fakeID)
	want := strings.TrimSuffix(strings.TrimSpace(string(rec)), "}") + `,"unread_bytes":150}`
	if text(res) != want {
		t.Fatalf("shell_status's text is %s, want %s", text(res), want)
	}
	// The client decodes the structured answer (into a map: its order
	// is gone there).
	var got, exp map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &got)
	json.Unmarshal([]byte(want), &exp)
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("shell_status's structured answer is %s, want %s", raw, want)
	}
}

// Every tool's answer is valid for the output schema it advertises: the
// check the SDK would make on each call (addTool leaves it to this test).
func TestToolSchemasAreTheAnswers(t *testing.T) {
	f := &fakeJobs{output: "hello <b> & \"world\"\n"}
	cs := connect(t, New(f, Options{}))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tl := range tools.Tools {
		raw, _ := json.Marshal(tl.OutputSchema)
		var sc jsonschema.Schema
		if err := json.Unmarshal(raw, &sc); err != nil {
			t.Fatalf("%s: output schema %s: %v", tl.Name, raw, err)
		}
		r, err := sc.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema %s: %v", tl.Name, raw, err)
		}
		schemas[tl.Name] = r
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"shell_run", map[string]any{"script": "echo hello"}},
		{"shell_wait", map[string]any{"job_id": fakeID}},
		{"shell_input", map[string]any{"job_id": fakeID, "text": "y\n"}},
		{"shell_interrupt", map[string]any{"job_id": fakeID}},
		{"shell_status", map[string]any{"job_id": fakeID}},
		{"shell_list", nil},
		{"shell_screen", map[string]any{"job_id": fakeID}},
		{"shell_keys", map[string]any{"job_id": fakeID, "keys": []string{"Enter"}}},
	}
	for _, c := range calls {
		res, _ := callTool(t, cs, c.tool, c.args)
		if res.IsError {
			t.Fatalf("%s answered an error: %s", c.tool, text(res))
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if err := schemas[c.tool].Validate(&v); err != nil {
			t.Errorf("%s: answer %s is not valid for its output schema: %v", c.tool, raw, err)
		}
	}
	if len(calls) != len(tools.Tools) {
		t.Errorf("%d tools, %d checked: check the new ones here", len(tools.Tools), len(calls))
	}
}

func TestToolErrors(t *testing.T) {
	f := &fakeJobs{}
	cs := connect(t, New(f, Options{}))
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"shell_run", map[string]any{"script": "true", "cwd": "/nope"}, `cwd "/nope" does not exist (invalid_cwd)`},
		{"shell_run", map[string]any{"script": "  "}, "script is empty"},
		{"shell_wait", map[string]any{"job_id": "ffffffffffffffff"}, "shell_list"},
		{"shell_input", map[string]any{"job_id": fakeID, "keys": []string{"Hyper"}}, `unknown key "Hyper"`},
		{"shell_input", map[string]any{"job_id": fakeID}, "nothing to send"},
		{"shell_run", map[string]any{"script": "true", "mode": "tty"}, "mode"},
	} {
		res, _ := callTool(t, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("%s %v: isError %v, %q; want a tool error with %q", c.tool, c.args, res.IsError, text(res), c.want)
		}
	}
}

func TestInputKeysAndSignal(t *testing.T) {
	yes := true
	f := &fakeJobs{output: "name? ", wait: &yes}
	cs := connect(t, New(f, Options{}))
	_, a := callTool(t, cs, "shell_run", map[string]any{"script": "read n"})
	if a.InputWait == nil || !*a.InputWait || !strings.Contains(a.Note, "shell_input") {
		t.Errorf("a job waiting for input: %+v", a)
	}
	callTool(t, cs, "shell_input", map[string]any{"job_id": fakeID, "text": "ada", "keys": []string{"Enter", "C-c", "up", "Tab"}})
	if got := f.inputs[0]; got != "ada\r\x03\x1b[A\t" {
		t.Errorf("input sent %q", got)
	}
	callTool(t, cs, "shell_interrupt", map[string]any{"job_id": fakeID})
	if len(f.signals) != 1 || f.signals[0] != "INT" {
		t.Errorf("signals %v, want [INT]", f.signals)
	}
}

func TestKeyBytes(t *testing.T) {
	for name, want := range map[string]string{"Enter": "\r", "esc": "\x1b", "C-a": "\x01", "ctrl-z": "\x1a", "^D": "\x04", "C-\\": "\x1c",
		"PageDown": "\x1b[6~", "up": "\x1b[A", "f5": "\x1b[15~", "q": "q", "M-b": "\x1bb", "alt-f": "\x1bf", "BTab": "\x1b[Z"} {
		if got, err := keyBytes(name); err != nil || got != want {
			t.Errorf("keyBytes(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, bad := range []string{"C-1", "Hyper", "F13", ""} {
		if _, err := keyBytes(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("keyBytes(%q): %v, want an error naming it", bad, err)
		}
	}
}

func TestCleanOutput(t *testing.T) {
	for _, c := range []struct {
		in, want string
		held     int
	}{
		{"\x1b[1;31mred\x1b[0m\r\nnext\x1b]0;title\x07 line\r\n\x1b(Bplain\rover", "red\nnext line\nplain\rover", 0},
		{"ok\x1b[3", "ok", 3},
		{"ok\x1b", "ok", 1},
		{"line\r", "line", 1},
		{"t\x1b]0;ti", "t", 6},
		{"plain", "plain", 0},
	} {
		got, held := cleanOutput(c.in)
		if got != c.want || held != c.held {
			t.Errorf("cleanOutput(%q) = %q, %d; want %q, %d", c.in, got, held, c.want, c.held)
		}
	}
}

// A control sequence cut by the window is left for the next answer (the
// cursor stops before it), not shown in pieces; a finished job's is shown.
func TestHeldSequence(t *testing.T) {
	f := &fakeJobs{output: "ab\x1b[31mc"}
	s := New(f, Options{OutputCap: 6})
	cs := connect(t, s)
	_, a := callTool(t, cs, "shell_run", map[string]any{"script": "x"})
	_, b := callTool(t, cs, "shell_wait", map[string]any{"job_id": fakeID})
	if a.Output != "ab" || b.Output != "c" || f.waits[0].Offset != 2 {
		t.Errorf("answers %q then %q (wait from %d), want \"ab\" then \"c\" from 2", a.Output, b.Output, f.waits[0].Offset)
	}
	// At the end of what is written, an unfinished "\r" is shown and read.
	f.output += "50%\r"
	_, c := callTool(t, cs, "shell_wait", map[string]any{"job_id": fakeID})
	callTool(t, cs, "shell_wait", map[string]any{"job_id": fakeID})
	if c.Output != "50%\r" || f.waits[2].Offset != int64(len(f.output)) {
		t.Errorf("answer %q, next wait from %d; want \"50%%\\r\" and %d", c.Output, f.waits[2].Offset, len(f.output))
	}
}

// ClientJobs sends the input-wait request field and reads the header; the
// in-process transport hands requests to a handler with path, token and
// body intact.
func TestClientJobsInProcess(t *testing.T) {
	var got struct {
		path, auth string
		body       map[string]any
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path, got.auth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		raw, _ := io.ReadAll(r.Body)
		json.Unmarshal(raw, &got.body)
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}`)
			return
		}
		w.Header().Set(InputWaitHeader, "1")
		io.WriteString(w, `{"job_id":"`+fakeID+`","done":false,"status":"running","exit_code":null,"output":"name? ","offset":6,"truncated":false}`)
	})
	j := ClientJobs{C: &client.Client{BaseURL: "http://in-process", Token: "tok", HTTP: &http.Client{Transport: InProcess(h)}}}
	w, err := j.Wait(context.Background(), fakeID, WaitRequest{Offset: 3, Timeout: 1, ReturnOnInputWait: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1/jobs/"+fakeID+"/wait" || got.body["return_on_input_wait"] != true || got.body["offset"] != float64(3) {
		t.Errorf("handler saw %+v", got)
	}
	if w.InputWait == nil || !*w.InputWait || w.Output != "name? " || w.Offset != 6 {
		t.Errorf("window %+v", w)
	}
	j.C.Token = ""
	_, err = j.Wait(context.Background(), fakeID, WaitRequest{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 401 || ce.Code != "unauthorized" {
		t.Errorf("without the token: %v", err)
	}
	// Over a real socket the same.
	srv := httptest.NewServer(h)
	defer srv.Close()
	j = ClientJobs{C: &client.Client{BaseURL: srv.URL, Token: "tok"}}
	if w, err := j.Wait(context.Background(), fakeID, WaitRequest{}); err != nil || w.InputWait == nil || !*w.InputWait {
		t.Errorf("over HTTP: %+v, %v", w, err)
	}
	// No server there: the model is told what to check.
	srv.Close()
	cs := connect(t, New(j, Options{}))
	res, _ := callTool(t, cs, "shell_wait", map[string]any{"job_id": fakeID})
	if !res.IsError || !strings.Contains(text(res), "cannot reach the shellctl server") {
		t.Errorf("server gone: %v %q", res.IsError, text(res))
	}
}

// Over Streamable HTTP, a call is answered with one JSON body, not an event
// stream: no tool sends anything before its answer, and an event stream
// cost every call a stream's setup on both sides (about a tenth of a
// shell_status, measured).
func TestHTTPAnswersAreJSON(t *testing.T) {
	srv := httptest.NewServer(New(&fakeJobs{}, Options{}).HTTPHandler(time.Minute))
	defer srv.Close()
	post := func(sid, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell_status","arguments":{"job_id":"`+fakeID+`"}}}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("tools/call answered as %q, want application/json: %s", ct, body)
	}
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.ID != 2 || msg.Result.StructuredContent["job_id"] != fakeID {
		t.Fatalf("tools/call answer %s (%v), want the record of %s", body, err, fakeID)
	}
}

// What a model reads of the tools: shell_keys' description is short (a
// model reads it every turn), shell_wait is not marked read-only (it moves
// the session's read position), and shell_status declares the record's
// fields, from the OpenAPI document.
func TestToolsForModels(t *testing.T) {
	cs := connect(t, New(&fakeJobs{}, Options{}))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, tl := range tools.Tools {
		switch tl.Name {
		case "shell_keys":
			seen++
			if n := len(tl.Description); n > 400 {
				t.Errorf("shell_keys' description is %d characters, want at most 400: %s", n, tl.Description)
			}
		case "shell_wait":
			seen++
			if tl.Annotations == nil || tl.Annotations.ReadOnlyHint {
				t.Errorf("shell_wait is marked read-only (%+v), but it moves the session's read position", tl.Annotations)
			}
		case "shell_status":
			seen++
			raw, _ := json.Marshal(tl.OutputSchema)
			var sc struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			json.Unmarshal(raw, &sc)
			for _, k := range []string{"job_id", "status", "exit_code", "reason", "isolation", "limits", "usage", "unread_bytes"} {
				if _, ok := sc.Properties[k]; !ok {
					t.Errorf("shell_status' output schema has no property %q: %s", k, raw)
				}
			}
		}
	}
	if seen != 3 {
		t.Fatalf("saw %d of the three tools", seen)
	}
}
