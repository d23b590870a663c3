package fakestub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/shellctl/shellctl/internal/httperr"
)

const (
	apiPrefix    = "/agent-stub"
	signedPrefix = "/signed/"
)

// writes lists the API routes that change the configuration: they answer
// config_read_only when the server is read-only.
var writes = map[string]bool{
	"PUT /config/prompt": true,
	"PUT /config/note":   true,
	"PATCH /config/env":  true,
	"POST /config/push":  true,
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + strings.TrimPrefix(r.URL.Path, apiPrefix)
	if route == "PUT "+homeRoute || route == "GET "+homeRoute {
		s.serveHome(w, r, route) // streams its body: recorded without it
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.record(r, body)
	if s.serveBackend(w, r, route, body) {
		return
	}
	// The expired token X on the routes of agent-cli.md: structured where
	// the Agent Stub says so (upload-request only when asked to).
	if tok := bearer(r); tok != "" && tok == s.expiredTok() {
		structured := route != "POST /files/upload-request" || r.URL.Query().Get("expose_expiration") == "true"
		s.authOrdinary(w, r, structured)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		httperr.Write(w, http.StatusUnauthorized, "unauthorized", "invalid or expired token")
		return
	}
	if m := s.failure(route, AllRoutes); m != ModeNone {
		s.answerLegacy(w, r, m)
		return
	}
	s.mu.Lock()
	ro := s.readOnly
	s.mu.Unlock()
	if ro && writes[route] {
		writeReadOnly(w)
		return
	}
	switch route {
	case "GET /config/prompt":
		s.mu.Lock()
		p := s.prompt
		s.mu.Unlock()
		httperr.WriteJSON(w, http.StatusOK, map[string]string{"prompt": p})
	case "PUT /config/prompt":
		var in struct {
			Prompt *string `json:"prompt"`
		}
		if !decode(w, body, &in) || !required(w, in.Prompt != nil, "prompt") {
			return
		}
		s.SetPrompt(*in.Prompt)
		httperr.WriteJSON(w, http.StatusOK, map[string]string{"prompt": *in.Prompt})
	case "GET /config/manifest":
		httperr.WriteJSON(w, http.StatusOK, s.manifest())
	case "PUT /config/note":
		var in struct {
			Note *string `json:"note"`
		}
		if !decode(w, body, &in) || !required(w, in.Note != nil, "note") {
			return
		}
		s.SetNote(*in.Note)
		httperr.WriteJSON(w, http.StatusOK, map[string]string{"note": *in.Note})
	case "PATCH /config/env":
		var in struct {
			EnvText *string `json:"env_text"`
		}
		if !decode(w, body, &in) || !required(w, in.EnvText != nil, "env_text") {
			return
		}
		s.SetEnv(*in.EnvText)
		httperr.WriteJSON(w, http.StatusOK, map[string]string{"env_text": *in.EnvText})
	case "POST /files/download-request":
		s.downloadRequest(w, r, body)
	case "POST /files/upload-request":
		s.uploadRequest(w, r, body)
	case "POST /config/push":
		s.push(w, body)
	case "POST /connections":
		var in struct {
			Argv     []string          `json:"argv"`
			Metadata map[string]string `json:"metadata"`
		}
		if !decode(w, body, &in) || !required(w, in.Argv != nil && in.Metadata != nil, "argv and metadata") {
			return
		}
		s.mu.Lock()
		s.connections = append(s.connections, in.Argv)
		s.nextID++
		id := fmt.Sprintf("conn-%d", s.nextID)
		s.mu.Unlock()
		httperr.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "argv": in.Argv, "status": "connected"})
	default:
		httperr.Write(w, http.StatusNotFound, "not_found", "no route "+route)
	}
}

func (s *Server) manifest() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{
		"skills": map[string]any{"items": sortedNames(s.skills)},
		"files":  map[string]any{"items": sortedNames(s.files)},
		"note":   s.note,
	}
}

// decode reads a JSON body strictly: the fake is stricter than a real
// backend so that a client sending a wrong field fails its tests.
func decode(w http.ResponseWriter, body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		httperr.Write(w, http.StatusBadRequest, "invalid_request", "bad JSON body: "+err.Error())
		return false
	}
	return true
}

func required(w http.ResponseWriter, ok bool, field string) bool {
	if !ok {
		httperr.Write(w, http.StatusBadRequest, "invalid_request", field+" is required")
	}
	return ok
}

func (s *Server) downloadRequest(w http.ResponseWriter, r *http.Request, body []byte) {
	m, valid := strictObject(w, body, nil, "file", "config", "for_frontend", "for_external")
	if !valid {
		return
	}
	_, hasFile := m["file"]
	_, hasConfig := m["config"]
	if hasFile == hasConfig {
		writeValidation(w, "file", "exactly one of file and config is required")
		return
	}
	if hasFile {
		s.fileDownloadRequest(w, r, m)
		return
	}
	if ff := m["for_frontend"]; string(ff) == "true" {
		writeValidation(w, "for_frontend", "config downloads need for_frontend false")
		return
	}
	var in struct {
		Config *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"config"`
		ForFrontend *bool `json:"for_frontend"`
	}
	if !decode(w, body, &in) || !required(w, in.Config != nil && in.ForFrontend != nil, "config and for_frontend") {
		return
	}
	kind, name := in.Config.Kind, in.Config.Name
	s.mu.Lock()
	var data []byte
	var ok bool
	switch kind {
	case "skill":
		data, ok = s.skills[name]
	case "file":
		data, ok = s.files[name]
	default:
		s.mu.Unlock()
		httperr.Write(w, http.StatusBadRequest, "invalid_request", "kind must be skill or file")
		return
	}
	s.mu.Unlock()
	if !ok {
		httperr.Write(w, http.StatusNotFound, "not_found", fmt.Sprintf("no %s named %q", kind, name))
		return
	}
	tok := s.issue(ticket{download: true, kind: kind, name: name})
	filename, mime := name, "application/octet-stream"
	if kind == "skill" {
		filename, mime = name+".zip", "application/zip"
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]any{
		"filename":     filename,
		"mime_type":    mime,
		"size":         len(data),
		"download_url": baseURL(r) + signedPrefix + "download/" + tok,
	})
}

type pushItem struct {
	Name    string `json:"name"`
	FileRef *struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"file_ref"`
}

// push applies a config push all or nothing: every item is checked first.
func (s *Server) push(w http.ResponseWriter, body []byte) {
	var in struct {
		Skills []pushItem `json:"skills"`
		Files  []pushItem `json:"files"`
	}
	if !decode(w, body, &in) {
		return
	}
	s.mu.Lock()
	for _, it := range append(append([]pushItem(nil), in.Skills...), in.Files...) {
		if it.Name == "" {
			s.mu.Unlock()
			httperr.Write(w, http.StatusBadRequest, "invalid_request", "an item has no name")
			return
		}
		if it.FileRef == nil {
			continue
		}
		if _, ok := s.uploads[it.FileRef.ID]; it.FileRef.Kind != "tool_file" || !ok {
			s.mu.Unlock()
			httperr.Write(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("%s: no uploaded tool_file %q", it.Name, it.FileRef.ID))
			return
		}
	}
	apply := func(items []pushItem, dst map[string][]byte) {
		for _, it := range items {
			if it.FileRef == nil {
				delete(dst, it.Name)
				continue
			}
			dst[it.Name] = s.uploads[it.FileRef.ID].data
		}
	}
	apply(in.Skills, s.skills)
	apply(in.Files, s.files)
	s.mu.Unlock()
	httperr.WriteJSON(w, http.StatusOK, s.manifest())
}

// baseURL is the scheme and host the client reached us at, for signed URLs.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
