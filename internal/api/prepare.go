package api

// PUT /v1/prepare and DELETE /v1/prepare/{session_id}: the session tier
// of the egress credential proxy (spec egress.md). No route ever answers
// a value.

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/shellctl/shellctl/internal/egress"
	"github.com/shellctl/shellctl/internal/httperr"
)

// Egress is the credential proxy as the API sees it (nil: off).
type Egress interface {
	Prepare(session string, creds []*egress.Credential) int
	Remove(session string) (int, error)
}

// maxPrepareBody bounds a prepare body: 256 credentials of 16 KiB values
// would be 4 MiB; a body that large is a mistake.
const maxPrepareBody = 1 << 20

// prepareErrors maps the egress package's error kinds to answers.
var prepareErrors = []struct {
	kind   error
	status int
	code   string
}{
	{egress.ErrInvalidRequest, http.StatusBadRequest, "invalid_request"},
	{egress.ErrValidation, http.StatusUnprocessableEntity, "validation_error"},
	{egress.ErrAmbiguous, http.StatusUnprocessableEntity, "ambiguous_binding"},
	{egress.ErrNotFound, http.StatusNotFound, "not_found"},
}

func writePrepareErr(w http.ResponseWriter, err error) {
	for _, e := range prepareErrors {
		if errors.Is(err, e.kind) {
			httperr.Write(w, e.status, e.code, err.Error())
			return
		}
	}
	httperr.Write(w, http.StatusInternalServerError, "internal_error", err.Error())
}

func (s *Server) egressOff(w http.ResponseWriter) bool {
	if s.Egress == nil {
		httperr.Write(w, http.StatusConflict, "egressproxy_disabled", "the egress proxy is off: start the server with --egress-proxy ADDR")
		return true
	}
	return false
}

func (s *Server) prepare(w http.ResponseWriter, r *http.Request) {
	if s.egressOff(w) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPrepareBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			httperr.Write(w, http.StatusRequestEntityTooLarge, "request_too_large", "prepare body is over "+strconv.Itoa(maxPrepareBody)+" bytes")
			return
		}
		httperr.Write(w, http.StatusBadRequest, "invalid_request", "read body: "+err.Error())
		return
	}
	session, creds, err := egress.ParsePrepare(body)
	clear(body)
	if err != nil {
		writePrepareErr(w, err)
		return
	}
	n := s.Egress.Prepare(session, creds)
	httperr.WriteJSON(w, http.StatusOK, map[string]int{"registered": n})
}

func (s *Server) unprepare(w http.ResponseWriter, r *http.Request) {
	if s.egressOff(w) {
		return
	}
	id := r.PathValue("session_id")
	if !egress.ValidSessionID(id) {
		validation(w, "session_id %q must be 1..128 characters of A-Z a-z 0-9 _ -", id)
		return
	}
	n, err := s.Egress.Remove(id)
	if err != nil {
		writePrepareErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]int{"removed": n})
}
