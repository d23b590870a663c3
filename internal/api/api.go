// Package api is the HTTP side of shellctl serve: routes, decoding and
// validation, the error envelope and auth. It knows nothing of processes:
// every decision is the jobs service's.
package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/metrics"
	"github.com/shellctl/shellctl/internal/reqctx"
)

// Snapshotter serves the snapshot routes (internal/snapshot).
type Snapshotter interface {
	HandleSave(http.ResponseWriter, *http.Request)
	HandleRestore(http.ResponseWriter, *http.Request)
}

// Server is the HTTP handler of shellctl serve.
type Server struct {
	Jobs     *jobs.Service
	Snapshot Snapshotter // nil: the routes answer 404
	Token    string      // "" = no auth
	Home     string      // the server's $HOME: a relative cwd is resolved against it
	Limits   Limits
	Logger   *slog.Logger
	// Metrics counts the requests and serves GET /metrics (nil: the route
	// answers 404).
	Metrics *metrics.Metrics
	// Info answers GET /v1/info (nil: 404).
	Info func(context.Context) (any, error)
	// MCP serves /mcp, the MCP Streamable HTTP transport (nil: 404).
	MCP http.Handler
	// Egress is the credential proxy's session tier (prepare.go; nil:
	// off, PUT /v1/prepare answers 409).
	Egress Egress
	// Files serves /v1/files/* (internal/files; nil: 404).
	Files http.Handler

	budgetOnce sync.Once
	sem        *semaphore.Weighted
	inFlight   atomic.Int64 // bytes reserved by large bodies
	streams    streamStop   // closed at shutdown (stream.go)

	muxOnce sync.Once
	mux     *http.ServeMux // routes(), made on the first request
}

// ServeHTTP routes one request.
//
// Every request gets an id (X-Request-Id: the client's when sane, else a
// new one), sent back in the answer and logged with its route, status and
// duration; it is counted in the HTTP metrics by route pattern and code.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ri := &reqctx.Info{ID: requestID(r.Header.Get(RequestIDHeader)), Start: time.Now()}
	w.Header().Set(RequestIDHeader, ri.ID)
	r = r.WithContext(reqctx.With(r.Context(), ri))
	sw := &statusWriter{ResponseWriter: w}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		sw.body = &bodyWatch{ReadCloser: r.Body}
		r.Body = sw.body
	}
	// Deferred: a snapshot save that must cut its connection panics
	// with http.ErrAbortHandler, and is still logged and counted.
	defer s.done(sw, r, ri)
	s.route(sw, r)
}

// done logs and counts one answered request.
func (s *Server) done(sw *statusWriter, r *http.Request, ri *reqctx.Info) {
	d := time.Since(ri.Start)
	route, job := routeLabel(r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.Metrics.Request(route, r.Method, status, d)
	if s.Logger == nil {
		return
	}
	if ri.Job != "" {
		job = ri.Job
	}
	attrs := []any{"request_id", ri.ID, "method", r.Method, "route", route, "status", status, "duration_ms", float64(d.Microseconds()) / 1000}
	if job != "" {
		attrs = append(attrs, "job", job)
	}
	s.Logger.Info("request", attrs...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	body   *bodyWatch // nil: the request has no body
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.closeIfUnread()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.closeIfUnread()
	}
	return w.ResponseWriter.Write(b)
}

// closeIfUnread ends the connection after an answer given before the
// request's body was read to its end (an error, a 401). Otherwise
// net/http would read up to 256 KiB of the rest first, to reuse the
// connection: at a slow client's pace, with no deadline.
func (w *statusWriter) closeIfUnread() {
	if w.body != nil && !w.body.eof.Load() {
		w.Header().Set("Connection", "close")
	}
}

// Unwrap lets http.ResponseController reach the connection (snapshot
// deadlines, flushing).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Authorized reports whether r carries the token (always, when none is
// configured).
func (s *Server) Authorized(r *http.Request) bool {
	if s.Token == "" {
		return true
	}
	got := r.Header.Get("Authorization")
	want := "Bearer " + s.Token
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// route serves r by the router's table (routes).
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	s.muxOnce.Do(func() { s.mux = s.routes() })
	s.mux.ServeHTTP(w, r)
}

// Patterns of the two catch-alls: a path no route serves. They are not a
// route's label (see routeLabel).
const (
	patternAny = "/"
	patternV1  = "/v1/"
)

// routes is the table of every route: path patterns without methods (each
// handler checks its method, so a wrong one is the envelope's 405, not
// the mux's plain text), each behind the token but /healthz and paths no
// route serves. The mux sets the request's Pattern, which labels the
// HTTP metrics and the request log (routeLabel): no second table to keep.
func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	open := func(pattern string, h http.HandlerFunc) { m.Handle(pattern, h) }
	authed := func(pattern string, h http.HandlerFunc) {
		m.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.Authorized(r) {
				httperr.Write(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
				return
			}
			h(w, r)
		}))
	}
	// byID checks the method and the job id, then serves.
	byID := func(method string, h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method {
				methodNotAllowed(w, r, method)
				return
			}
			if id := r.PathValue("id"); s.checkID(w, id) {
				h(w, r, id)
			}
		}
	}
	only := func(h http.HandlerFunc, methods ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for _, want := range methods {
				if r.Method == want || (want == http.MethodGet && r.Method == http.MethodHead) {
					h(w, r)
					return
				}
			}
			methodNotAllowed(w, r, strings.Join(methods, ", "))
		}
	}

	open(patternAny, notFound)
	open("/healthz", only(func(w http.ResponseWriter, _ *http.Request) {
		httperr.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}, http.MethodGet))
	authed(patternV1, notFound)
	authed("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if s.MCP == nil {
			notFound(w, r)
			return
		}
		s.MCP.ServeHTTP(w, r)
	})
	authed("/metrics", only(func(w http.ResponseWriter, r *http.Request) {
		if s.Metrics == nil {
			notFound(w, r)
			return
		}
		s.Metrics.Handler().ServeHTTP(w, r)
	}, http.MethodGet))
	authed("/v1/info", only(func(w http.ResponseWriter, r *http.Request) {
		if s.Info == nil {
			notFound(w, r)
			return
		}
		v, err := s.Info(r.Context())
		if err != nil {
			s.writeErr(w, err)
			return
		}
		httperr.WriteJSON(w, http.StatusOK, v)
	}, http.MethodGet))
	authed("/v1/openapi.json", only(s.openapi, http.MethodGet))
	snap := func(save bool) http.HandlerFunc {
		return only(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case s.Snapshot == nil:
				notFound(w, r)
			case save:
				s.Snapshot.HandleSave(w, r)
			default:
				s.Snapshot.HandleRestore(w, r)
			}
		}, http.MethodPost)
	}
	authed("/v1/snapshot/save", snap(true))
	authed("/v1/snapshot/restore", snap(false))
	authed("/v1/jobs", only(s.list, http.MethodGet))
	authed("/v1/jobs/run", only(s.run, http.MethodPost))
	authed("/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			byID(http.MethodGet, s.status)(w, r)
		case http.MethodDelete:
			byID(http.MethodDelete, s.delete)(w, r)
		default:
			methodNotAllowed(w, r, "GET, DELETE")
		}
	})
	authed("/v1/jobs/{id}/wait", byID(http.MethodPost, s.wait))
	authed("/v1/jobs/{id}/input", byID(http.MethodPost, s.input))
	authed("/v1/jobs/{id}/terminate", byID(http.MethodPost, s.terminate))
	authed("/v1/jobs/{id}/record", byID(http.MethodGet, s.record))
	authed("/v1/jobs/{id}/stderr", byID(http.MethodGet, s.stderr))
	authed("/v1/jobs/{id}/signal", byID(http.MethodPost, s.signal))
	authed("/v1/jobs/{id}/resize", byID(http.MethodPost, s.resize))
	authed("/v1/jobs/{id}/stream", byID(http.MethodGet, s.stream))
	authed("/v1/jobs/{id}/screen", byID(http.MethodGet, s.screen))
	authed("/v1/jobs/{id}/keys", byID(http.MethodPost, s.keys))
	authed("/v1/jobs/{id}/log/tail", byID(http.MethodGet, s.tail))
	// The egress proxy's session tier (prepare.go).
	authed("/v1/prepare", only(s.prepare, http.MethodPut))
	authed("/v1/prepare/{session_id}", only(s.unprepare, http.MethodDelete))
	s.fileRoutes(authed)
	// attach checks its own token: a browser's WebSocket cannot send the
	// header, and offers it as a subprotocol entry instead (attach.go).
	open("/v1/jobs/{id}/attach", s.attachRoute)
	return m
}

// routeLabel is what the metrics and the request log call r's route:
// the pattern the router matched ("/v1/jobs/{id}/wait"), "unmatched" for
// a path no route serves; and the job id in the path, when it is one.
func routeLabel(r *http.Request) (route, job string) {
	switch r.Pattern {
	case "", patternAny, patternV1:
		return "unmatched", ""
	}
	if id := r.PathValue("id"); jobs.ValidID(id) {
		job = id
	}
	return r.Pattern, job
}

// checkID answers for an id that is not one of ours without touching the
// disk or the database: 404 job_not_found for one that could be a job id
// (letters, digits, '-' and '_'), 400 invalid_job_id for one that cannot
// ("../../etc/passwd"), as the original does.
func (s *Server) checkID(w http.ResponseWriter, id string) bool {
	if jobs.ValidID(id) {
		return true
	}
	if !plausibleID(id) {
		httperr.Write(w, http.StatusBadRequest, "invalid_job_id", "job id "+strconv.Quote(id)+" is not a job id: a job id is 16 lowercase hex characters")
		return false
	}
	httperr.Write(w, http.StatusNotFound, "job_not_found", "job "+strconv.Quote(id)+" not found: a job id is 16 lowercase hex characters")
	return false
}

// maxPlausibleID bounds what could be a job id of some server (the
// original's ids are short tokens); longer is not an id at all.
const maxPlausibleID = 128

// plausibleID reports whether id has the shape of a job id of any server
// (ours are 16 lowercase hex characters): 1..128 ASCII letters, digits,
// '-' and '_'.
func plausibleID(id string) bool {
	if id == "" || len(id) > maxPlausibleID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func notFound(w http.ResponseWriter, r *http.Request) {
	httperr.Write(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	httperr.Write(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+allow+")")
}

// errorCodes maps the job service's error kinds to a status and a code.
var errorCodes = []struct {
	kind   error
	status int
	code   string
}{
	{jobs.ErrNotFound, http.StatusNotFound, "job_not_found"},
	{jobs.ErrNotRunning, http.StatusConflict, "job_not_running"},
	{jobs.ErrInputUnsupported, http.StatusConflict, "input_unsupported"},
	{jobs.ErrScreenUnsupported, http.StatusConflict, "screen_unsupported"},
	{jobs.ErrScreenUnavailable, http.StatusConflict, "screen_unavailable"},
	{jobs.ErrJobRunning, http.StatusConflict, "job_running"},
	{jobs.ErrInvalidOffset, http.StatusBadRequest, "invalid_offset"},
	{jobs.ErrTooManyJobs, http.StatusTooManyRequests, "too_many_jobs"},
	{jobs.ErrInvalidCwd, http.StatusBadRequest, "invalid_cwd"},
	{jobs.ErrCwdNotAllowed, http.StatusForbidden, "cwd_not_allowed"},
	{jobs.ErrChannelUnsupported, http.StatusConflict, "channel_unsupported"},
	{jobs.ErrInputBackpressure, http.StatusConflict, "input_backpressure"},
	{jobs.ErrStdinClosed, http.StatusConflict, "stdin_closed"},
}

// gcNote follows the message of a job_not_found for a well-formed id: a
// finished job is removed after the retention, and a client that kept its
// id longer is told why (only the message grows; the envelope's keys stay).
func gcNote(retention time.Duration) string {
	if retention <= 0 {
		return ""
	}
	return " (finished jobs are collected " + shortDuration(retention) + " after they end: the server's --gc-retention)"
}

// shortDuration writes d as 5m, 90s or 1h30m rather than 5m0s.
func shortDuration(d time.Duration) string {
	if d < time.Second {
		return d.String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// writeErr turns a service error into its status and code; an error of no
// known kind is a 500 (and is logged).
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	for _, e := range errorCodes {
		if errors.Is(err, e.kind) {
			msg := err.Error()
			if e.kind == jobs.ErrNotFound && s.Jobs != nil {
				msg += gcNote(s.Jobs.GCRetention())
			}
			httperr.Write(w, e.status, e.code, msg)
			return
		}
	}
	if s.Logger != nil {
		s.Logger.Error("internal error", "err", err)
	}
	httperr.Write(w, http.StatusInternalServerError, "internal_error", err.Error())
}
