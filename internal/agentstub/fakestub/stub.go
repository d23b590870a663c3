// Package fakestub is an in-memory Agent Stub for tests: the routes of
// shared/spec/agent-cli.md and shared/spec/agent-cli-backend.md (file plane,
// drive, knowledge, Home Snapshot gateway) under /agent-stub, the tokens of
// the latter (run, expired, purpose), one-time signed URLs for uploads and
// downloads, and failure modes switched per route (Fail) or by name
// (SetMode). It records every request for assertions.
package fakestub

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mode is a failure mode; see Fail.
type Mode int

const (
	ModeNone         Mode = iota
	ModeUnauthorized      // 401 {"error":{"code":"unauthorized"}} whatever the token
	ModeReadOnly          // 403 {"error":{"code":"config_read_only"}}
	ModeServerError       // 500 {"error":{"code":"internal_error"}}
	ModeRawError          // 502 with a long HTML body, not the envelope
	ModeMalformed         // 200 with a body that is not JSON (bytes that are no zip, for downloads)
	ModeStall             // no answer at all until the client gives up
	ModeCutBody           // announces a body, sends part of it, drops the connection

	// The generic faults of agent-cli-backend.md; on its routes errors use
	// the {"detail":…} envelope.
	ModeForbidden     // 403
	ModeNotFound      // 404
	ModeConflict      // 409
	ModeUnprocessable // 422 with FastAPI's list-shaped detail
	ModeBadGateway    // 502 with a JSON detail
	ModeUnavailable   // 503
	ModeDrip          // 200, one byte per 100 ms
	ModeEarlyAnswer   // signed upload: answers 413 before reading the body
)

// modeByName names the modes for the fake-agent-stub binary's --fail flag.
var modeByName = map[string]Mode{
	"401": ModeUnauthorized, "403": ModeForbidden, "404": ModeNotFound, "409": ModeConflict,
	"422": ModeUnprocessable, "500": ModeServerError, "502": ModeBadGateway, "503": ModeUnavailable,
	"raw-error": ModeRawError, "bad-json": ModeMalformed, "stall": ModeStall, "cut": ModeCutBody,
	"drip": ModeDrip, "early-answer": ModeEarlyAnswer, "read-only": ModeReadOnly,
}

// ParseMode returns the mode of a --fail name.
func ParseMode(name string) (Mode, bool) { m, ok := modeByName[name]; return m, ok }

// AllRoutes as a Fail target applies a mode to every API route.
const AllRoutes = "*"

// Request is one recorded request.
type Request struct {
	Method        string
	Path          string // URL path, e.g. /agent-stub/config/prompt or /signed/upload/TOKEN
	RawQuery      string // the query exactly as sent, without "?"
	Header        http.Header
	Authorization string
	ContentType   string
	ContentLength int64 // -1 for a chunked body
	// Body is the request body; for PUT /agent-stub/home-snapshots/archive it
	// is left out (see HomeArchive and HomeBytesReceived).
	Body []byte
}

type upload struct {
	filename, mimetype string
	data               []byte
}

// ticket is what a one-time signed token grants.
type ticket struct {
	download bool
	kind     string // skill | file (config downloads), tool_file (file plane), drive, remote
	name     string // item name (config), upload id (tool_file), key (drive), URL (remote)
}

// Server is the fake Agent Stub. The zero value is not usable; call New.
type Server struct {
	token string

	mu          sync.Mutex
	prompt      string
	note        string
	env         string
	skills      map[string][]byte // name -> zip archive
	files       map[string][]byte // name -> content
	uploads     map[string]upload // id -> uploaded file
	tickets     map[string]ticket // signed token -> grant, deleted on use
	failures    map[string]Mode   // target -> mode
	readOnly    bool
	requests    []Request
	connections [][]string
	nextID      int

	transferDelay time.Duration
	inflight      int
	maxInflight   int

	// What agent-cli-backend.md adds: see tokens.go, files.go, drive.go,
	// knowledge.go and home.go.
	expiredToken  string
	purpose       map[string]purposeToken // token -> scope and snapshot ref
	modes         map[string]bool         // SetMode
	errorEnvelope bool                    // new routes answer {"error":…} instead of {"detail":…}
	drive         []*DriveItem
	knowledge     map[string]*knowledgeRun // command_id -> run
	kExecutions   int
	kGate         chan struct{} // nil, or knowledge runs wait for it to close
	kHeld         chan string   // receives the command_id of each run held at kGate
	slowDelay     time.Duration
	homes         map[string][]byte // snapshot ref -> archive
	homeReceived  int64
	hostileTarget string

	closeOnce sync.Once
	closed    chan struct{}
}

// New returns an empty fake Agent Stub that accepts "Bearer <token>".
func New(token string) *Server {
	return &Server{
		token:    token,
		skills:   map[string][]byte{},
		files:    map[string][]byte{},
		uploads:  map[string]upload{},
		tickets:  map[string]ticket{},
		failures: map[string]Mode{},
		closed:   make(chan struct{}),

		expiredToken: TokenExpired,
		purpose: map[string]purposeToken{
			TokenHomeWrite: {scope: ScopeHomeWrite, ref: DefaultSnapshotRef},
			TokenHomeRead:  {scope: ScopeHomeRead, ref: DefaultSnapshotRef},
		},
		modes:         map[string]bool{},
		drive:         cannedDrive(),
		knowledge:     map[string]*knowledgeRun{},
		slowDelay:     70 * time.Second,
		homes:         map[string][]byte{},
		hostileTarget: "/tmp/outside",
	}
}

// Close releases requests held by ModeStall; call it before closing the HTTP
// server that serves s.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Fail switches target into mode (ModeNone switches it back). Targets:
//
//	"GET /config/prompt"   an API route: method and path below /agent-stub
//	"*"                    every API route
//	"download skill/NAME"  the signed download of one item ("download *": all)
//	"upload FILENAME"      the signed upload of one file ("upload *": all)
func (s *Server) Fail(target string, mode Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mode == ModeNone {
		delete(s.failures, target)
		return
	}
	s.failures[target] = mode
}

func (s *Server) failure(targets ...string) Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range targets {
		if m, ok := s.failures[t]; ok {
			return m
		}
	}
	return ModeNone
}

// SetReadOnly makes every route that changes the configuration answer 403
// config_read_only, as the backend does for snapshots and shared drafts.
func (s *Server) SetReadOnly(ro bool) { s.mu.Lock(); s.readOnly = ro; s.mu.Unlock() }

// SetTransferDelay holds every signed transfer this long before answering, so
// concurrent transfers overlap and MaxConcurrentTransfers sees them.
func (s *Server) SetTransferDelay(d time.Duration) { s.mu.Lock(); s.transferDelay = d; s.mu.Unlock() }

// MaxConcurrentTransfers is the most signed transfers seen in flight at once.
func (s *Server) MaxConcurrentTransfers() int { s.mu.Lock(); defer s.mu.Unlock(); return s.maxInflight }

// SetPrompt, SetNote, SetEnv, SetSkill and SetFile set the configuration.
func (s *Server) SetPrompt(p string) { s.mu.Lock(); s.prompt = p; s.mu.Unlock() }
func (s *Server) SetNote(n string)   { s.mu.Lock(); s.note = n; s.mu.Unlock() }
func (s *Server) SetEnv(e string)    { s.mu.Lock(); s.env = e; s.mu.Unlock() }
func (s *Server) SetSkill(name string, zip []byte) {
	s.mu.Lock()
	s.skills[name] = append([]byte(nil), zip...)
	s.mu.Unlock()
}
func (s *Server) SetFile(name string, data []byte) {
	s.mu.Lock()
	s.files[name] = append([]byte(nil), data...)
	s.mu.Unlock()
}

// Prompt, Note and Env return the configuration.
func (s *Server) Prompt() string { s.mu.Lock(); defer s.mu.Unlock(); return s.prompt }
func (s *Server) Note() string   { s.mu.Lock(); defer s.mu.Unlock(); return s.note }
func (s *Server) Env() string    { s.mu.Lock(); defer s.mu.Unlock(); return s.env }

// Skill and File return an item's bytes and whether it exists.
func (s *Server) Skill(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.skills[name]
	return b, ok
}
func (s *Server) File(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[name]
	return b, ok
}

// Requests returns the requests recorded so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Connections returns the argv of every accepted connect request.
func (s *Server) Connections() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.connections...)
}

func (s *Server) record(r *http.Request, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		Method:        r.Method,
		Path:          r.URL.Path,
		RawQuery:      r.URL.RawQuery,
		Header:        r.Header.Clone(),
		ContentLength: r.ContentLength,
		Authorization: r.Header.Get("Authorization"),
		ContentType:   r.Header.Get("Content-Type"),
		Body:          body,
	})
}

func sortedNames(m map[string][]byte) []map[string]string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	items := make([]map[string]string, 0, len(names))
	for _, n := range names {
		items = append(items, map[string]string{"name": n})
	}
	return items
}

// ServeHTTP routes /agent-stub/... to the API and /signed/... to transfers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == apiPrefix || strings.HasPrefix(r.URL.Path, apiPrefix+"/"):
		s.serveAPI(w, r)
	case strings.HasPrefix(r.URL.Path, signedPrefix):
		s.serveSigned(w, r)
	case strings.HasPrefix(r.URL.Path, recorderPrefix):
		// Where redirects point: a client that follows one shows up here.
		s.record(r, nil)
		w.WriteHeader(http.StatusTeapot)
	default:
		http.NotFound(w, r)
	}
}
