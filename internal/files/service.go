package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/shellctl/shellctl/internal/beneath"
	"github.com/shellctl/shellctl/internal/httperr"
)

// DefaultMaxFileBytes bounds one PUT (--max-file-bytes).
const DefaultMaxFileBytes = 1 << 30

// Config is what the file routes need from serve.
type Config struct {
	Home string // the server's $HOME: a root, and what relative paths are relative to
	// Roots are the other file roots: --workspace-root and each --file-root.
	Roots        []string
	StateDir     string
	MaxFileBytes int64 // 0: DefaultMaxFileBytes
	// BodyIdle (--body-read-timeout): a request body that sends nothing
	// this long is cut (0: no limit), so a stalled upload holds no
	// temporary file and no connection for ever.
	BodyIdle time.Duration
	Logger   *slog.Logger
}

// Service serves /v1/files/*.
type Service struct {
	cfg   Config
	roots [][]string   // each root's names (beneath.RootNames), Home first
	state []beneath.ID // the state dir and every directory above it

	watchers *semaphore.Weighted // watches open at once
	archives *semaphore.Weighted // archives streaming at once
	stop     chan struct{}       // closed by Stop: watches end
	stopOnce sync.Once
}

// Stop ends the open watches (at shutdown: clients reconnect).
func (s *Service) Stop() { s.stopOnce.Do(func() { close(s.stop) }) }

// New checks the roots and finds the state dir's identity. A root that
// does not exist is an error: a typo in --file-root should not be found
// at the first request.
func New(cfg Config) (*Service, error) {
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, watchers: semaphore.NewWeighted(maxWatchers), archives: semaphore.NewWeighted(maxArchives), stop: make(chan struct{})}
	if cfg.Home != "" && filepath.IsAbs(cfg.Home) {
		s.roots = append(s.roots, beneath.RootNames(cfg.Home))
	}
	for _, r := range cfg.Roots {
		if r == "" {
			continue
		}
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("--file-root %q: %w", r, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--file-root %q is not a directory (%v): give an existing directory", r, err)
		}
		s.roots = append(s.roots, beneath.RootNames(abs))
	}
	if cfg.StateDir != "" {
		fd, err := beneath.FSRoot()
		if err != nil {
			return nil, err
		}
		defer fd.Close()
		sd, err := beneath.OpenRoot(cfg.StateDir, nil)
		if err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
		defer sd.Close()
		if s.state, err = beneath.Chain(sd.FD); err != nil {
			return nil, fmt.Errorf("state dir %s: %w", cfg.StateDir, err)
		}
	}
	return s, nil
}

// Routes are the patterns the service serves (each labelled in the
// metrics by its own).
var Routes = []string{
	"/v1/files",
	"/v1/files/stat",
	"/v1/files/list",
	"/v1/files/content",
	"/v1/files/edit",
	"/v1/files/mkdir",
	"/v1/files/move",
	"/v1/files/archive",
	"/v1/files/watch",
}

// ServeHTTP serves one file route (the token was checked by the caller).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var err error
	switch r.URL.Path {
	case "/v1/files":
		if method(w, r, http.MethodDelete) {
			err = s.delete(w, r)
		}
	case "/v1/files/stat":
		if method(w, r, http.MethodGet) {
			err = s.stat(w, r)
		}
	case "/v1/files/list":
		if method(w, r, http.MethodGet) {
			err = s.list(w, r)
		}
	case "/v1/files/content":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			err = s.get(w, r)
		case http.MethodPut:
			err = s.put(w, r)
		default:
			notAllowed(w, r, "GET, PUT")
		}
	case "/v1/files/edit":
		if method(w, r, http.MethodPost) {
			err = s.edit(w, r)
		}
	case "/v1/files/mkdir":
		if method(w, r, http.MethodPost) {
			err = s.mkdir(w, r)
		}
	case "/v1/files/move":
		if method(w, r, http.MethodPost) {
			err = s.move(w, r)
		}
	case "/v1/files/archive":
		if method(w, r, http.MethodGet) {
			err = s.archive(w, r)
		}
	case "/v1/files/watch":
		if method(w, r, http.MethodGet) {
			err = s.watch(w, r)
		}
	default:
		httperr.Write(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
	}
	if err != nil {
		s.writeErr(w, r, err)
	}
}

func method(w http.ResponseWriter, r *http.Request, m string) bool {
	if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	notAllowed(w, r, m)
	return false
}

func notAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	httperr.Write(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+allow+")")
}

// ambiguous is edit_ambiguous's envelope: the error and how many times
// the text was found.
type ambiguous struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Count   int    `json:"count"`
	} `json:"error"`
}

func (s *Service) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var fe *Error
	if !errors.As(err, &fe) {
		s.cfg.Logger.Error("file route", "route", r.URL.Path, "err", err)
		fe = errf(http.StatusInternalServerError, "internal_error", "%v", err)
	}
	if fe.Status == http.StatusInternalServerError {
		s.cfg.Logger.Error("file route", "route", r.URL.Path, "err", fe.Msg)
	}
	if fe.Count > 0 {
		var a ambiguous
		a.Error.Code, a.Error.Message, a.Error.Count = fe.Code, fe.Msg, fe.Count
		httperr.WriteJSON(w, fe.Status, a)
		return
	}
	httperr.Write(w, fe.Status, fe.Code, fe.Msg)
}

// idleBody cuts a body that sends nothing for idle: each read pushes the
// connection's read deadline that far ahead.
type idleBody struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	return b.r.Read(p)
}

// body is r's body, cut when it stalls for BodyIdle.
func (s *Service) body(w http.ResponseWriter, r *http.Request) io.Reader {
	if s.cfg.BodyIdle <= 0 {
		return r.Body
	}
	return &idleBody{r: r.Body, rc: http.NewResponseController(w), idle: s.cfg.BodyIdle}
}

// maxJSONBody bounds the JSON bodies of edit, mkdir and move: an edit's
// texts may be as large as the file it edits.
const maxJSONBody = 2*maxEditBytes + 1<<20

// decode reads r's JSON body into v (unknown fields refused).
func decode(body io.Reader, v any) error {
	body = io.LimitReader(body, maxJSONBody+1)
	data, err := io.ReadAll(body)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errf(http.StatusRequestTimeout, "request_timeout", "the body stalled longer than the server's --body-read-timeout: send it again")
	}
	if err != nil {
		return errf(http.StatusBadRequest, "invalid_request", "read the body: %v", err)
	}
	if len(data) > maxJSONBody {
		return errf(http.StatusRequestEntityTooLarge, "too_large", "the body is over %d bytes: send a smaller edit", maxJSONBody)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errf(http.StatusBadRequest, "invalid_request", "the body is not the route's JSON object: %v", err)
	}
	return nil
}

// boolParam is a query parameter true/false, def when absent.
func boolParam(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errf(http.StatusBadRequest, "invalid_request", "%s=%q is not true or false", name, v)
	}
	return b, nil
}

// intParam is a query parameter in [lo, hi], def when absent.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errf(http.StatusBadRequest, "invalid_request", "%s=%q is not a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// modeParam is an octal mode ("0644"), def when empty.
func modeParam(name, v string, def uint32) (uint32, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, errf(http.StatusBadRequest, "invalid_request", "%s %q is not an octal mode such as 0644", name, v)
	}
	return uint32(n), nil
}

// pathParam is the required query parameter path.
func pathParam(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", errf(http.StatusBadRequest, "invalid_path", "the query parameter path is missing: give ?path= an absolute path or one relative to Home")
	}
	return p, nil
}
