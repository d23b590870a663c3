package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/shellctl/shellctl/internal/httperr"
)

// Request body limits (jobs.md "Limits that protect the server").
const (
	// DefaultMaxRequestBytes bounds run and input bodies
	// (--max-request-bytes): Dify moves files in as base64 inside a script.
	DefaultMaxRequestBytes = 64 << 20
	// DefaultBodyMemory is the budget of bytes that large bodies may
	// hold in memory at once (--max-body-memory).
	DefaultBodyMemory = 256 << 20

	maxOtherBody = 64 << 10 // every other JSON body
	// smallBody: a run or input body up to this size is read with a small
	// buffer, its script kept in memory, and reserves nothing.
	smallBody = 64 << 10
	// maxRest bounds the fields of a run body other than its script
	// (env above all).
	maxRest = 2 << 20

	// drainFactor: a body refused by its Content-Length is still read
	// (and dropped) up to this many times the limit, so the client gets
	// the answer rather than a reset.
	drainFactor = 2

	smallReadBuf = 4 << 10
	largeReadBuf = 64 << 10
	spoolBuf     = 64 << 10
)

// Limits are the body limits of the server; zero values take the
// defaults, except BodyReadTimeout where zero means none.
type Limits struct {
	MaxRequestBytes int64         // run and input bodies
	BodyReadTimeout time.Duration // a body must have arrived this long after its reading began
	BodyMemory      int64         // bytes large bodies may hold at once
}

func (s *Server) maxRequestBytes() int64 {
	if s.Limits.MaxRequestBytes > 0 {
		return s.Limits.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

func (s *Server) bodyMemory() int64 {
	if s.Limits.BodyMemory > 0 {
		return s.Limits.BodyMemory
	}
	return DefaultBodyMemory
}

// budget is the semaphore of BodyMemory (FIFO: a large body that waits is
// not overtaken by later ones).
func (s *Server) budget() *semaphore.Weighted {
	s.budgetOnce.Do(func() { s.sem = semaphore.NewWeighted(s.bodyMemory()) })
	return s.sem
}

type bodySpec struct {
	limit   int64      // bytes of the whole body
	bigs    []bigField // the string fields decoded into their sinks (key and sink)
	spooled bool       // the big fields' sinks write to disk: they are not held
	restMax int        // bytes of the other fields
	large   bool       // the body may be large: it reserves from the budget
}

// bigSetter learns what became of each big field.
type bigSetter interface {
	setBig(key string, state int, n int64)
}

// readSmall reads a JSON object body of at most 64 KiB into v.
func (s *Server) readSmall(w http.ResponseWriter, r *http.Request, v any) bool {
	_, ok := s.readBody(w, r, bodySpec{limit: maxOtherBody, restMax: maxOtherBody}, v)
	return ok
}

// readSmallOrNothing is readSmall where a body that is not a JSON object
// (not JSON at all, or another JSON value) counts as no body: v stays as
// it was. A body that parses is checked as readSmall checks it.
func (s *Server) readSmallOrNothing(w http.ResponseWriter, r *http.Request, v any) bool {
	if s.Limits.BodyReadTimeout > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.Limits.BodyReadTimeout))
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxOtherBody))
	if s.Limits.BodyReadTimeout > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	if err != nil {
		s.bodyFailed(w, err, bodySpec{limit: maxOtherBody}, s.Limits.BodyReadTimeout)
		return false
	}
	if !parsesAsObject(raw) {
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.ContentLength = int64(len(raw))
	return s.readSmall(w, r, v)
}

// parsesAsObject reports whether raw is a JSON object as the original's
// parser reads one: strict JSON, or JSON with NaN or Infinity for a number
// (Python's json module takes them; they are then refused as numbers).
func parsesAsObject(raw []byte) bool {
	obj := bytes.Trim(raw, " \t\r\n") // JSON's white space
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	if json.Valid(obj) {
		return true
	}
	d := &decoder{r: bufio.NewReader(bytes.NewReader(obj)), restMax: maxOtherBody}
	return d.decode() == nil && d.nonFinite != ""
}

var (
	smallReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, smallReadBuf) }}
	largeReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, largeReadBuf) }}
	spoolWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, spoolBuf) }}
)

// readBody reads and decodes the body into v; on failure it has answered.
// release gives back what the body reserved from the memory budget; the
// caller calls it once it no longer holds the body's data.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, spec bodySpec, v any) (release func(), ok bool) {
	release = func() {}
	if r.ContentLength > spec.limit {
		// A client that sends its whole body before it reads the answer
		// (most do) would get a connection reset instead of the 413 if
		// the body stayed unread: read and drop a body not far over the
		// limit (bounded in time by the body deadline, in memory by a
		// small buffer), then answer.
		if r.ContentLength <= drainFactor*spec.limit {
			if s.Limits.BodyReadTimeout > 0 {
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.Limits.BodyReadTimeout))
			}
			_, _ = io.CopyBuffer(io.Discard, io.LimitReader(r.Body, r.ContentLength), make([]byte, 32<<10))
		}
		httperr.Write(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body is %d bytes, the limit%s is %d", r.ContentLength, limitName(spec), spec.limit))
		return release, false
	}
	timeout := s.Limits.BodyReadTimeout
	big := r.ContentLength < 0 || r.ContentLength > smallBody
	if spec.large && big {
		rel, err := s.reserve(r.Context(), s.held(spec, r.ContentLength), timeout)
		if err != nil {
			httperr.Write(w, http.StatusServiceUnavailable, "server_busy", err.Error())
			return release, false
		}
		release = rel
	}
	rc := http.NewResponseController(w)
	if timeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
	}
	pool := &smallReaders
	if big {
		pool = &largeReaders
	}
	br := pool.Get().(*bufio.Reader)
	br.Reset(http.MaxBytesReader(w, r.Body, spec.limit))
	d := &decoder{r: br, bigs: append([]bigField(nil), spec.bigs...), restMax: spec.restMax}
	err := d.decode()
	br.Reset(nil)
	pool.Put(br)
	if timeout > 0 {
		// The deadline is for the body only: what follows (a wait of up
		// to 600 s) is not a slow client. net/http clears it as well when
		// it starts watching for the client to go away.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err == nil && d.nonFinite != "" {
		err = &bodyError{status: 422, code: "validation_error", msg: fmt.Sprintf("field %q is %s: numbers must be finite", d.nonFinite, d.nonTok)}
	}
	if err == nil {
		err = decodeRest(d.rest, v)
	}
	if err != nil {
		release()
		s.bodyFailed(w, err, spec, timeout)
		return func() {}, false
	}
	if bs, ok := v.(bigSetter); ok {
		for _, b := range d.bigs {
			bs.setBig(b.key, b.state, b.n)
		}
	}
	return release, true
}

func limitName(spec bodySpec) string {
	if spec.large {
		return " (--max-request-bytes)"
	}
	return ""
}

// held is what a large body can hold in memory while it is read and used:
// a spooled script holds only the other fields and the buffers; input
// holds its text.
func (s *Server) held(spec bodySpec, contentLength int64) int64 {
	n := contentLength
	if n < 0 {
		n = spec.limit
	}
	if spec.spooled {
		n = min(n, int64(spec.restMax+largeReadBuf+spoolBuf))
	} else {
		n += largeReadBuf
	}
	return min(n, s.bodyMemory())
}

// reserve takes n bytes of the budget, waiting at most timeout for them.
func (s *Server) reserve(ctx context.Context, n int64, timeout time.Duration) (func(), error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := s.budget().Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("large request bodies hold %d bytes and this one needs %d, more than is left of --max-body-memory (%d bytes) within %v: try again", s.inFlight.Load(), n, s.bodyMemory(), timeout)
	}
	s.inFlight.Add(n)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.inFlight.Add(-n)
			s.budget().Release(n)
		})
	}, nil
}

func (s *Server) bodyFailed(w http.ResponseWriter, err error, spec bodySpec, timeout time.Duration) {
	var be *bodyError
	var re *readErr
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &be):
		httperr.Write(w, be.status, be.code, be.msg)
	case errors.As(err, &mbe):
		httperr.Write(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body is larger than %d bytes%s", spec.limit, limitName(spec)))
	case errors.Is(err, os.ErrDeadlineExceeded):
		httperr.Write(w, http.StatusRequestTimeout, "request_timeout", fmt.Sprintf("the request body did not arrive within %v (--body-read-timeout)", timeout))
	case errors.As(err, &re):
		httperr.Write(w, http.StatusBadRequest, "invalid_request", err.Error())
	default:
		s.writeErr(w, err)
	}
}

// fileSink writes the big string to a spool file, made when its first
// byte arrives.
type fileSink struct {
	create func() (*os.File, error)
	f      *os.File
	w      *bufio.Writer
	path   string
}

func (k *fileSink) Write(p []byte) (int, error) {
	if k.f == nil {
		f, err := k.create()
		if err != nil {
			return 0, err
		}
		k.f, k.path = f, f.Name()
		k.w = spoolWriters.Get().(*bufio.Writer)
		k.w.Reset(f)
	}
	n, err := k.w.Write(p)
	if err != nil {
		return n, fmt.Errorf("write the script to %s: %w", k.path, err)
	}
	return n, nil
}

// Reset empties the file: the field came again.
func (k *fileSink) Reset() error {
	if k.f == nil {
		return nil
	}
	k.w.Reset(k.f) // drops what was buffered
	if err := k.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate %s: %w", k.path, err)
	}
	if _, err := k.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind %s: %w", k.path, err)
	}
	return nil
}

// finish flushes and closes the file and names it.
func (k *fileSink) finish() (string, error) {
	if k.f == nil {
		return "", errors.New("no script was received")
	}
	err := k.w.Flush()
	k.putWriter()
	if cerr := k.f.Close(); err == nil {
		err = cerr
	}
	k.f = nil
	if err != nil {
		return "", fmt.Errorf("write the script to %s: %w", k.path, err)
	}
	return k.path, nil
}

func (k *fileSink) putWriter() {
	if k.w != nil {
		k.w.Reset(nil)
		spoolWriters.Put(k.w)
		k.w = nil
	}
}

// discard removes the file unless the job took it (then it is gone
// already).
func (k *fileSink) discard() {
	k.putWriter()
	if k.f != nil {
		k.f.Close()
		k.f = nil
	}
	if k.path != "" {
		os.Remove(k.path)
	}
}

// bodyWatch notes whether the handler read its body to the end. Atomic: a
// snapshot restore that failed early answers while its body's reader may
// still be in a read (internal/snapshot HandleRestore).
type bodyWatch struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}
