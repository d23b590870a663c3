package bench

// Rows for the paths added after the performance spec: input-wait
// latency, the screen's answer time and the MCP tool call's overhead over
// the HTTP API. Their targets are this project's (the spec names none).

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/client"
)

// promptLoop (bash: $EPOCHREALTIME) prints a timestamp line, then a prompt, and reads a line, until
// it reads q or its input ends.
const promptLoop = `while :; do printf 'T%s\n' "$EPOCHREALTIME"; read -r -p 'x> ' v || exit 0; [ "$v" = q ] && exit 0; done`

// lastStamp returns the time of the last "T<seconds.micros>" line of out.
func lastStamp(out string) (time.Time, error) {
	i := strings.LastIndex(out, "T")
	for ; i >= 0; i = strings.LastIndex(out[:i], "T") {
		rest := out[i+1:]
		if j := strings.IndexAny(rest, "\r\n"); j > 0 {
			if t, err := parseEpoch(rest[:j]); err == nil {
				return t, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("no timestamp line in %q", tail(out, 200))
}

// parseEpoch parses bash's $EPOCHREALTIME (seconds.microseconds).
func parseEpoch(s string) (time.Time, error) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) != 6 {
		return time.Time{}, fmt.Errorf("not seconds.micros: %q", s)
	}
	a, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	b, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(a, b*1000), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// callInputWait posts body to path with return_on_input_wait and returns
// the answer and when it arrived (decoded).
func (e *Env) callInputWait(ctx context.Context, path string, body map[string]any) (*client.JobResult, time.Time, error) {
	body["return_on_input_wait"] = true
	var out client.JobResult
	_, err := e.Client.Call(ctx, http.MethodPost, path, body, &out)
	return &out, time.Now(), err
}

func benchInputWait(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: "input-wait, prompt to answer", Unit: Millis, Target: Target{DiffAtMost, 5}}
	res, _, err := e.callInputWait(ctx, "/v1/jobs/run", map[string]any{"script": "#!/bin/bash\n" + promptLoop, "mode": "pty", "timeout": 10})
	if err != nil {
		r.Err = "run: " + err.Error()
		return []*Row{r}
	}
	id := res.JobID
	defer e.Client.Delete(context.Background(), id, true, 1)
	if res.Done {
		r.Err = fmt.Sprintf("the prompt loop ended %s: %q", res.Status, tail(res.Output, 200))
		return []*Row{r}
	}
	off := res.Offset

	fl, ferr := ptyPromptFloor(s.Runs + 5)
	if ferr != nil {
		r.FloorErr = ferr.Error()
	}
	var rt []float64
	for i := -5; i < s.Runs; i++ {
		res, at, err := e.callInputWait(ctx, "/v1/jobs/"+id+"/input", map[string]any{"text": "\n", "offset": off, "timeout": 10})
		if err != nil {
			r.Err = "input: " + err.Error()
			return []*Row{r}
		}
		if res.Done || !strings.HasSuffix(res.Output, "x> ") {
			r.Err = fmt.Sprintf("input %d answered without the prompt at its end (done %v): %q", i, res.Done, tail(res.Output, 200))
			return []*Row{r}
		}
		ts, err := lastStamp(res.Output)
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		off = res.Offset
		if i >= 0 {
			rt = append(rt, ms(at.Sub(ts)))
		}
	}
	r.Runtime = Summarize(rt)
	if ferr == nil {
		r.Floor = Summarize(fl[5:])
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d inputs of a newline (POST input, return_on_input_wait) to one pty job of `printf 'T%%s\\n' \"$EPOCHREALTIME\"; read -p 'x> '` in a loop: from the timestamp the job prints before its prompt to the decoded answer that ends with the prompt; floor: the same loop in a bare PTY, timestamp to the prompt read from the master; target (ours): p50 ≤ floor + 5 ms", len(rt)))
	return []*Row{r}
}

// ptyPromptFloor runs promptLoop in a bare PTY and returns n samples of the
// time from the timestamp it prints to the prompt read from the master.
func ptyPromptFloor(n int) ([]float64, error) {
	cmd := exec.Command("bash", "-c", promptLoop)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 200, Rows: 50})
	if err != nil {
		return nil, err
	}
	defer func() { f.Close(); cmd.Process.Kill(); cmd.Wait() }()
	buf := make([]byte, 4096)
	var acc []byte
	readPrompt := func() (string, time.Time, error) {
		acc = acc[:0]
		for !bytes.HasSuffix(acc, []byte("x> ")) {
			k, err := f.Read(buf)
			acc = append(acc, buf[:k]...)
			if err != nil {
				return "", time.Time{}, fmt.Errorf("bare PTY: %w after %q", err, acc)
			}
		}
		return string(acc), time.Now(), nil
	}
	if _, _, err := readPrompt(); err != nil {
		return nil, err
	}
	var out []float64
	for i := 0; i < n; i++ {
		if _, err := f.Write([]byte("\n")); err != nil {
			return nil, err
		}
		got, at, err := readPrompt()
		if err != nil {
			return nil, err
		}
		ts, err := lastStamp(got)
		if err != nil {
			return nil, err
		}
		out = append(out, ms(at.Sub(ts)))
	}
	return out, nil
}

func benchScreen(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: "screen, running less", Unit: Millis, Target: Target{ValueAtMost, 5}}
	file := filepath.Join(e.Home, "screen-bench.txt")
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "%06d %s\n", i, line99[:80])
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	defer os.Remove(file)
	res, _, err := e.callInputWait(ctx, "/v1/jobs/run", map[string]any{"script": "exec less " + file, "mode": "pty", "timeout": 10,
		"env": map[string]string{"TERM": "xterm", "LESS": ""}})
	if err != nil {
		r.Err = "run: " + err.Error()
		return []*Row{r}
	}
	id := res.JobID
	defer e.Client.Delete(context.Background(), id, true, 1)
	if res.Done {
		r.Err = fmt.Sprintf("less ended %s: %q", res.Status, tail(res.Output, 200))
		return []*Row{r}
	}
	var rt, fl []float64
	var lines int
	for i := -5; i < s.Lists; i++ {
		start := time.Now()
		sc, err := e.Client.Screen(ctx, id, 0)
		d := time.Since(start)
		if err != nil {
			r.Err = "screen: " + err.Error()
			return []*Row{r}
		}
		if len(sc.Lines) == 0 || !strings.HasPrefix(sc.Lines[0], "000000 ") {
			r.Err = fmt.Sprintf("the screen does not show the file: %q", sc.Lines)
			return []*Row{r}
		}
		lines = len(sc.Lines)
		start = time.Now()
		_, err = e.Client.Status(ctx, id)
		f := time.Since(start)
		if err != nil {
			r.Err = "status: " + err.Error()
			return []*Row{r}
		}
		if i >= 0 {
			rt, fl = append(rt, ms(d)), append(fl, ms(f))
		}
	}
	r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
	r.Notes = append(r.Notes, fmt.Sprintf("%d × GET /v1/jobs/{id}/screen of a pty job running `less` of a 5000-line file (%d rows shown), request to decoded answer; floor (informative) = GET /v1/jobs/{id} on the same connection; target (ours): p50 ≤ 5 ms", len(rt), lines))
	return []*Row{r}
}

// authTransport adds the bearer token to every request.
type authTransport struct {
	token string
	base  http.RoundTripper
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(req)
}

// mcpSession opens an MCP session on the server's /mcp with the Go SDK's
// client (Streamable HTTP, no standalone SSE stream).
func (e *Env) mcpSession(ctx context.Context) (*sdk.ClientSession, error) {
	hc := &http.Client{Transport: &authTransport{token: e.Token, base: e.HTTP.Transport}}
	ct := &sdk.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
	return sdk.NewClient(&sdk.Implementation{Name: "shellctl-bench", Version: "0"}, nil).Connect(ctx, ct, nil)
}

// mcpAnswer is the part of a tool's structured answer the bench checks.
type mcpAnswer struct {
	JobID    string `json:"job_id"`
	Status   string `json:"status"`
	Done     bool   `json:"done"`
	ExitCode *int   `json:"exit_code"`
}

func callTool(ctx context.Context, cs *sdk.ClientSession, name string, args map[string]any) (mcpAnswer, error) {
	var a mcpAnswer
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return a, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if t, ok := c.(*sdk.TextContent); ok {
				msg = append(msg, t.Text)
			}
		}
		return a, fmt.Errorf("%s answered an error: %s", name, strings.Join(msg, " "))
	}
	// The SDK has decoded the structured answer once already (into maps,
	// as any client of it gets it): its fields are read from there. (Encoding
	// it again and decoding that into a struct cost 90 µs more per
	// shell_status, a 2 KiB record: the bench's work, not MCP's.)
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		return a, fmt.Errorf("%s: structured answer is %T, not an object", name, res.StructuredContent)
	}
	a.JobID, _ = m["job_id"].(string)
	a.Status, _ = m["status"].(string)
	a.Done, _ = m["done"].(bool)
	if c, ok := m["exit_code"].(float64); ok {
		n := int(c)
		a.ExitCode = &n
	}
	return a, nil
}

func benchMCP(ctx context.Context, e *Env, s Sizes) []*Row {
	run := &Row{Figure: "MCP shell_run, over /v1 run", Unit: Millis, Target: Target{DiffAtMost, 2}}
	stat := &Row{Figure: "MCP shell_status, over /v1", Unit: Millis, Target: Target{DiffAtMost, 1}}
	fail := func(err error) []*Row {
		run.Err, stat.Err = err.Error(), err.Error()
		return []*Row{run, stat}
	}
	cs, err := e.mcpSession(ctx)
	if err != nil {
		return fail(fmt.Errorf("MCP session on %s/mcp: %w", e.URL, err))
	}
	defer cs.Close()
	var rtRun, flRun, rtStat, flStat []float64
	var last string
	for i := -5; i < s.Runs/2; i++ {
		start := time.Now()
		a, err := callTool(ctx, cs, "shell_run", map[string]any{"script": "true", "mode": "pty", "timeout_seconds": 30})
		d := time.Since(start)
		if err != nil {
			return fail(err)
		}
		if !a.Done || a.ExitCode == nil || *a.ExitCode != 0 {
			return fail(fmt.Errorf("shell_run of true answered %+v, not done with exit 0", a))
		}
		f, _, err := e.RunToDone(ctx, "pty", "true", 30)
		if err != nil {
			return fail(err)
		}
		last = a.JobID
		if i >= 0 {
			rtRun, flRun = append(rtRun, ms(d)), append(flRun, ms(f))
		}
	}
	for i := -5; i < s.Lists; i++ {
		start := time.Now()
		a, err := callTool(ctx, cs, "shell_status", map[string]any{"job_id": last})
		d := time.Since(start)
		if err != nil {
			return fail(err)
		}
		if a.JobID != last || !a.Done {
			return fail(fmt.Errorf("shell_status of %s answered %+v", last, a))
		}
		start = time.Now()
		_, err = e.Client.Status(ctx, last)
		f := time.Since(start)
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			rtStat, flStat = append(rtStat, ms(d)), append(flStat, ms(f))
		}
	}
	run.Runtime, run.Floor = Summarize(rtRun), Summarize(flRun)
	stat.Runtime, stat.Floor = Summarize(rtStat), Summarize(flStat)
	run.Notes = append(run.Notes, fmt.Sprintf("%d × tools/call shell_run of `true` (pty) through POST /mcp with the Go SDK's client (one session, Streamable HTTP) until it answers done, vs POST /v1/jobs/run of the same to done, interleaved; ratio column = p50 difference; target (ours): ≤ +2 ms", len(rtRun)))
	stat.Notes = append(stat.Notes, fmt.Sprintf("%d × tools/call shell_status of a finished job vs GET /v1/jobs/{id}, interleaved; target (ours): ≤ +1 ms", len(rtStat)))
	return []*Row{run, stat}
}
