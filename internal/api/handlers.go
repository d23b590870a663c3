package api

import (
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/store"
	"github.com/shellctl/shellctl/internal/wire"
)

// Defaults and caps of the request fields (http-api.md).
const (
	defaultRunTimeout   = 30 * time.Second
	defaultInputTimeout = 30 * time.Second
	maxTimeout          = 600 * time.Second
	defaultOutputLimit  = 16384
	maxOutputLimit      = 524288
	defaultIdleFlush    = 500 * time.Millisecond
	maxIdleFlush        = 30 * time.Second
	defaultCols         = 200
	defaultRows         = 50
	maxTerminalSide     = 4096
	maxSessionID        = 128
	defaultListLimit    = 50
	maxListLimit        = 200
	defaultGrace        = 10 * time.Second
	maxGrace            = 300 * time.Second
)

func validation(w http.ResponseWriter, format string, args ...any) {
	httperr.Write(w, http.StatusUnprocessableEntity, "validation_error", fmt.Sprintf(format, args...))
}

// seconds converts a number of seconds to a duration. It saturates instead
// of overflowing (1e300 is a very long time, not a negative one) and maps
// NaN to 0; callers refuse NaN before they look at the duration.
func seconds(f float64) time.Duration {
	const limit = 1 << 33 // seconds: 272 years, well inside a Duration
	switch {
	case math.IsNaN(f):
		return 0
	case f >= limit:
		return math.MaxInt64
	case f <= -limit:
		return math.MinInt64
	}
	return time.Duration(f * float64(time.Second))
}

// capSeconds converts a number of seconds already known to be finite,
// capped at max before the conversion (a huge value would overflow).
func capSeconds(f float64, max time.Duration) time.Duration {
	if f >= max.Seconds() {
		return max
	}
	return seconds(f)
}

// waitFields are the fields shared by run, wait and input.
type waitFields struct {
	Offset      *int64   `json:"offset"`
	Timeout     *float64 `json:"timeout"`
	OutputLimit *int64   `json:"output_limit"`
	IdleFlush   *float64 `json:"idle_flush_seconds"`
	// ReturnOnInputWait (extended API §4): answer as soon as a pty job
	// waits for input. No effect on stdio jobs, which have no terminal.
	ReturnOnInputWait *bool `json:"return_on_input_wait"`
}

// params fills the defaults of a wait. defTimeout applies when timeout is
// absent; a timeout ≤ 0 means negZero: 0 for wait (look once), the default
// for run.
func (f *waitFields) params(defTimeout time.Duration, nonPositiveIsDefault bool) jobs.WaitParams {
	p := jobs.WaitParams{Timeout: defTimeout, Limit: defaultOutputLimit, Idle: defaultIdleFlush}
	if f.Offset != nil {
		p.Offset = *f.Offset
	}
	if f.Timeout != nil {
		switch t := capSeconds(*f.Timeout, maxTimeout); {
		case t <= 0 && nonPositiveIsDefault:
		case t <= 0:
			p.Timeout = 0
		default:
			p.Timeout = t
		}
	}
	if f.OutputLimit != nil && *f.OutputLimit > 0 {
		p.Limit = int(min(*f.OutputLimit, maxOutputLimit))
	}
	// A value too small for a nanosecond takes the default too.
	if f.IdleFlush != nil && *f.IdleFlush > 0 && capSeconds(*f.IdleFlush, maxIdleFlush) > 0 {
		p.Idle = capSeconds(*f.IdleFlush, maxIdleFlush)
	}
	p.ReturnOnInputWait = f.ReturnOnInputWait != nil && *f.ReturnOnInputWait
	return p
}

func (f *waitFields) checkOffset(w http.ResponseWriter) bool {
	if f.Offset != nil && *f.Offset < 0 {
		httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("offset %d is negative", *f.Offset))
		return false
	}
	return true
}

type runBody struct {
	Mode     string            `json:"mode"`
	Cwd      *string           `json:"cwd"`
	Env      map[string]string `json:"env"`
	Terminal *struct {
		Cols *int `json:"cols"`
		Rows *int `json:"rows"`
	} `json:"terminal"`
	SessionID *string `json:"session_id"`
	Stdin     *string `json:"stdin"` // pipes.go
	// SandboxID is Dify's other name for session_id (egress.md).
	SandboxID *string `json:"sandbox_id"`
	waitFields
	script    int // bigAbsent, bigString, bigNull
	scriptLen int64
}

func (b *runBody) setBig(_ string, state int, n int64) { b.script, b.scriptLen = state, n }

func (b *inputBody) setBig(key string, state int, _ int64) {
	if key == "base64" {
		b.base64 = state
	} else {
		b.text = state
	}
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b runBody
	// A small body's script is kept in memory and written with the job;
	// a large one goes to a file as it arrives.
	var script sink
	var spool *fileSink
	mem := &memSink{}
	if r.ContentLength >= 0 && r.ContentLength <= smallBody {
		script = mem
	} else {
		spool = &fileSink{create: s.Jobs.SpoolFile}
		defer spool.discard()
		script = spool
	}
	var hashed *hashSink // the script's hash, for the key's fingerprint
	if key != "" {
		hashed = newHashSink(script)
		script = hashed
	}
	release, ok := s.readBody(w, r, bodySpec{limit: s.maxRequestBytes(), bigs: []bigField{{key: "script", sink: script}}, spooled: spool != nil, restMax: maxRest, large: true}, &b)
	if !ok {
		return
	}
	release() // the script is on disk or small: nothing large is held
	if b.script != bigString || b.scriptLen == 0 {
		httperr.Write(w, http.StatusBadRequest, "invalid_request", "script is required and must not be empty")
		return
	}
	req := jobs.RunRequest{Mode: b.Mode, Env: b.Env, Cols: defaultCols, Rows: defaultRows}
	switch b.Mode {
	case "", "pty":
		req.Mode = "pty"
	case "stdio":
	default:
		validation(w, "mode %q is not one of \"pty\", \"stdio\"", b.Mode)
		return
	}
	if req.Stdin, ok = runStdin(w, b.Stdin, req.Mode); !ok {
		return
	}
	if err := isolation.ValidateEnv(b.Env); err != nil {
		validation(w, "env: %v", err)
		return
	}
	// The size is checked whatever the mode: a stdio job has no terminal
	// and ignores it, but a value out of range is a wrong request.
	if b.Terminal != nil {
		if c := b.Terminal.Cols; c != nil {
			if *c < 1 || *c > maxTerminalSide {
				validation(w, "terminal.cols %d is not within 1..%d", *c, maxTerminalSide)
				return
			}
			req.Cols = *c
		}
		if rr := b.Terminal.Rows; rr != nil {
			if *rr < 1 || *rr > maxTerminalSide {
				validation(w, "terminal.rows %d is not within 1..%d", *rr, maxTerminalSide)
				return
			}
			req.Rows = *rr
		}
	}
	if b.SessionID == nil {
		b.SessionID = b.SandboxID
	}
	if b.SessionID != nil {
		if !validSessionID(*b.SessionID) {
			validation(w, "session_id %q must be at most %d characters of A-Z a-z 0-9 _ -", *b.SessionID, maxSessionID)
			return
		}
		req.SessionID = *b.SessionID
	}
	if b.Cwd != nil && *b.Cwd != "" {
		c := *b.Cwd
		if !filepath.IsAbs(c) {
			// Not filepath.Join, which folds ".." away by name: the
			// job service resolves it beneath Home, so "../etc" is
			// refused as leaving Home rather than taken as /etc.
			c = s.Home + "/" + c
		}
		req.Cwd = c
	}
	if spool != nil {
		path, err := spool.finish()
		if err != nil {
			s.writeErr(w, err)
			return
		}
		req.ScriptPath = path
	} else {
		req.Script = string(mem.b)
	}
	b.Offset = nil // run always waits from offset 0
	ri := reqInfoFrom(r.Context())
	if ri != nil {
		req.ReceivedAt = ri.Start
	}
	var res *jobs.Result
	var err error
	if key != "" {
		req.IdempotencyKey = key
		req.IdempotencyFP = jobs.RunPrint{ScriptSHA256: hashed.sum(), Mode: req.Mode, Cwd: req.Cwd, Env: req.Env,
			Cols: req.Cols, Rows: req.Rows, SessionID: req.SessionID, Stdin: req.Stdin}.Fingerprint()
		var replayed bool
		res, replayed, err = s.Jobs.RunIdempotent(r.Context(), req, b.params(defaultRunTimeout, true))
		if replayed {
			w.Header().Set(ReplayHeader, "true")
		}
	} else {
		res, err = s.Jobs.Run(r.Context(), req, b.params(defaultRunTimeout, true))
	}
	if err != nil {
		s.writeKeyErr(w, err)
		return
	}
	if ri != nil {
		ri.Job = res.JobID
	}
	w.Header().Set(JobIDHeader, res.JobID)
	writeResult(w, res)
}

func validSessionID(id string) bool {
	if len(id) > maxSessionID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request, id string) {
	var b waitFields
	if !s.readSmall(w, r, &b) || !b.checkOffset(w) {
		return
	}
	res, err := s.Jobs.Wait(r.Context(), id, b.params(0, false))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeResult(w, res)
}

type inputBody struct {
	waitFields
	// pipes.go: eof closes a stdin pipe after the input.
	EOF          *bool    `json:"eof"`
	WriteTimeout *float64 `json:"write_timeout"`
	text         int      // bigAbsent, bigString, bigNull
	// base64: the input as base64 instead of text (pipes.go), decoded
	// into its sink as text is (bigAbsent, bigString, bigNull).
	base64 int
}

func (s *Server) input(w http.ResponseWriter, r *http.Request, id string) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b inputBody
	hint := min(r.ContentLength, s.maxRequestBytes())
	text := &memSink{max: int(s.maxRequestBytes()), hint: hint}
	// A base64 input is read as text is, as it arrives, and decoded as
	// it is read (b64sink.go): only its bytes are held.
	b64 := &b64Sink{hint: hint}
	release, ok := s.readBody(w, r, bodySpec{limit: s.maxRequestBytes(), bigs: []bigField{{key: "text", sink: text}, {key: "base64", sink: b64}}, restMax: maxRest, large: true}, &b)
	if !ok {
		return
	}
	defer release() // the text is held until it is sent (release is idempotent)
	if !b.checkOffset(w) {
		return
	}
	data, ok := inputBytes(w, &b, text.b, b64)
	if !ok {
		return
	}
	eof := b.EOF != nil && *b.EOF
	wp := b.params(defaultInputTimeout, false)
	if b.WriteTimeout != nil {
		t := max(capSeconds(*b.WriteTimeout, maxTimeout), 0)
		wp.WriteTimeout = &t
	}
	sent := func() {
		text.b = nil
		release()
	}
	var res *jobs.Result
	var err error
	if key != "" {
		var replayed bool
		res, replayed, err = s.Jobs.InputIdempotent(r.Context(), id, key, data, eof, wp, sent)
		if replayed {
			w.Header().Set(ReplayHeader, "true")
		}
	} else {
		res, err = s.Jobs.Input(r.Context(), id, data, eof, wp, sent)
	}
	if err != nil {
		if writeBackpressure(w, err) {
			return
		}
		s.writeKeyErr(w, err)
		return
	}
	writeResult(w, res)
}

func (s *Server) tail(w http.ResponseWriter, r *http.Request, id string) {
	limit := defaultOutputLimit
	if n, err := strconv.Atoi(r.URL.Query().Get("output_limit")); err == nil && n > 0 {
		limit = min(n, maxOutputLimit)
	}
	res, err := s.Jobs.Tail(r.Context(), id, limit)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeResult(w, res)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, id string) {
	v, err := s.Jobs.Status(r.Context(), id)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, statusJSON(v))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	limit := defaultListLimit
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		limit = min(n, maxListLimit)
	}
	if status != "" && !store.ValidStatus(status) {
		// No job is ever in a state that does not exist: the original
		// answers an empty list, and so do we.
		httperr.WriteJSON(w, http.StatusOK, wire.JobList{Jobs: []wire.JobInfo{}})
		return
	}
	rows, err := s.Jobs.List(r.Context(), status, limit)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := wire.JobList{Jobs: make([]wire.JobInfo, 0, len(rows))}
	for _, j := range rows {
		out.Jobs = append(out.Jobs, wire.JobInfo{JobID: j.ID, Status: j.Status, CreatedAt: apiTime(j.CreatedAt), StartedAt: optTime(j.StartedAt), EndedAt: optTime(j.EndedAt)})
	}
	httperr.WriteJSON(w, http.StatusOK, out)
}

type terminateBody struct {
	Grace *float64 `json:"grace_seconds"`
}

func graceOf(w http.ResponseWriter, g *float64) (time.Duration, bool) {
	if g == nil {
		return defaultGrace, true
	}
	if math.IsNaN(*g) || math.IsInf(*g, 0) || *g < 0 || *g > maxGrace.Seconds() {
		validation(w, "grace_seconds %v is not within 0..%d: give a finite number of seconds", *g, int(maxGrace.Seconds()))
		return 0, false
	}
	return seconds(*g), true
}

func (s *Server) terminate(w http.ResponseWriter, r *http.Request, id string) {
	// A body that does not parse is ignored, as the original does: the
	// job is ended with the default grace.
	var b terminateBody
	if !s.readSmallOrNothing(w, r, &b) {
		return
	}
	grace, ok := graceOf(w, b.Grace)
	if !ok {
		return
	}
	v, err := s.Jobs.Terminate(r.Context(), id, grace)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, statusJSON(v))
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	var g *float64
	if raw := q.Get("grace_seconds"); raw != "" {
		// ParseFloat takes "NaN" and "Inf": graceOf refuses them.
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			validation(w, "grace_seconds %q is not a number of seconds", raw)
			return
		}
		g = &f
	}
	grace, ok := graceOf(w, g)
	if !ok {
		return
	}
	if err := s.Jobs.Delete(r.Context(), id, q.Get("force") == "true", grace); err != nil {
		s.writeErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, wire.Deleted{JobID: id, Deleted: true})
}
