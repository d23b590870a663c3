package fakestub

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shellctl/shellctl/internal/httperr"
)

// rawErrorBody is what ModeRawError answers: an HTML page from a proxy, long
// enough that a client must shorten it.
var rawErrorBody = "<html><head><title>502 Bad Gateway</title></head>\n<body><h1>Bad Gateway</h1>\n" +
	strings.Repeat("<p>upstream connect error or disconnect/reset before headers</p>\n", 20) + "</body></html>\n"

// malformedBody is what ModeMalformed answers with status 200.
const malformedBody = `{"prompt": "this reply was cut and is not JSON`

// writeFailure answers r as mode says. For ModeStall it returns only when
// the client has gone away or the server is closed.
func (s *Server) writeFailure(w http.ResponseWriter, r *http.Request, mode Mode) {
	switch mode {
	case ModeUnauthorized:
		httperr.Write(w, http.StatusUnauthorized, "unauthorized", "invalid or expired token")
	case ModeReadOnly:
		writeReadOnly(w)
	case ModeServerError:
		httperr.Write(w, http.StatusInternalServerError, "internal_error", "the fake stub was told to fail")
	case ModeRawError:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(rawErrorBody))
	case ModeMalformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(malformedBody))
	case ModeStall:
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
	case ModeCutBody:
		cutBody(w)
	}
}

func writeReadOnly(w http.ResponseWriter) {
	httperr.Write(w, http.StatusForbidden, "config_read_only",
		"this configuration is a snapshot or a shared draft and cannot be changed")
}

// cutBody promises 4096 bytes, sends 100 and drops the connection.
func cutBody(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(4096))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	// ErrAbortHandler makes net/http close the connection without logging.
	panic(http.ErrAbortHandler)
}

// writeFault answers r on a route of agent-cli-backend.md as mode says:
// JSON errors in the Agent Stub's envelope (see writeDetail); the other
// modes as writeFailure.
func (s *Server) writeFault(w http.ResponseWriter, r *http.Request, mode Mode) {
	switch mode {
	case ModeUnauthorized:
		s.writeDetail(w, http.StatusUnauthorized, "", "invalid or missing Agent Stub authorization")
	case ModeForbidden:
		s.writeDetail(w, http.StatusForbidden, "", "forbidden by the fake stub")
	case ModeNotFound:
		s.writeDetail(w, http.StatusNotFound, "", "not found by the fake stub")
	case ModeConflict:
		s.writeDetail(w, http.StatusConflict, "", "conflict in the fake stub")
	case ModeUnprocessable:
		writeValidation(w, "file", "field required")
	case ModeServerError:
		s.writeDetail(w, http.StatusInternalServerError, "", "the fake stub was told to fail")
	case ModeBadGateway:
		s.writeDetail(w, http.StatusBadGateway, "", "upstream unreachable")
	case ModeUnavailable:
		s.writeDetail(w, http.StatusServiceUnavailable, "", "service unavailable")
	case ModeDrip:
		s.drip(w, r, []byte(`{"detail":"one byte at a time"}`))
	default:
		s.writeFailure(w, r, mode)
	}
}

// drip answers 200 with body, one byte every 100 ms, until done or the
// client goes away.
func (s *Server) drip(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := range body {
		select {
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		case <-t.C:
		}
		_, _ = w.Write(body[i : i+1])
		if f != nil {
			f.Flush()
		}
	}
}

// answerLegacy answers a route of agent-cli.md with mode: its own modes in
// the {"error":…} envelope, the generic faults of agent-cli-backend.md as
// writeFault does.
func (s *Server) answerLegacy(w http.ResponseWriter, r *http.Request, mode Mode) {
	switch mode {
	case ModeForbidden, ModeNotFound, ModeConflict, ModeUnprocessable, ModeBadGateway, ModeUnavailable, ModeDrip:
		s.writeFault(w, r, mode)
	default:
		s.writeFailure(w, r, mode)
	}
}
