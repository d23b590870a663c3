package fakestub

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// serveBackend serves the API routes of agent-cli-backend.md (drive,
// knowledge, the file plane of upload-request and download-request) and
// reports whether route was one. Their errors use the {"detail":…}
// envelope; Fail applies to them as to the others.
func (s *Server) serveBackend(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
	switch {
	case route == "GET /drive/manifest" || route == "POST /drive/commit" || strings.HasPrefix(r.URL.Path, apiPrefix+"/drive/"):
		if !s.authOrdinary(w, r, false) {
			return true
		}
		if s.mode("drive-gone") {
			s.writeDetail(w, http.StatusNotFound, "", "Not Found")
			return true
		}
		if s.fault(w, r, route) {
			return true
		}
		switch route {
		case "GET /drive/manifest":
			s.driveManifest(w, r)
		case "POST /drive/commit":
			s.driveCommit(w, r, body)
		default:
			s.writeDetail(w, http.StatusNotFound, "", "Not Found")
		}
		return true
	case route == "POST /knowledge/commands":
		if !s.authOrdinary(w, r, true) || s.fault(w, r, route) {
			return true
		}
		s.knowledgeCommand(w, r, body)
		return true
	case route == "POST /files/upload-request":
		if !s.authOrdinary(w, r, r.URL.Query().Get("expose_expiration") == "true") || s.fault(w, r, route) {
			return true
		}
		s.uploadRequest(w, r, body)
		return true
	case route == "POST /files/download-request" && hasKey(body, "file"):
		if !s.authOrdinary(w, r, true) || s.fault(w, r, route) {
			return true
		}
		s.downloadRequest(w, r, body)
		return true
	}
	return false
}

// fault answers r with the mode Fail set for route (or for every route),
// and reports whether it did.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, route string) bool {
	m := s.failure(route, AllRoutes)
	if m == ModeNone {
		return false
	}
	s.writeFault(w, r, m)
	return true
}

func hasKey(body []byte, key string) bool {
	var m map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(body)).Decode(&m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}
