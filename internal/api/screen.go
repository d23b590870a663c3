package api

// The screen routes (docs/api.md "Screen and keys"): GET /v1/jobs/{id}/screen
// and POST /v1/jobs/{id}/keys.

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/screen"
)

// Bounds of a keys request's settling, in milliseconds.
const (
	maxKeysQuietMS   = 5000
	maxKeysTimeoutMS = 60000
	maxKeys          = 1000
)

// scrollbackParam reads ?scrollback=N (0..screen.ScrollbackLines).
func scrollbackParam(raw string) (int, error) {
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || n > screen.ScrollbackLines {
		return 0, fmt.Errorf("scrollback %q is not a number of rows within 0..%d (the scrollback keeps at most %d)", raw, screen.ScrollbackLines, screen.ScrollbackLines)
	}
	return n, nil
}

func (s *Server) screen(w http.ResponseWriter, r *http.Request, id string) {
	n, err := scrollbackParam(r.URL.Query().Get("scrollback"))
	if err != nil {
		validation(w, "%v", err)
		return
	}
	b, err := s.Jobs.Screen(r.Context(), id, n)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, b)
}

type keysBody struct {
	Keys       *[]string `json:"keys"`
	QuietMS    *int      `json:"quiet_ms"`
	TimeoutMS  *int      `json:"timeout_ms"`
	Scrollback *int      `json:"scrollback"`
}

func (s *Server) keys(w http.ResponseWriter, r *http.Request, id string) {
	var b keysBody
	if !s.readSmall(w, r, &b) {
		return
	}
	if b.Keys == nil {
		validation(w, "keys is required: a list of key names and text, such as [\"Down\", \"Enter\", \":wq\"] (names: see docs/api.md, \"Screen and keys\")")
		return
	}
	if len(*b.Keys) > maxKeys {
		validation(w, "keys has %d entries: at most %d in one request", len(*b.Keys), maxKeys)
		return
	}
	// The names are checked here; the bytes (which follow the program's
	// cursor key mode) are made by the runner.
	if _, err := screen.Keys(*b.Keys, false); err != nil {
		validation(w, "%v", err)
		return
	}
	var p jobs.KeysParams
	for _, f := range []struct {
		name string
		v    *int
		lo   int
		hi   int
		dst  *int
	}{{"quiet_ms", b.QuietMS, 1, maxKeysQuietMS, &p.QuietMS}, {"timeout_ms", b.TimeoutMS, 1, maxKeysTimeoutMS, &p.TimeoutMS}, {"scrollback", b.Scrollback, 0, screen.ScrollbackLines, &p.Scrollback}} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi {
			validation(w, "%s %d is not within %d..%d", f.name, *f.v, f.lo, f.hi)
			return
		}
		*f.dst = *f.v
	}
	out, err := s.Jobs.Keys(r.Context(), id, *b.Keys, p)
	if err != nil {
		if errors.Is(err, jobs.ErrBadKey) {
			validation(w, "%v", err)
			return
		}
		s.writeErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, out)
}
