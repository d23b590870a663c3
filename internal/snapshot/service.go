package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/streamsum"
)

const (
	// DefaultTimeout is the total I/O deadline of one snapshot operation
	// when SHELLCTL_SNAPSHOT_TIMEOUT is unset. A save or restore runs at
	// 100+ MB/s on this machine, so half an hour covers tens of GB even over
	// a slow link (36 GB at 20 MB/s), while a peer that stalls with the
	// connection open holds the one-at-a-time gate for at most that long.
	DefaultTimeout = 30 * time.Minute

	// TimeoutEnv names the variable that overrides DefaultTimeout.
	TimeoutEnv = "SHELLCTL_SNAPSHOT_TIMEOUT"

	// maxSaveBody bounds the optional JSON body of a save (64 KiB: a few
	// thousand patterns, far more than anyone writes by hand).
	maxSaveBody = 64 << 10

	// Trailer names of a save.
	TrailerStatus = "X-Snapshot-Status"
	TrailerSHA256 = "X-Snapshot-Sha256"
	TrailerBytes  = "X-Snapshot-Bytes"
)

// TimeoutFromEnv reads SHELLCTL_SNAPSHOT_TIMEOUT: unset or empty gives
// DefaultTimeout; a value that does not parse as a Go duration, or is not
// positive, is an error naming the variable and the value (serve refuses to
// start on it).
func TimeoutFromEnv(getenv func(string) string) (time.Duration, error) {
	v := getenv(TimeoutEnv)
	if v == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a duration such as 10m or 90s", TimeoutEnv, v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s=%q: must be greater than zero", TimeoutEnv, v)
	}
	return d, nil
}

// Config is what the snapshot service needs from the server.
type Config struct {
	Home     string        // the server's $HOME
	StateDir string        // the server's state dir: never saved, never written to by a restore (when inside Home; recognised by device and inode, whatever its path)
	Timeout  time.Duration // total I/O deadline per operation
	Logger   *slog.Logger  // may be nil
	Metrics  Recorder      // may be nil
}

// Recorder is told of every snapshot operation (internal/metrics; an
// interface so that the dify-agent CLI, which links this package, does
// not link the metrics library).
type Recorder interface {
	// Snapshot records one operation: op "save" or "restore", outcome
	// "ok" or the error code, bytes the archive bytes moved.
	Snapshot(op, outcome string, bytes int64, d time.Duration)
}

func (s *Service) record(op, outcome string, bytes int64, start time.Time) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Snapshot(op, outcome, bytes, time.Since(start))
	}
}

// Service serves the two snapshot routes, one operation at a time.
type Service struct {
	cfg  Config
	log  *slog.Logger
	busy atomic.Bool // the one-at-a-time gate, across both routes
}

// NewService returns a Service; a zero Timeout means DefaultTimeout.
func NewService(cfg Config) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: log}
}

// begin takes the gate and arms the deadline: the connection's read and
// write deadlines (so a peer that stalls unblocks our I/O) and a context
// (so work between I/O stops too). A peer that closes the connection
// cancels the request's context at once. ok is false when the gate is
// taken; the caller has then been answered 409.
func (s *Service) begin(w http.ResponseWriter, r *http.Request) (ctx context.Context, end func(), ok bool) {
	if !s.busy.CompareAndSwap(false, true) {
		httperr.Write(w, http.StatusConflict, "snapshot_busy", "another snapshot operation is in progress; try again when it has finished")
		return nil, nil, false
	}
	deadline := time.Now().Add(s.cfg.Timeout)
	rc := http.NewResponseController(w)
	// ErrNotSupported (a ResponseWriter without a connection, in tests) is
	// fine: the context still bounds the work.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	return ctx, func() {
		cancel()
		s.busy.Store(false)
		// Off the request's path: the answer (and a save's trailers) need
		// not wait for the collection.
		go releaseMemory()
	}, true
}

func (s *Service) checkMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httperr.Write(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("method %s not allowed; use POST", r.Method))
		return false
	}
	return true
}

type saveRequest struct {
	Excludes []string `json:"excludes"`
}

// HandleSave serves POST /v1/snapshot/save.
func (s *Service) HandleSave(w http.ResponseWriter, r *http.Request) {
	if !s.checkMethod(w, r) {
		return
	}
	ctx, end, ok := s.begin(w, r)
	if !ok {
		return
	}
	defer end()
	start := time.Now()
	outcome, sent := "", int64(0)
	defer func() { s.record("save", outcome, sent, start) }()

	req, status, code, msg := decodeSaveRequest(r.Body)
	if status != 0 {
		outcome = code
		httperr.Write(w, status, code, msg)
		return
	}
	if err := checkHome(s.cfg.Home); err != nil {
		outcome = "home_unavailable"
		s.log.Error("snapshot save", "outcome", "home_unavailable", "err", err)
		httperr.Write(w, http.StatusInternalServerError, "home_unavailable", err.Error())
		return
	}

	sw := &streamWriter{w: w}
	st, err := Save(ctx, sw, s.cfg.Home, SaveOptions{Excludes: req.Excludes, StateDir: s.cfg.StateDir})
	sent = st.Bytes
	outcome = saveOutcome(err, sw.started)
	if st.TooDeep > 0 {
		// One line per save, whatever the number: the count and the
		// first name, shortened.
		s.log.Warn("snapshot save left out entries deeper than the depth bound",
			"max_depth", MaxDepth, "left_out", st.TooDeep, "first", st.FirstTooDeep)
	}
	switch {
	case err == nil:
		h := w.Header()
		h.Set(TrailerStatus, "ok")
		h.Set(TrailerSHA256, st.SHA256)
		h.Set(TrailerBytes, strconv.FormatInt(st.Bytes, 10))
		s.log.Info("snapshot save", "outcome", "ok", "entries", st.Entries, "file_bytes", st.FileBytes,
			"bytes", st.Bytes, "duration", time.Since(start))
	case errors.Is(err, ErrBadPattern):
		httperr.Write(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, ErrHomeUnavailable):
		httperr.Write(w, http.StatusInternalServerError, "home_unavailable", err.Error())
	case !sw.started:
		s.log.Error("snapshot save", "outcome", "snapshot_failed", "err", err)
		httperr.Write(w, http.StatusInternalServerError, "snapshot_failed", err.Error())
	default:
		// The body has begun: the only honest way to fail is to cut the
		// connection, so the client never sees a clean end without "ok".
		s.log.Error("snapshot save", "outcome", "aborted", "err", err, "bytes", st.Bytes, "duration", time.Since(start))
		panic(http.ErrAbortHandler)
	}
}

// decodeSaveRequest reads the optional body {"excludes": [...]}. status is
// 0 when it is fine.
func decodeSaveRequest(body io.Reader) (req saveRequest, status int, code, msg string) {
	if body == nil {
		return req, 0, "", ""
	}
	b, err := io.ReadAll(io.LimitReader(body, maxSaveBody+1))
	if err != nil {
		return req, http.StatusBadRequest, "invalid_request", "read request body: " + err.Error()
	}
	if len(b) > maxSaveBody {
		return req, http.StatusRequestEntityTooLarge, "request_too_large",
			fmt.Sprintf("request body is over %d bytes", maxSaveBody)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return req, 0, "", ""
	}
	if b[0] != '{' {
		return req, http.StatusBadRequest, "invalid_request", "request body must be a JSON object"
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return req, http.StatusBadRequest, "invalid_request", "request body: " + err.Error()
	}
	return req, 0, "", ""
}

// checkHome lets a save answer home_unavailable before anything else.
func checkHome(home string) error {
	root, err := openHome(home)
	if err != nil {
		return err
	}
	return root.Close()
}

// streamWriter sends the response header with the first byte of the
// archive, so an error before it can still be answered as JSON.
type streamWriter struct {
	w       http.ResponseWriter
	started bool
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	if !sw.started {
		sw.started = true
		h := sw.w.Header()
		h.Set("Content-Type", "application/octet-stream")
		streamsum.Declare(h, TrailerStatus, TrailerSHA256, TrailerBytes)
		sw.w.WriteHeader(http.StatusOK)
	}
	return sw.w.Write(p)
}

// HandleRestore serves POST /v1/snapshot/restore.
//
// A restore that fails before the end of the body (a refusal, a full disk)
// is answered at once, even to a client that stalls: Restore does not
// wait for the read of the body under way, and the answer is flushed
// without waiting for it either (full duplex: otherwise net/http writes
// the answer only once no read of the body is under way, and first reads
// up to 256 KiB of what is left of it). The handler then waits for that
// one read, with the gate already released: a handler must not read its
// body once it has returned. It returns when the client sends its next
// bytes or closes, or at the deadline. The connection is closed after the
// answer ("Connection: close"); net/http reads up to 256 KiB more of the
// body first and then closes its side before the socket, so a client still
// sending reads the answer instead of a reset.
func (s *Service) HandleRestore(w http.ResponseWriter, r *http.Request) {
	if !s.checkMethod(w, r) {
		return
	}
	ctx, end, ok := s.begin(w, r)
	if !ok {
		return
	}
	released := false
	defer func() {
		if !released {
			end()
		}
	}()
	rc := http.NewResponseController(w)
	// ErrNotSupported (HTTP/1 only; no connection in tests): the answer
	// then waits for the read of the body under way, as it did.
	_ = rc.EnableFullDuplex()
	start := time.Now()
	body := &requestBody{r: r.Body, idle: make(chan struct{})}
	st, err := Restore(ctx, body, s.cfg.Home, RestoreOptions{StateDir: s.cfg.StateDir})
	s.record("restore", restoreOutcome(err), body.bytes(), start)
	if err != nil {
		w.Header().Set("Connection", "close") // the rest of the body is not read
	}
	switch {
	case err == nil:
		s.log.Info("snapshot restore", "outcome", "ok", "entries", st.Entries, "bytes_written", st.BytesWritten,
			"duration", time.Since(start))
		httperr.WriteJSON(w, http.StatusOK, st)
	case errors.Is(err, ErrHomeUnavailable):
		s.log.Error("snapshot restore", "outcome", "home_unavailable", "err", err)
		httperr.Write(w, http.StatusInternalServerError, "home_unavailable", err.Error())
	case errors.Is(err, ErrMalformed):
		s.log.Warn("snapshot restore", "outcome", "archive_malformed", "err", err, "entries", st.Entries)
		httperr.Write(w, http.StatusBadRequest, "archive_malformed", err.Error())
	default:
		s.log.Error("snapshot restore", "outcome", "restore_failed", "err", err, "entries", st.Entries)
		httperr.Write(w, http.StatusInternalServerError, "restore_failed", err.Error())
	}
	idle := body.stop()
	select {
	case <-idle: // no read under way: the usual case, and always on success
		return
	default:
	}
	released = true
	end()
	_ = rc.Flush()
	<-idle
}

// releaseMemory hands the memory of a finished operation back to the
// system at once. Without it the runtime keeps the heap of the operation
// (up to MemoryBound) until its next collection, which an idle server may
// not run for two minutes, and returns the pages only slowly after that:
// the server's RSS stayed at 150-250 MiB after one save. A forced
// collection of a heap this small costs a few milliseconds, once per
// snapshot operation that itself takes seconds.
func releaseMemory() { debug.FreeOSMemory() }

// saveOutcome names how a save ended, as its metrics label.
func saveOutcome(err error, started bool) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrBadPattern):
		return "invalid_request"
	case errors.Is(err, ErrHomeUnavailable):
		return "home_unavailable"
	case !started:
		return "snapshot_failed"
	}
	return "aborted"
}

// restoreOutcome names how a restore ended, as its metrics label.
func restoreOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrHomeUnavailable):
		return "home_unavailable"
	case errors.Is(err, ErrMalformed):
		return "archive_malformed"
	}
	return "restore_failed"
}

// requestBody is a restore's request body: it counts the archive bytes
// read (once per read, not per byte) and, once stopped, is read no more
// and tells when the read under way, if any, has returned. One goroutine
// reads it (the restore's prefetcher).
type requestBody struct {
	r       io.Reader
	mu      sync.Mutex
	n       int64
	reading bool
	stopped bool
	idle    chan struct{} // closed once stopped and no read under way
}

// errBodyStopped is what a read after stop returns (none is made: the
// prefetcher has stopped by then).
var errBodyStopped = errors.New("restore request body: read after the restore ended")

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return 0, errBodyStopped
	}
	b.reading = true
	b.mu.Unlock()
	n, err := b.r.Read(p)
	b.mu.Lock()
	b.n += int64(n)
	b.reading = false
	if b.stopped {
		close(b.idle)
	}
	b.mu.Unlock()
	return n, err
}

func (b *requestBody) bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// stop ends the reading: no read begins after it, and the channel it
// returns is closed once the read under way, if any, has returned.
func (b *requestBody) stop() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		if !b.reading {
			close(b.idle)
		}
	}
	return b.idle
}
