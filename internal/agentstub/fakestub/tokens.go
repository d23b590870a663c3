package fakestub

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/shellctl/shellctl/internal/httperr"
)

// Tokens the fake knows besides the run token given to New (token A of
// agent-cli-backend.md).
const (
	// TokenExpired is token X: "expired". Routes with structured expiry
	// answer 401 {"detail":{"code":"agent_stub_authorization_expired",…}},
	// the others a string detail.
	TokenExpired = "expired-token"
	// TokenHomeWrite and TokenHomeRead are the purpose tokens W and R, for
	// DefaultSnapshotRef.
	TokenHomeWrite = "home-write-token"
	TokenHomeRead  = "home-read-token"

	ScopeHomeWrite     = "home_snapshot:write"
	ScopeHomeRead      = "home_snapshot:read"
	DefaultSnapshotRef = "snap-1"

	// CodeAuthExpired is the code of an expired token.
	CodeAuthExpired = "agent_stub_authorization_expired"
)

// recorderPrefix is where the fake's redirects point; no client may follow
// them, and a test checks that no request arrived there.
const recorderPrefix = "/recorder/"

type purposeToken struct{ scope, ref string }

// SetPurposeToken makes token a purpose token of scope for the archive ref.
func (s *Server) SetPurposeToken(token, scope, ref string) {
	s.mu.Lock()
	s.purpose[token] = purposeToken{scope: scope, ref: ref}
	s.mu.Unlock()
}

// SetErrorEnvelope makes the routes of agent-cli-backend.md answer errors
// as {"error":{"code","message"}} instead of FastAPI's {"detail":…}.
func (s *Server) SetErrorEnvelope(on bool) { s.mu.Lock(); s.errorEnvelope = on; s.mu.Unlock() }

func bearer(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tok
}

// writeDetail answers an error the Agent Stub's way: {"detail": msg} when
// code is "", else {"detail":{"code","message"}}; or the other envelope
// when SetErrorEnvelope is on.
func (s *Server) writeDetail(w http.ResponseWriter, status int, code, msg string) {
	s.mu.Lock()
	errEnv := s.errorEnvelope
	s.mu.Unlock()
	switch {
	case errEnv:
		if code == "" {
			code = fmt.Sprintf("http_%d", status)
		}
		httperr.Write(w, status, code, msg)
	case code == "":
		httperr.WriteJSON(w, status, map[string]any{"detail": msg})
	default:
		httperr.WriteJSON(w, status, map[string]any{"detail": map[string]string{"code": code, "message": msg}})
	}
}

// writeValidation answers 422 the way FastAPI does: detail is a list.
func writeValidation(w http.ResponseWriter, field, msg string) {
	httperr.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []map[string]any{
		{"type": "value_error", "loc": []string{"body", field}, "msg": msg},
	}})
}

// authOrdinary checks the run token on an ordinary route of
// agent-cli-backend.md. structured says whether an expired token gets the
// structured 401.
func (s *Server) authOrdinary(w http.ResponseWriter, r *http.Request, structured bool) bool {
	tok := bearer(r)
	s.mu.Lock()
	expired := s.expiredToken
	s.mu.Unlock()
	switch {
	case tok != "" && tok == s.token:
		return true
	case tok == expired && structured:
		s.writeDetail(w, http.StatusUnauthorized, CodeAuthExpired, "Agent Stub authorization expired")
	case tok == expired:
		s.writeDetail(w, http.StatusUnauthorized, "", "Agent Stub authorization expired")
	default:
		s.writeDetail(w, http.StatusUnauthorized, "", "invalid or missing Agent Stub authorization")
	}
	return false
}

// authPurpose checks a purpose token of scope and returns its archive ref.
func (s *Server) authPurpose(w http.ResponseWriter, r *http.Request, scope string) (string, bool) {
	s.mu.Lock()
	p, ok := s.purpose[bearer(r)]
	s.mu.Unlock()
	if !ok || p.scope != scope {
		s.writeDetail(w, http.StatusUnauthorized, "", "invalid Home Snapshot authorization")
		return "", false
	}
	return p.ref, true
}

// newUUID returns a random version-4 UUID.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// FileRef returns the canonical reference of a record id:
// "dify-file-ref:" and padded base64url of {"record_id": id}.
func FileRef(id string) string {
	b, _ := json.Marshal(map[string]string{"record_id": id})
	return "dify-file-ref:" + base64.URLEncoding.EncodeToString(b)
}

// recordID returns the record id of a canonical reference.
func recordID(ref string) (string, bool) {
	enc, ok := strings.CutPrefix(ref, "dify-file-ref:")
	if !ok {
		return "", false
	}
	raw, err := base64.URLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	var v struct {
		RecordID *string `json:"record_id"`
	}
	if json.Unmarshal(raw, &v) != nil || v.RecordID == nil || *v.RecordID == "" {
		return "", false
	}
	return *v.RecordID, true
}

func (s *Server) expiredTok() string { s.mu.Lock(); defer s.mu.Unlock(); return s.expiredToken }
