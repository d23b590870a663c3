package api

// The extended API's job routes (spec/extended-api.md §2, §3).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
)

func (s *Server) record(w http.ResponseWriter, r *http.Request, id string) {
	rec, err := s.Jobs.Record(r.Context(), id)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	httperr.WriteJSON(w, http.StatusOK, rec)
}

// stderr pages stderr.log by the rules of wait at timeout 0; offset and
// output_limit come in the query.
func (s *Server) stderr(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	var f waitFields
	if raw := q.Get("offset"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("offset %q is not a byte offset: give a whole number ≥ 0", raw))
			return
		}
		f.Offset = &n
	}
	if raw := q.Get("output_limit"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			validation(w, "output_limit %q is not a whole number of bytes", raw)
			return
		}
		f.OutputLimit = &n
	}
	if !f.checkOffset(w) {
		return
	}
	res, err := s.Jobs.Stderr(r.Context(), id, f.params(0, false))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeResult(w, res)
}

type signalBody struct {
	Signal json.RawMessage `json:"signal"`
	Target *string         `json:"target"`
}

// maxSignal is the highest signal number Linux has (SIGRTMAX).
const maxSignal = 64

// parseSignal reads a signal given as a name with or without SIG ("INT",
// "SIGINT", any case), a number (2), or a number in a string ("2").
func parseSignal(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("signal is required: a name such as \"INT\" or \"SIGTERM\", or a number")
	}
	var text string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, fmt.Errorf("signal %s is not a signal name or number", raw)
		}
	} else {
		text = string(raw)
	}
	t := strings.TrimSpace(text)
	if n, err := strconv.Atoi(t); err == nil {
		if n < 1 || n > maxSignal {
			return 0, fmt.Errorf("signal %d is not a signal: give 1..%d or a name such as \"INT\"", n, maxSignal)
		}
		return n, nil
	}
	name := strings.ToUpper(t)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if n := unix.SignalNum(name); n != 0 {
		return int(n), nil
	}
	return 0, fmt.Errorf("signal %q is not a signal this system knows: give a name such as \"INT\", \"TERM\", \"SIGHUP\" or a number 1..%d", text, maxSignal)
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, id string) {
	var b signalBody
	if !s.readSmall(w, r, &b) {
		return
	}
	sig, err := parseSignal(b.Signal)
	if err != nil {
		validation(w, "%v", err)
		return
	}
	target := ""
	if b.Target != nil {
		switch *b.Target {
		case jobs.TargetForeground, jobs.TargetGroup, jobs.TargetTree:
			target = *b.Target
		default:
			validation(w, "target %q is not one of \"foreground\", \"group\", \"tree\"", *b.Target)
			return
		}
	}
	if err := s.Jobs.Signal(r.Context(), id, sig, target); err != nil {
		s.writeErr(w, err)
		return
	}
	s.record(w, r, id)
}

type resizeBody struct {
	Cols *int `json:"cols"`
	Rows *int `json:"rows"`
}

func (s *Server) resize(w http.ResponseWriter, r *http.Request, id string) {
	var b resizeBody
	if !s.readSmall(w, r, &b) {
		return
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"cols", b.Cols}, {"rows", b.Rows}} {
		if f.v == nil {
			validation(w, "%s is required: a whole number within 1..%d", f.name, maxTerminalSide)
			return
		}
		if *f.v < 1 || *f.v > maxTerminalSide {
			validation(w, "%s %d is not within 1..%d", f.name, *f.v, maxTerminalSide)
			return
		}
	}
	if err := s.Jobs.Resize(r.Context(), id, *b.Cols, *b.Rows); err != nil {
		s.writeErr(w, err)
		return
	}
	s.record(w, r, id)
}
