package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The MCP server (internal/mcp) driven by a client no one here wrote: the
// reference TypeScript SDK, installed with npm ci from the lockfile in
// testdata/mcp-client, over both transports: `shellctl mcp` (stdio) and
// POST/GET /mcp on serve (Streamable HTTP).

const mcpToken = "mcp-e2e-token"

// mcpLongLines makes a long output (seq 1 N): about 170 KB, more than ten
// answers at the 16 KiB cap.
const mcpLongLines = 30000

// mcpTimedRuns short jobs are timed through the whole chain (logged).
const mcpTimedRuns = 20

// mcpClientDir installs the client's packages once per lockfile, in the
// user's cache dir (outside the repository), and returns where the client
// script runs from. It skips the test where npm or node is missing.
func mcpClientDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: the MCP test drives the server with the TypeScript SDK, installed by npm (install Node.js and npm to run it)", tool)
		}
	}
	src := filepath.Join("testdata", "mcp-client")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(append([]byte{}, pkg...), lock...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "shellctl-e2e", "mcp-client-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		// Installed beside, then renamed in place: a run cut short leaves
		// no half-installed dir behind for the next.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
			if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci of testdata/mcp-client: %v\n%s", err, out)
		}
		if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
			if _, serr := os.Stat(dir); serr != nil {
				t.Fatalf("install the MCP client: %v", err)
			}
		}
	}
	script, err := os.ReadFile(filepath.Join(src, "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// The script sits beside its node_modules, so its imports resolve.
	ssum := sha256.Sum256(script)
	name := "client-" + hex.EncodeToString(ssum[:6]) + ".mjs"
	// Written beside and renamed over: the MCP tests run in parallel, and
	// a node already reading the script never sees it truncated.
	f, err := os.CreateTemp(dir, "client-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(script)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// mcpResult is one tools/call answer as the client saw it.
type mcpResult struct {
	IsError bool            `json:"isError"`
	Text    string          `json:"text"`
	Data    json.RawMessage `json:"data"`
}

type mcpAnswer struct {
	JobID       string `json:"job_id"`
	Status      string `json:"status"`
	Done        bool   `json:"done"`
	ExitCode    *int   `json:"exit_code"`
	Output      string `json:"output"`
	MoreOutput  bool   `json:"more_output_pending"`
	InputWait   *bool  `json:"input_wait"`
	Note        string `json:"note"`
	SessionID   string `json:"session_id"`   // shell_status
	UnreadBytes *int64 `json:"unread_bytes"` // shell_status
}

func (r mcpResult) answer(t *testing.T, step string) mcpAnswer {
	t.Helper()
	if r.IsError {
		t.Fatalf("%s: tool error: %s", step, r.Text)
	}
	var a mcpAnswer
	if err := json.Unmarshal(r.Data, &a); err != nil {
		t.Fatalf("%s: structured content %s: %v", step, r.Data, err)
	}
	return a
}

type mcpReport struct {
	Fatal          string  `json:"fatal"`
	NoTokenStatus  int     `json:"noTokenStatus"`
	NoTokenConnect string  `json:"noTokenConnect"`
	PromptRunMs    float64 `json:"promptRunMs"`
	RunMs          struct {
		Min, P50, Max float64
	} `json:"runMs"`
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	Tools []struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Required    []string `json:"required"`
		Properties  []string `json:"properties"`
	} `json:"tools"`
	Steps struct {
		PromptRun, PromptInput, PromptWait, PromptStatus mcpResult
		Long                                             struct {
			First  mcpResult `json:"first"`
			Last   mcpResult `json:"last"`
			Pieces []string  `json:"pieces"`
			Calls  int       `json:"calls"`
		} `json:"long"`
		IntRun, IntSignal, IntTerminate mcpResult
		CtrlcRun, Ctrlc                 mcpResult
		PipeRun, PipeInput, PipeEOF     mcpResult
		PipeStatus                      mcpResult
		BadCwd, UnknownJob, BadKey      mcpResult
		List                            mcpResult
		// The screen tools on less.
		LessRun, LessScreen, LessSpace, LessDown, LessQuit, LessWait, LessAfter mcpResult
		ScreenStdio, KeysEnded, KeysBad, ScreenUnknown                          mcpResult
		// The file tools.
		FileWrite, FileRead, FileEditNoMatch, FileEditAmbiguous, FileEditOk, FileReadAfter, FileList, FileBinary, FileOutside mcpResult
	} `json:"steps"`
}

func runMCPClient(t *testing.T, script string, cfg map[string]any) mcpReport {
	t.Helper()
	if d, ok := cfg["filesDir"].(string); ok {
		// A binary file for read_file to refuse.
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "bin"), []byte("a\x00b"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg["longLines"] = mcpLongLines
	cfg["timedRuns"] = mcpTimedRuns
	raw, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, string(raw))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep mcpReport
	if jerr := json.Unmarshal(stdout.Bytes(), &rep); jerr != nil {
		out := stdout.String()
		if len(out) > 4000 {
			out = out[:2000] + " … " + out[len(out)-2000:]
		}
		t.Fatalf("MCP client (%v): no JSON report: %v\nstdout: %s\nstderr: %s", err, jerr, out, stderr.String())
	}
	if err != nil || rep.Fatal != "" {
		t.Fatalf("MCP client failed (%v): %s\nstderr: %s", err, rep.Fatal, stderr.String())
	}
	return rep
}

func TestMCPStdio(t *testing.T) {
	parallel(t)
	script := mcpClientDir(t)
	s := startServer(t, serverOpts{token: mcpToken})
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(mcpToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := runMCPClient(t, script, map[string]any{
		"transport": "stdio",
		"command":   filepath.Join(binDir, "shellctl"),
		"args":      []string{"mcp", "--server", s.URL, "--token-file", tokFile},
		"env":       map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
		"filesDir":  s.Home + "/mcp-files",
	})
	checkMCPReport(t, s, rep)
}

func TestMCPStreamableHTTP(t *testing.T) {
	parallel(t)
	script := mcpClientDir(t)
	s := startServer(t, serverOpts{token: mcpToken})
	rep := runMCPClient(t, script, map[string]any{"transport": "http", "url": s.URL + "/mcp", "token": mcpToken, "filesDir": s.Home + "/mcp-files"})
	if rep.NoTokenStatus != 401 {
		t.Errorf("POST /mcp without the token answered %d, want 401", rep.NoTokenStatus)
	}
	if !strings.HasPrefix(rep.NoTokenConnect, "refused") {
		t.Errorf("the SDK's connect without the token: %q, want refused", rep.NoTokenConnect)
	}
	checkMCPReport(t, s, rep)
}

func checkMCPReport(t *testing.T, s *server, rep mcpReport) {
	t.Helper()
	if rep.Server.Name != "shellctl" {
		t.Errorf("server name %q, want shellctl", rep.Server.Name)
	}
	want := []string{"edit_file", "list_dir", "read_file", "shell_input", "shell_interrupt", "shell_keys", "shell_list", "shell_run", "shell_screen", "shell_status", "shell_wait", "write_file"}
	var got []string
	for _, tl := range rep.Tools {
		got = append(got, tl.Name)
		if len(tl.Description) < 40 {
			t.Errorf("tool %s: description %q is too short to guide a model", tl.Name, tl.Description)
		}
		if tl.Name == "shell_run" && (len(tl.Required) != 1 || tl.Required[0] != "script") {
			t.Errorf("shell_run requires %v, want [script]", tl.Required)
		}
	}
	if strings.Join(slices.Sorted(slices.Values(got)), ",") != strings.Join(want, ",") {
		t.Errorf("tools %v, want %v", got, want)
	}
	st := &rep.Steps
	checkMCPFiles(t, s, st.FileWrite, st.FileRead, st.FileEditNoMatch, st.FileEditAmbiguous, st.FileEditOk, st.FileReadAfter, st.FileList, st.FileBinary, st.FileOutside)

	// The prompt shows before it is answered; the answer reaches the job.
	run := st.PromptRun.answer(t, "shell_run (prompt)")
	if !strings.Contains(run.Output, "name? ") || run.Done {
		t.Errorf("shell_run of a prompt: %+v, want the prompt and the job still running", run)
	}
	if run.InputWait != nil && !*run.InputWait {
		t.Errorf("shell_run of a prompt says input_wait false")
	}
	in := st.PromptInput.answer(t, "shell_input")
	end := st.PromptWait.answer(t, "shell_wait (prompt)")
	if !strings.Contains(in.Output+end.Output, "hi ada") || !end.Done || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Errorf("after the answer: input %+v, then %+v; want \"hi ada\" and exit 0", in, end)
	}
	if strings.Contains(in.Output, "name? ") {
		t.Errorf("shell_input repeats output the session has read already: %q", in.Output)
	}
	stat := st.PromptStatus.answer(t, "shell_status")
	// A server that detects input-wait (extended-api.md §4) says so in a
	// pty job's record (a bool, not null); then the prompt must have been
	// reported as one.
	if stat.InputWait != nil && (run.InputWait == nil || !*run.InputWait) {
		t.Errorf("the server detects input-wait, but shell_run of a prompt answered input_wait %v", run.InputWait)
	}
	// And the answer came as the prompt blocked, not after the second of
	// silence that ends a wait otherwise (return_on_input_wait).
	if stat.InputWait != nil && rep.PromptRunMs >= 800 {
		t.Errorf("shell_run of a prompt answered after %.0f ms, want it as soon as the job waits for input (well under the 1 s idle flush)", rep.PromptRunMs)
	}
	t.Logf("shell_run of a prompt answered in %.1f ms (input_wait %v)", rep.PromptRunMs, run.InputWait != nil && *run.InputWait)
	if stat.JobID != run.JobID || stat.ExitCode == nil || *stat.ExitCode != 0 || !strings.HasPrefix(stat.SessionID, "mcp-") ||
		stat.UnreadBytes == nil || *stat.UnreadBytes != 0 {
		t.Errorf("shell_status: %s", st.PromptStatus.Data)
	}

	// The long output: bounded pieces that add up to every line.
	first := st.Long.First.answer(t, "shell_run (long)")
	if !first.MoreOutput || !strings.Contains(st.Long.First.Text, "16384") {
		t.Errorf("the first answer of a long output is not marked cut at the cap: %+v", first)
	}
	var b strings.Builder
	for i := 1; i <= mcpLongLines; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	for i, p := range st.Long.Pieces {
		if len(p) > 16384 {
			t.Errorf("piece %d has %d bytes, more than the cap", i, len(p))
		}
	}
	if joined := strings.Join(st.Long.Pieces, ""); joined != b.String() {
		t.Errorf("the pieces (%d calls) join to %d bytes, want %d (seq 1 %d)", st.Long.Calls, len(joined), b.Len(), mcpLongLines)
	}
	if last := st.Long.Last.answer(t, "shell_wait (long, last)"); !last.Done || last.MoreOutput || st.Long.Calls < b.Len()/16384 {
		t.Errorf("long output: %d calls, last %+v", st.Long.Calls, last)
	}

	// Interrupts.
	if a := st.IntSignal.answer(t, "shell_interrupt INT"); !strings.Contains(a.Output, "got INT") || a.Done {
		t.Errorf("INT to a job that traps it: %+v, want \"got INT\" and still running", a)
	}
	if a := st.IntTerminate.answer(t, "shell_interrupt terminate"); !a.Done || a.Status != "terminated" {
		t.Errorf("terminate: %+v, want done and terminated", a)
	}
	if a := st.Ctrlc.answer(t, "shell_input C-c"); !a.Done {
		t.Errorf("C-c to sleep: %+v, want the job ended", a)
	}

	// A stdin pipe: shell_run's stdin, shell_input's text and eof.
	for _, tl := range rep.Tools {
		if tl.Name == "shell_run" && !slices.Contains(tl.Properties, "stdin") {
			t.Errorf("shell_run's properties %v have no stdin", tl.Properties)
		}
		if tl.Name == "shell_input" && !slices.Contains(tl.Properties, "eof") {
			t.Errorf("shell_input's properties %v have no eof", tl.Properties)
		}
	}
	if a := st.PipeRun.answer(t, "shell_run stdin pipe"); a.Done {
		t.Errorf("cat with a stdin pipe ended before any input: %+v", a)
	}
	if a := st.PipeInput.answer(t, "shell_input to a pipe"); a.Output != "through the pipe\n" || a.Done {
		t.Errorf("shell_input to cat's pipe: %+v, want its line back and cat still running", a)
	}
	if a := st.PipeEOF.answer(t, "shell_input eof"); !a.Done || a.ExitCode == nil || *a.ExitCode != 0 {
		t.Errorf("shell_input eof to cat: %+v, want cat ended with 0", a)
	}
	var ps struct {
		Stdin string `json:"stdin"`
	}
	if err := json.Unmarshal(st.PipeStatus.Data, &ps); err != nil || ps.Stdin != "closed" {
		t.Errorf("shell_status of the pipe job after eof: stdin %q (%v), want closed: %s", ps.Stdin, err, st.PipeStatus.Data)
	}

	// Tool errors.
	for name, r := range map[string]struct {
		res  mcpResult
		want string
	}{
		"bad cwd":     {st.BadCwd, "/nonexistent/shellctl-e2e"},
		"unknown job": {st.UnknownJob, "not found"},
		"bad key":     {st.BadKey, "Hyper"},
	} {
		if !r.res.IsError || !strings.Contains(r.res.Text, r.want) {
			t.Errorf("%s: isError %v, text %q; want a tool error naming %q", name, r.res.IsError, r.res.Text, r.want)
		}
	}

	checkMCPScreen(t, rep)

	// The session's jobs, and only its.
	var list struct {
		Jobs []struct {
			JobID  string `json:"job_id"`
			Status string `json:"status"`
			Script string `json:"script"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(st.List.Data, &list); err != nil || st.List.IsError {
		t.Fatalf("shell_list: %s %s (%v)", st.List.Text, st.List.Data, err)
	}
	ids := map[string]string{}
	for _, j := range list.Jobs {
		ids[j.JobID] = j.Status
	}
	if len(list.Jobs) != 6 || ids[run.JobID] != "exited" || ids[first.JobID] != "exited" {
		t.Errorf("shell_list: %s, want the 6 jobs of the session", st.List.Data)
	}
	// The server ran exactly those jobs.
	all, err := s.c.List(context.Background(), "", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6+mcpTimedRuns {
		t.Errorf("the server ran %d jobs, want %d", len(all), 6+mcpTimedRuns)
	}
	for _, j := range all[mcpTimedRuns:] { // newest first: the timed runs came last
		if _, ok := ids[j.JobID]; !ok {
			t.Errorf("job %s is not in shell_list", j.JobID)
		}
	}
	t.Logf("shell_run of `true`, from the client's call to its answer: min %.1f ms, p50 %.1f ms, max %.1f ms (%d runs)",
		rep.RunMs.Min, rep.RunMs.P50, rep.RunMs.Max, mcpTimedRuns)
}

// An MCP client's open event stream (GET /mcp) does not hold the server's
// stop: serve ends it at shutdown instead of waiting out its 10 s grace.
func TestMCPStreamDoesNotHoldStop(t *testing.T) {
	s := startServer(t, serverOpts{token: mcpToken})
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+mcpToken)
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
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+mcpToken)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("GET /mcp: %d", stream.StatusCode)
	}
	t0 := time.Now()
	s.kill(syscall.SIGTERM)
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("serve took %v to stop with an MCP event stream open, want well under its 10 s shutdown grace", d)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exited with %d after SIGTERM, want 0", code)
	}
}

// mcpScreen is an answer of shell_screen or shell_keys.
type mcpScreen struct {
	Cols, Rows int
	Cursor     struct{ Row, Col int }
	AltScreen  bool      `json:"alt_screen"`
	Lines      []string  `json:"lines"`
	Scrollback *[]string `json:"scrollback"`
}

func (r mcpResult) screen(t *testing.T, step string) mcpScreen {
	t.Helper()
	if r.IsError {
		t.Fatalf("%s: tool error: %s", step, r.Text)
	}
	var sc mcpScreen
	if err := json.Unmarshal(r.Data, &sc); err != nil {
		t.Fatalf("%s: structured content %s: %v", step, r.Data, err)
	}
	return sc
}

// checkMCPScreen: less driven by shell_keys, read by shell_screen, through
// the reference SDK.
func checkMCPScreen(t *testing.T, rep mcpReport) {
	t.Helper()
	st := &rep.Steps
	for _, tl := range rep.Tools {
		if (tl.Name == "shell_screen" || tl.Name == "shell_keys") && !strings.Contains(tl.Description, "less") {
			t.Errorf("%s: the description does not say when to use it (full-screen programs): %q", tl.Name, tl.Description)
		}
		if tl.Name == "shell_keys" && strings.Join(tl.Required, ",") != "job_id,keys" {
			t.Errorf("shell_keys requires %v, want [job_id keys]", tl.Required)
		}
	}
	if run := st.LessRun.answer(t, "shell_run (less)"); run.Done {
		t.Fatalf("less ended at once: %+v", run)
	}
	sc := st.LessScreen.screen(t, "shell_screen (less)")
	if !sc.AltScreen || sc.Rows < 10 || len(sc.Lines) != sc.Rows || sc.Lines[0] != "line 0001" || sc.Lines[sc.Rows-2] != fmt.Sprintf("line %04d", sc.Rows-1) {
		t.Fatalf("shell_screen of less: %s\n%s", st.LessScreen.Data, st.LessScreen.Text)
	}
	if !strings.Contains(st.LessScreen.Text, "alternate screen") || !strings.Contains(st.LessScreen.Text, "\nline 0001\n") {
		t.Errorf("shell_screen text: %q", st.LessScreen.Text)
	}
	page := sc.Rows - 1
	if sp := st.LessSpace.screen(t, "shell_keys Space"); sp.Lines[0] != fmt.Sprintf("line %04d", page+1) {
		t.Errorf("after Space row 0 is %q, want line %04d", sp.Lines[0], page+1)
	}
	if dn := st.LessDown.screen(t, "shell_keys down Down"); dn.Lines[0] != fmt.Sprintf("line %04d", page+3) {
		t.Errorf("after Down Down row 0 is %q, want line %04d", dn.Lines[0], page+3)
	}
	if q := st.LessQuit.screen(t, "shell_keys q"); q.AltScreen {
		t.Errorf("after q: still on the alternate screen: %s", st.LessQuit.Text)
	}
	if w := st.LessWait.answer(t, "shell_wait (less)"); !w.Done || !strings.Contains(w.Output, "after less") {
		t.Errorf("less's job after q: %+v", w)
	}
	after := st.LessAfter.screen(t, "shell_screen (less ended)")
	if after.AltScreen || after.Scrollback == nil || !slices.Contains(after.Lines, "after less") {
		t.Errorf("the last screen of the job: %s", st.LessAfter.Data)
	}
	for name, r := range map[string]struct {
		res  mcpResult
		want string
	}{
		"screen of a stdio job": {st.ScreenStdio, "a stdio job has no terminal"},
		"keys to an ended job":  {st.KeysEnded, "job_not_running"},
		"a bad key":             {st.KeysBad, `"C-1"`},
		"screen of no such job": {st.ScreenUnknown, "job_not_found"},
	} {
		if !r.res.IsError || !strings.Contains(r.res.Text, r.want) {
			t.Errorf("%s: isError %v, text %q; want a tool error with %q", name, r.res.IsError, r.res.Text, r.want)
		}
	}
}

// checkMCPFiles checks the file tools' steps of the reference client:
// read_file's window of numbered lines, edit_file's three outcomes,
// list_dir, a binary file and a path outside the roots refused.
func checkMCPFiles(t *testing.T, s *server, write, read, noMatch, ambiguous, ok, readAfter, list, binary, outside mcpResult) {
	t.Helper()
	if write.IsError || !strings.Contains(string(write.Data), `"sha256"`) {
		t.Errorf("write_file: %v %s %s", write.IsError, write.Text, write.Data)
	}
	var rd struct {
		Content   string `json:"content"`
		FirstLine int    `json:"first_line"`
		Lines     int    `json:"lines"`
		More      bool   `json:"more"`
	}
	if err := json.Unmarshal(read.Data, &rd); err != nil || read.IsError {
		t.Fatalf("read_file: %v %s", err, read.Text)
	}
	if rd.Content != "    10\tline 10\n    11\tline 11\n    12\tline 12\n    13\tline 13\n    14\tline 14\n" || rd.FirstLine != 10 || rd.Lines != 5 || !rd.More {
		t.Errorf("read_file offset 10 limit 5: %+v", rd)
	}
	if !noMatch.IsError || !strings.Contains(noMatch.Text, "edit_no_match") {
		t.Errorf("edit_file no match: %v %q", noMatch.IsError, noMatch.Text)
	}
	if !ambiguous.IsError || !strings.Contains(ambiguous.Text, "edit_ambiguous") || !strings.Contains(ambiguous.Text, "2 times") {
		t.Errorf("edit_file ambiguous: %v %q", ambiguous.IsError, ambiguous.Text)
	}
	if ok.IsError || !strings.Contains(string(ok.Data), `"replacements":1`) {
		t.Errorf("edit_file: %v %q %s", ok.IsError, ok.Text, ok.Data)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Home, "mcp-files", "notes.txt")); !strings.Contains(string(b), "line 6\nseven\nline 8\n") {
		t.Errorf("the edited file: %q", b)
	}
	if err := json.Unmarshal(readAfter.Data, &rd); err != nil || rd.Content != "     6\tline 6\n     7\tseven\n     8\tline 8\n" {
		t.Errorf("read_file after the edit: %v %+v", err, rd)
	}
	if list.IsError || !strings.Contains(string(list.Data), `"name":"notes.txt","type":"file"`) {
		t.Errorf("list_dir: %v %s", list.IsError, list.Data)
	}
	if !binary.IsError || !strings.Contains(binary.Text, "binary") {
		t.Errorf("read_file of a binary file: %v %q", binary.IsError, binary.Text)
	}
	if !outside.IsError || !strings.Contains(outside.Text, "path_not_allowed") {
		t.Errorf("read_file /etc/shadow: %v %q", outside.IsError, outside.Text)
	}
}
