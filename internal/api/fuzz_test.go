package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/store"
)

// The request-decoding fuzz target sends arbitrary bodies to every route
// that decodes one, through the real handler and a real jobs service, and
// holds the answer against the rules of http-api.md:
//
//   - never a panic, never a 5xx, always the error envelope;
//   - a body the spec refuses gets one of the statuses the spec names for
//     what is wrong with it (400, 413, 422), and never reaches the service;
//   - a body the spec accepts reaches the service, and the wait parameters
//     decoded from it are within the caps (timeout 0..600 s, output_limit
//     1..524288, idle_flush_seconds in (0, 30 s]) with the spec's defaults.
//
// The service can never start a job: its --workspace-root does not exist, so
// a run that passes validation is answered 403 cwd_not_allowed (or 400
// invalid_cwd for a cwd that does not exist), and a wait, input, terminate
// or delete of the (unknown) job 404 job_not_found. Those codes are how the
// test sees that the handler handed the request on.

const fuzzJobID = "0123456789abcdef"

type fuzzRoute struct {
	name    string
	method  string
	path    string
	limit   int64    // body limit of the route
	reached []string // codes that mean the service was called
}

var fuzzRoutes = []fuzzRoute{
	{"run", http.MethodPost, "/v1/jobs/run", DefaultMaxRequestBytes, []string{"invalid_cwd", "cwd_not_allowed"}},
	{"wait", http.MethodPost, "/v1/jobs/" + fuzzJobID + "/wait", maxOtherBody, []string{"job_not_found"}},
	{"input", http.MethodPost, "/v1/jobs/" + fuzzJobID + "/input", DefaultMaxRequestBytes, []string{"job_not_found"}},
	{"terminate", http.MethodPost, "/v1/jobs/" + fuzzJobID + "/terminate", maxOtherBody, []string{"job_not_found"}},
	// delete: the fuzz bytes are the grace_seconds query value.
	{"delete", http.MethodDelete, "/v1/jobs/" + fuzzJobID, 0, []string{"job_not_found"}},
}

// newFuzzServer is a Server over a real jobs service that refuses every
// cwd (see above).
func newFuzzServer(tb testing.TB) *Server {
	tb.Helper()
	dir := tb.TempDir()
	home := filepath.Join(dir, "home")
	state := filepath.Join(dir, "state")
	for _, d := range []string{home, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, state)
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := jobs.New(ctx, jobs.Config{
		StateDir:      state,
		RunnerPath:    filepath.Join(dir, "no-runner"),
		Home:          home,
		WorkspaceRoot: filepath.Join(dir, "no-such-root"),
	}, st)
	if err != nil {
		st.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Close(); st.Close() })
	return &Server{Jobs: svc, Home: home}
}

// fault is one thing the spec says is wrong with a request, and the status
// it is answered with.
type fault struct {
	status int
	what   string
}

type faults []fault

func (fs *faults) add(status int, format string, args ...any) {
	*fs = append(*fs, fault{status, fmt.Sprintf(format, args...)})
}

func (fs faults) allows(status int) bool {
	for _, f := range fs {
		if f.status == status {
			return true
		}
	}
	return false
}

// absent: a field not in the body, or null (which the spec treats alike).
func absent(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || string(r) == "null"
}

// as decodes a present field into v, recording a 400 when its JSON type is
// wrong. It reports whether v holds the field's value.
func as(fs *faults, name string, raw json.RawMessage, v any) bool {
	if absent(raw) {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		// A number too large for a float (1e400) is an infinity: 422,
		// as NaN and Infinity are, wherever a number is read.
		r := bytes.TrimSpace(raw)
		if len(r) > 0 && (r[0] == '-' || r[0] >= '0' && r[0] <= '9') && oracleOutOfRange(raw, v) {
			fs.add(http.StatusUnprocessableEntity, "%s is not a finite number: %s", name, raw)
			return false
		}
		fs.add(http.StatusBadRequest, "%s has the wrong type: %s", name, raw)
		return false
	}
	return true
}

// specWait holds the wait fields as the spec describes them.
type specWait struct {
	Offset      json.RawMessage `json:"offset"`
	Timeout     json.RawMessage `json:"timeout"`
	OutputLimit json.RawMessage `json:"output_limit"`
	IdleFlush   json.RawMessage `json:"idle_flush_seconds"`
}

func (w *specWait) check(fs *faults, checkOffset bool) {
	var off int64
	if as(fs, "offset", w.Offset, &off) && checkOffset && off < 0 {
		fs.add(http.StatusBadRequest, "offset %d < 0", off)
	}
	var x float64
	as(fs, "timeout", w.Timeout, &x)
	as(fs, "idle_flush_seconds", w.IdleFlush, &x)
	var n int64
	as(fs, "output_limit", w.OutputLimit, &n)
}

// specFaults lists what the spec finds wrong with body on route r.
func specFaults(r fuzzRoute, body []byte) faults {
	var fs faults
	if r.name == "delete" {
		q := string(body)
		if q == "" {
			return nil
		}
		g, err := strconv.ParseFloat(q, 64)
		if err != nil || math.IsNaN(g) || g < 0 || g > maxGrace.Seconds() {
			fs.add(http.StatusUnprocessableEntity, "grace_seconds %q is not a number in 0..300", q)
		}
		return fs
	}
	if int64(len(body)) > r.limit {
		fs.add(http.StatusRequestEntityTooLarge, "body of %d bytes", len(body))
		return fs
	}
	obj := bytes.Trim(body, " \t\r\n") // JSON's whitespace
	if len(obj) == 0 {
		obj = []byte("{}")
	}
	if obj[0] != '{' || !json.Valid(obj) {
		if r.name == "terminate" {
			// Ignored, as the original does: the default grace.
			return nil
		}
		fs.add(http.StatusBadRequest, "not a JSON object")
		return fs
	}
	switch r.name {
	case "run":
		var b struct {
			Script    json.RawMessage `json:"script"`
			Mode      json.RawMessage `json:"mode"`
			Cwd       json.RawMessage `json:"cwd"`
			Env       json.RawMessage `json:"env"`
			Terminal  json.RawMessage `json:"terminal"`
			SessionID json.RawMessage `json:"session_id"`
			specWait
		}
		if err := json.Unmarshal(obj, &b); err != nil {
			fs.add(http.StatusBadRequest, "undecodable: %v", err)
			return fs
		}
		var script string
		if !as(&fs, "script", b.Script, &script) || script == "" {
			fs.add(http.StatusBadRequest, "script missing or empty")
		} else if len(script) > DefaultMaxRequestBytes {
			fs.add(http.StatusRequestEntityTooLarge, "script of %d bytes", len(script))
		}
		mode := ""
		if as(&fs, "mode", b.Mode, &mode) && mode != "" && mode != "pty" && mode != "stdio" {
			fs.add(http.StatusUnprocessableEntity, "mode %q", mode)
		}
		var cwd string
		as(&fs, "cwd", b.Cwd, &cwd)
		var env map[string]*string
		if as(&fs, "env", b.Env, &env) {
			for k, v := range env {
				if k == "" || strings.ContainsAny(k, "=\x00") || (v != nil && strings.ContainsRune(*v, 0)) {
					fs.add(http.StatusUnprocessableEntity, "env entry %q", k)
				}
			}
		}
		var term struct {
			Cols json.RawMessage `json:"cols"`
			Rows json.RawMessage `json:"rows"`
		}
		if as(&fs, "terminal", b.Terminal, &term) {
			for name, raw := range map[string]json.RawMessage{"cols": term.Cols, "rows": term.Rows} {
				var n int
				if as(&fs, "terminal."+name, raw, &n) && (n < 1 || n > maxTerminalSide) {
					fs.add(http.StatusUnprocessableEntity, "terminal.%s %d", name, n)
				}
			}
		}
		var sid string
		if as(&fs, "session_id", b.SessionID, &sid) && !specSessionID(sid) {
			fs.add(http.StatusUnprocessableEntity, "session_id %q", sid)
		}
		b.specWait.check(&fs, false) // run always reads from offset 0
	case "wait", "input":
		var b struct {
			Text json.RawMessage `json:"text"`
			specWait
		}
		if err := json.Unmarshal(obj, &b); err != nil {
			fs.add(http.StatusBadRequest, "undecodable: %v", err)
			return fs
		}
		b.specWait.check(&fs, true)
		if r.name == "input" {
			var text string
			if !as(&fs, "text", b.Text, &text) {
				fs.add(http.StatusBadRequest, "text missing")
			} else if len(text) > DefaultMaxRequestBytes {
				fs.add(http.StatusRequestEntityTooLarge, "text of %d bytes", len(text))
			}
		}
	case "terminate":
		var b struct {
			Grace json.RawMessage `json:"grace_seconds"`
		}
		if err := json.Unmarshal(obj, &b); err != nil {
			fs.add(http.StatusBadRequest, "undecodable: %v", err)
			return fs
		}
		var g float64
		if as(&fs, "grace_seconds", b.Grace, &g) && (g < 0 || g > maxGrace.Seconds()) {
			fs.add(http.StatusUnprocessableEntity, "grace_seconds %v", g)
		}
	}
	return fs
}

// specSessionID: at most 128 characters of [A-Za-z0-9_-].
func specSessionID(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// duplicateKeys reports whether some object in the JSON text names a key
// twice (compared without case, as encoding/json matches names). What a
// duplicate means is left open by JSON, and encoding/json merges repeated
// objects, so such bodies are only held to the no-5xx rule.
func duplicateKeys(obj []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(obj))
	type frame struct {
		object bool
		keys   []string
		wantK  bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantK {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantK = true
				}
				continue
			}
			k := tok.(string)
			for _, seen := range top.keys {
				if strings.EqualFold(seen, k) {
					return true
				}
			}
			top.keys = append(top.keys, k)
			top.wantK = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantK: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing object wants its next key.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantK = true
		}
	}
}

// checkWaitParams holds the wait parameters the handler derives from body
// to the spec's defaults and caps.
func checkWaitParams(t *testing.T, route string, body []byte) {
	t.Helper()
	if route != "run" && route != "wait" && route != "input" {
		return
	}
	var w waitFields
	obj := bytes.Trim(body, " \t\r\n")
	if len(obj) == 0 {
		obj = []byte("{}")
	}
	if err := json.Unmarshal(obj, &w); err != nil {
		t.Fatalf("the handler accepted a body its own fields do not decode: %v", err)
	}
	var p jobs.WaitParams
	var defTimeout, nonPosTimeout time.Duration
	switch route {
	case "run":
		p = w.params(defaultRunTimeout, true)
		defTimeout, nonPosTimeout = defaultRunTimeout, defaultRunTimeout
	case "wait":
		p = w.params(0, false)
	case "input":
		p = w.params(defaultInputTimeout, false)
		defTimeout = defaultInputTimeout
	default:
		return
	}
	near := func(got time.Duration, secs float64) bool {
		return math.Abs(got.Seconds()-secs) <= 1e-9*math.Max(1, secs)
	}
	switch x := w.Timeout; {
	case p.Timeout < 0 || p.Timeout > maxTimeout:
		t.Fatalf("timeout %v decoded as %v: outside 0..%v", deref(x), p.Timeout, maxTimeout)
	case x == nil:
		if p.Timeout != defTimeout {
			t.Fatalf("no timeout: %v, want the default %v", p.Timeout, defTimeout)
		}
	case *x <= 0:
		if p.Timeout != nonPosTimeout {
			t.Fatalf("timeout %v: %v, want %v", *x, p.Timeout, nonPosTimeout)
		}
	case *x >= maxTimeout.Seconds():
		if p.Timeout != maxTimeout {
			t.Fatalf("timeout %v: %v, want the cap %v", *x, p.Timeout, maxTimeout)
		}
	default:
		// A positive timeout too small for a nanosecond may read as 0 or
		// as the default for ≤ 0.
		if !near(p.Timeout, *x) && p.Timeout != nonPosTimeout {
			t.Fatalf("timeout %v: %v", *x, p.Timeout)
		}
	}
	switch x := w.OutputLimit; {
	case x == nil || *x <= 0:
		if p.Limit != defaultOutputLimit {
			t.Fatalf("output_limit %v: %d, want the default", deref(x), p.Limit)
		}
	case *x >= maxOutputLimit:
		if p.Limit != maxOutputLimit {
			t.Fatalf("output_limit %d: %d, want the cap", *x, p.Limit)
		}
	case int64(p.Limit) != *x:
		t.Fatalf("output_limit %d: %d", *x, p.Limit)
	}
	switch x := w.IdleFlush; {
	case p.Idle <= 0 || p.Idle > maxIdleFlush:
		t.Fatalf("idle_flush_seconds %v decoded as %v: outside (0, %v]", deref(x), p.Idle, maxIdleFlush)
	case x == nil || *x <= 0:
		if p.Idle != defaultIdleFlush {
			t.Fatalf("idle_flush_seconds %v: %v, want the default", deref(x), p.Idle)
		}
	case *x >= maxIdleFlush.Seconds():
		if p.Idle != maxIdleFlush {
			t.Fatalf("idle_flush_seconds %v: %v, want the cap", *x, p.Idle)
		}
	default:
		if !near(p.Idle, *x) && p.Idle != defaultIdleFlush {
			t.Fatalf("idle_flush_seconds %v: %v", *x, p.Idle)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// serve sends body on route r and returns the status and error code.
func serve(t *testing.T, s *Server, r fuzzRoute, body []byte) (int, string) {
	t.Helper()
	var req *http.Request
	if r.name == "delete" {
		q := url.Values{"force": {"true"}, "grace_seconds": {string(body)}}
		req = httptest.NewRequest(r.method, r.path+"?"+q.Encode(), nil)
	} else {
		req = httptest.NewRequest(r.method, r.path, bytes.NewReader(body))
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("%s: answer %d is not the error envelope: %q", r.name, rec.Code, rec.Body.Bytes())
	}
	if rec.Code < 400 || rec.Code > 499 {
		t.Fatalf("%s %q: answered %d %s (%s), want a 4xx", r.name, body, rec.Code, env.Error.Code, env.Error.Message)
	}
	return rec.Code, env.Error.Code
}

func FuzzRequestDecoding(f *testing.F) {
	s := newFuzzServer(f)
	for i := range fuzzRoutes {
		f.Add(uint8(i), []byte(`{}`))
	}
	f.Add(uint8(0), []byte(`{"script":"echo hi","mode":"pty","terminal":{"cols":80,"rows":24},"timeout":1e300}`))
	f.Add(uint8(3), []byte(`{"grace_seconds":1e300}`))
	f.Add(uint8(4), []byte(`NaN`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		status, code := serve(t, s, r, body)
		reached := false
		for _, c := range r.reached {
			reached = reached || c == code
		}
		if r.name != "delete" && duplicateKeys(bytes.Trim(body, " \t\r\n")) {
			return
		}
		fs := specFaults(r, body)
		switch {
		case len(fs) == 0 && !reached:
			t.Fatalf("%s %q: the spec accepts it, the handler answered %d %s", r.name, body, status, code)
		case len(fs) > 0 && reached:
			t.Fatalf("%s %q: the spec refuses it (%v), the handler passed it on (%d %s)", r.name, body, fs, status, code)
		case len(fs) > 0 && !fs.allows(status):
			t.Fatalf("%s %q: answered %d %s, the spec says %v", r.name, body, status, code, fs)
		}
		if reached {
			checkWaitParams(t, r.name, body)
		}
	})
}

// oracleOutOfRange reports whether raw, a number literal, does not fit v's
// numeric kind (a float overflowing to infinity, an integer past int64).
func oracleOutOfRange(raw json.RawMessage, v any) bool {
	lit := string(bytes.TrimSpace(raw))
	switch v.(type) {
	case *float64:
		_, err := strconv.ParseFloat(lit, 64)
		return errors.Is(err, strconv.ErrRange)
	case *int, *int64:
		_, err := strconv.ParseInt(lit, 10, 64)
		return errors.Is(err, strconv.ErrRange)
	}
	return false
}
