package fakestub

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"path"

	"github.com/shellctl/shellctl/internal/httperr"
)

// The file plane of agent-cli-backend.md: upload-request with its strict
// body, download-request for files (besides config items), and the signed
// URLs they hand out.

// transferMethods are the transfer methods download-request accepts.
var transferMethods = map[string]bool{"local_file": true, "tool_file": true, "datasource_file": true, "remote_url": true}

// AddUpload stores a file as if it had been uploaded and returns its id and
// canonical reference, so a test can download a file with any filename.
func (s *Server) AddUpload(filename, mimetype string, data []byte) (id, ref string) {
	id = newUUID()
	s.mu.Lock()
	s.uploads[id] = upload{filename: filename, mimetype: mimetype, data: append([]byte(nil), data...)}
	s.mu.Unlock()
	return id, FileRef(id)
}

// UploadIDs returns the ids of every stored upload (in no order).
func (s *Server) UploadIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.uploads))
	for id := range s.uploads {
		ids = append(ids, id)
	}
	return ids
}

// UploadedData returns the bytes of upload id.
func (s *Server) UploadedData(id string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.uploads[id]
	return u.data, ok
}

// strictObject decodes body as a JSON object that has exactly the allowed
// keys (required ones must be there); else it answers 422 as FastAPI does.
func strictObject(w http.ResponseWriter, body []byte, required []string, optional ...string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil || m == nil {
		writeValidation(w, "body", "a JSON object is required")
		return nil, false
	}
	allowed := map[string]bool{}
	for _, k := range required {
		allowed[k] = true
		if _, ok := m[k]; !ok {
			writeValidation(w, k, "field required")
			return nil, false
		}
	}
	for _, k := range optional {
		allowed[k] = true
	}
	for k := range m {
		if !allowed[k] {
			writeValidation(w, k, "extra fields not permitted")
			return nil, false
		}
	}
	return m, true
}

func str(raw json.RawMessage) (string, bool) {
	var v string
	if raw == nil || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}

// uploadRequest: exactly {filename, mimetype}, both strings.
func (s *Server) uploadRequest(w http.ResponseWriter, r *http.Request, body []byte) {
	m, ok := strictObject(w, body, []string{"filename", "mimetype"})
	if !ok {
		return
	}
	fn, ok1 := str(m["filename"])
	_, ok2 := str(m["mimetype"])
	if !ok1 || !ok2 || fn == "" {
		writeValidation(w, "filename", "filename and mimetype must be strings, filename non-empty")
		return
	}
	tok := s.issue(ticket{})
	httperr.WriteJSON(w, http.StatusOK, map[string]string{"upload_url": baseURL(r) + signedPrefix + "upload/" + tok})
}

// fileDownloadRequest serves {"file":{…},"for_frontend":bool}, validated as
// the Agent Stub does.
func (s *Server) fileDownloadRequest(w http.ResponseWriter, r *http.Request, m map[string]json.RawMessage) {
	var forFrontend bool
	for _, k := range []string{"for_frontend", "for_external"} {
		if raw, ok := m[k]; ok {
			if json.Unmarshal(raw, &forFrontend) != nil {
				writeValidation(w, k, "must be a boolean")
				return
			}
		}
	}
	f, ok := strictObjectRaw(m["file"], []string{"transfer_method"}, "reference", "url")
	if !ok {
		writeValidation(w, "file", "file must be an object with transfer_method and reference or url")
		return
	}
	method, _ := str(f["transfer_method"])
	if !transferMethods[method] {
		writeValidation(w, "transfer_method", "transfer_method must be one of local_file, tool_file, datasource_file, remote_url")
		return
	}
	if method == "remote_url" {
		u, ok := str(f["url"])
		if _, has := f["reference"]; has || !ok || u == "" {
			writeValidation(w, "url", "remote_url needs url and no reference")
			return
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
			writeValidation(w, "url", "url must be an http(s) URL")
			return
		}
		name := path.Base(pu.Path)
		if name == "/" || name == "." {
			name = ""
		}
		tok := s.issue(ticket{download: true, kind: "remote", name: u})
		httperr.WriteJSON(w, http.StatusOK, map[string]any{
			"filename": name, "mime_type": "application/octet-stream", "size": len(remoteContent(u)),
			"download_url": baseURL(r) + signedPrefix + "download/" + tok,
		})
		return
	}
	if _, has := f["url"]; has {
		writeValidation(w, "url", "url is only for remote_url")
		return
	}
	ref, _ := str(f["reference"])
	id, ok := recordID(ref)
	if !ok {
		writeValidation(w, "reference", "reference must be a canonical dify-file-ref")
		return
	}
	s.mu.Lock()
	up, found := s.uploads[id]
	s.mu.Unlock()
	if !found {
		s.writeDetail(w, http.StatusNotFound, "", "file not found")
		return
	}
	out := map[string]any{"filename": up.filename, "mime_type": up.mimetype, "size": len(up.data)}
	defer func() {
		if s.mode("empty-filename") {
			out["filename"] = ""
		}
		if s.mode("empty-download-url") {
			out["download_url"] = ""
		}
		httperr.WriteJSON(w, http.StatusOK, out)
	}()
	if forFrontend {
		// A display URL for the browser, relative to the Dify web app: the
		// CLI passes it on and must never fetch it.
		sig := make([]byte, 8)
		_, _ = rand.Read(sig)
		out["download_url"] = "/files/tools/" + id + "?sign=" + hex.EncodeToString(sig)
	} else {
		tok := s.issue(ticket{download: true, kind: "tool_file", name: id})
		out["download_url"] = baseURL(r) + signedPrefix + "download/" + tok
	}
}

func strictObjectRaw(raw json.RawMessage, required []string, optional ...string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	allowed := map[string]bool{}
	for _, k := range required {
		allowed[k] = true
		if _, ok := m[k]; !ok {
			return nil, false
		}
	}
	for _, k := range optional {
		allowed[k] = true
	}
	for k := range m {
		if !allowed[k] {
			return nil, false
		}
	}
	return m, true
}

// remoteContent is what the fake "fetches" for a remote_url.
func remoteContent(u string) []byte { return []byte("remote content of " + u + "\n") }
