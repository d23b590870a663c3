package fakestub

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shellctl/shellctl/internal/httperr"
)

// issue makes a random one-time token for t.
func (s *Server) issue(t ticket) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.tickets[tok] = t
	s.mu.Unlock()
	return tok
}

// redeem returns and forgets the ticket of tok.
func (s *Server) redeem(tok string, download bool) (ticket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tickets[tok]
	if !ok || t.download != download {
		return ticket{}, false
	}
	delete(s.tickets, tok)
	return t, true
}

// serveSigned serves /signed/download/TOKEN and /signed/upload/TOKEN. No
// bearer token is needed: the URL itself authorises.
func (s *Server) serveSigned(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, signedPrefix)
	op, tok, _ := strings.Cut(rest, "/")
	if op == "upload" && s.failure("upload *") == ModeEarlyAnswer {
		// Answer before reading the body, as a store that refuses early.
		s.record(r, nil)
		s.redeem(tok, false)
		w.Header().Set("Connection", "close")
		s.writeDetail(w, http.StatusRequestEntityTooLarge, "", "upload refused before the body was read")
		return
	}
	var body []byte
	if op == "upload" {
		body, _ = io.ReadAll(r.Body)
	}
	s.record(r, body)
	if r.Header.Get("Authorization") != "" {
		// The token must never reach a storage host.
		s.writeDetail(w, http.StatusBadRequest, "", "signed URLs must be used without an Authorization header")
		return
	}
	switch {
	case op == "download" && r.Method == http.MethodGet:
		t, ok := s.redeem(tok, true)
		if !ok {
			httperr.Write(w, http.StatusForbidden, "invalid_signature", "unknown or used download URL")
			return
		}
		target := "download " + t.kind + "/" + t.name
		if t.kind == "tool_file" {
			target = "download tool_file/" + s.uploadName(t.name)
		}
		s.transfer(w, r, []string{target, "download *"}, func(malformed bool) {
			s.download(w, t, malformed)
		})
	case op == "upload" && r.Method == http.MethodPost:
		if _, ok := s.redeem(tok, false); !ok {
			httperr.Write(w, http.StatusForbidden, "invalid_signature", "unknown or used upload URL")
			return
		}
		filename := uploadFilename(r, body)
		s.transfer(w, r, []string{"upload " + filename, "upload *"}, func(malformed bool) {
			if malformed {
				s.writeFailure(w, r, ModeMalformed)
				return
			}
			s.upload(w, r, body)
		})
	default:
		http.NotFound(w, r)
	}
}

// transfer counts a signed transfer in flight, waits the transfer delay,
// then answers with a failure mode or with serve (which is told whether to
// answer malformed, as that means something different per direction).
func (s *Server) transfer(w http.ResponseWriter, r *http.Request, targets []string, serve func(malformed bool)) {
	s.mu.Lock()
	s.inflight++
	if s.inflight > s.maxInflight {
		s.maxInflight = s.inflight
	}
	delay := s.transferDelay
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch m := s.failure(targets...); m {
	case ModeNone:
		serve(false)
	case ModeMalformed:
		serve(true)
	default:
		s.answerLegacy(w, r, m)
	}
}

// download serves the item; malformed serves as many bytes that are not it
// (for a skill: no zip archive), as a corrupted store would.
func (s *Server) download(w http.ResponseWriter, t ticket, malformed bool) {
	s.mu.Lock()
	var data []byte
	var ok bool
	switch t.kind {
	case "skill":
		data, ok = s.skills[t.name]
	case "file":
		data, ok = s.files[t.name]
	case "tool_file":
		var u upload
		u, ok = s.uploads[t.name]
		data = u.data
	case "drive":
		if it := s.driveItem(t.name); it != nil {
			data, ok = it.Data, true
		}
	case "remote":
		data, ok = remoteContent(t.name), true
	}
	s.mu.Unlock()
	if !ok {
		httperr.Write(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %q is gone", t.kind, t.name))
		return
	}
	if malformed {
		data = bytes.Repeat([]byte{'?'}, len(data))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, body []byte) {
	part, data, err := filePart(r, body)
	if err != nil {
		httperr.Write(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id := newUUID()
	mimetype := part.Header.Get("Content-Type")
	s.mu.Lock()
	s.uploads[id] = upload{filename: part.FileName(), mimetype: mimetype, data: data}
	s.mu.Unlock()
	out := map[string]any{"id": id, "reference": FileRef(id), "name": part.FileName(), "size": len(data), "mime_type": mimetype}
	switch {
	case s.mode("upload-no-reference"):
		delete(out, "reference")
	case s.mode("upload-bad-reference"):
		out["reference"] = "dify-file-ref:" + "eyJpZCI6MX0=" // {"id":1}: no record_id
	case s.mode("upload-no-id"):
		delete(out, "id")
	}
	httperr.WriteJSON(w, http.StatusCreated, out)
}

func (s *Server) uploadName(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uploads[id].filename
}

// filePart returns the multipart field "file" of an upload body.
func filePart(r *http.Request, body []byte) (*multipart.Part, []byte, error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, nil, fmt.Errorf("want a multipart/form-data body")
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, nil, fmt.Errorf("no multipart field \"file\": %v", err)
		}
		if p.FormName() != "file" {
			continue
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, nil, fmt.Errorf("read field \"file\": %v", err)
		}
		return p, data, nil
	}
}

func uploadFilename(r *http.Request, body []byte) string {
	p, _, err := filePart(r, body)
	if err != nil {
		return ""
	}
	return p.FileName()
}

// UploadedFile returns the filename and mimetype of upload id, for tests.
func (s *Server) UploadedFile(id string) (filename, mimetype string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.uploads[id]
	return u.filename, u.mimetype, ok
}
