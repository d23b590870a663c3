package fakestub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The knowledge route of agent-cli-backend.md: POST /knowledge/commands with
// the server-side validation, canned data per command, an idempotency store
// keyed by command_id and the modes of its table.

// KnowledgeErrors maps the error codes a test can switch on
// (KnowledgeErrorPrefix+code) to their status.
var KnowledgeErrors = map[string]int{
	"KNOWLEDGE_SCOPE_MISMATCH":   http.StatusForbidden,
	"KNOWLEDGE_IMAGE_NOT_FOUND":  http.StatusNotFound,
	"KNOWLEDGE_EVIDENCE_STALE":   http.StatusConflict,
	"KNOWLEDGE_RESULT_TOO_LARGE": http.StatusRequestEntityTooLarge,
	"KNOWLEDGE_UNAVAILABLE":      http.StatusBadGateway,
	"KNOWLEDGE_NOT_DEPLOYED":     http.StatusServiceUnavailable,
	"KNOWLEDGE_TIMEOUT":          http.StatusGatewayTimeout,
}

const (
	knowledgeInputLimit  = 24 << 10
	knowledgeOutputLimit = 64 << 10
)

// knowledgeKeys lists the keys each command owns besides version, command
// and command_id.
var knowledgeKeys = map[string][]string{
	"spaces":       {},
	"capabilities": {"space"},
	"search":       {"space", "query", "image_file_ids", "limit"},
	"ls":           {"space", "path", "cursor", "limit"},
	"tree":         {"space", "path", "cursor", "limit", "depth"},
	"find":         {"space", "path", "query", "cursor", "limit"},
	"grep":         {"space", "path", "query", "cursor", "limit"},
	"cat":          {"space", "path", "cursor", "limit"},
	"stat":         {"space", "path"},
	"diff":         {"space", "old_path", "new_path"},
	"open":         {"space", "node_id", "receipt_id"},
	"images":       {"space", "receipt_id", "cursor", "limit"},
	"image":        {"space", "receipt_id", "item_id"},
}

var (
	uuidRE    = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	receiptRE = regexp.MustCompile(`^kfs_[a-f0-9]{32}$`)
)

// FakeReceipt is the receipt id the canned results hand out.
const FakeReceipt = "kfs_0123456789abcdef0123456789abcdef"

type knowledgeRun struct {
	done bool
	body []byte
}

// KnowledgeExecutions is how many knowledge commands really ran (a
// repeated command_id served from the store does not count).
func (s *Server) KnowledgeExecutions() int { s.mu.Lock(); defer s.mu.Unlock(); return s.kExecutions }

// HoldKnowledge makes knowledge commands wait, once reserved (in flight),
// until release is called; held receives the command_id of each run as it
// starts waiting.
func (s *Server) HoldKnowledge() (held <-chan string, release func()) {
	ch := make(chan struct{})
	h := make(chan string, 16)
	s.mu.Lock()
	s.kGate, s.kHeld = ch, h
	s.mu.Unlock()
	var once sync.Once
	return h, func() {
		once.Do(func() {
			s.mu.Lock()
			if s.kGate == ch {
				s.kGate = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

type kReq struct {
	m       map[string]json.RawMessage
	command string
	id      string
}

func (q *kReq) str(k string) (string, bool, error) {
	raw, ok := q.m[k]
	if !ok {
		return "", false, nil
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", true, fmt.Errorf("%s must be a string", k)
	}
	return v, true, nil
}

func (q *kReq) int(k string) (int, bool, error) {
	raw, ok := q.m[k]
	if !ok {
		return 0, false, nil
	}
	var v int
	if json.Unmarshal(raw, &v) != nil {
		return 0, true, fmt.Errorf("%s must be an integer", k)
	}
	return v, true, nil
}

func canonicalKnowledgePath(p string) bool {
	if len(p) > 4096 || (p != "/knowledge" && !strings.HasPrefix(p, "/knowledge/")) {
		return false
	}
	for _, r := range p {
		if r < 0x21 || strings.ContainsRune(`%\?#`, r) {
			return false
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// validateKnowledge applies the server-side rules; "" means valid.
func validateKnowledge(q *kReq) string {
	owned := knowledgeKeys[q.command]
	allowed := map[string]bool{"version": true, "command": true, "command_id": true}
	for _, k := range owned {
		allowed[k] = true
	}
	for k := range q.m {
		if !allowed[k] {
			return fmt.Sprintf("%s does not take %s", q.command, k)
		}
	}
	bounded := func(k string, lo, hi int, required bool) string {
		v, has, err := q.str(k)
		switch {
		case err != nil:
			return err.Error()
		case !has && required:
			return k + " is required"
		case has && (utf8.RuneCountInString(v) < lo || utf8.RuneCountInString(v) > hi):
			return fmt.Sprintf("%s must be %d-%d characters", k, lo, hi)
		}
		return ""
	}
	if q.command != "spaces" {
		if e := bounded("space", 1, 255, true); e != "" {
			return e
		}
	}
	qmax := 4000
	if q.command == "find" {
		qmax = 240
	}
	if e := bounded("query", 1, qmax, q.command == "find" || q.command == "grep"); e != "" {
		return e
	}
	for _, k := range []string{"path", "old_path", "new_path"} {
		v, has, err := q.str(k)
		if err != nil {
			return err.Error()
		}
		needs := k == "path" && strings.Contains(" ls tree find grep cat stat ", " "+q.command+" ") ||
			k != "path" && q.command == "diff"
		if !has && needs {
			return k + " is required"
		}
		if has && !canonicalKnowledgePath(v) {
			return k + " must be a canonical /knowledge path"
		}
	}
	if e := bounded("cursor", 1, 8192, false); e != "" {
		return e
	}
	for _, b := range []struct {
		k      string
		lo, hi int
	}{{"limit", 1, 50}, {"depth", 1, 4}} {
		v, has, err := q.int(b.k)
		if err != nil {
			return err.Error()
		}
		if has && (v < b.lo || v > b.hi) {
			return fmt.Sprintf("%s must be %d-%d", b.k, b.lo, b.hi)
		}
	}
	node, hasNode, err := q.str("node_id")
	if err != nil {
		return err.Error()
	}
	if hasNode && !uuidRE.MatchString(node) {
		return "node_id must be a UUID"
	}
	receipt, hasReceipt, err := q.str("receipt_id")
	if err != nil {
		return err.Error()
	}
	if hasReceipt && !receiptRE.MatchString(receipt) {
		return "receipt_id must match ^kfs_[a-f0-9]{32}$"
	}
	if q.command == "open" && hasNode == hasReceipt {
		return "open needs exactly one of node_id and receipt_id"
	}
	if (q.command == "images" || q.command == "image") && !hasReceipt {
		return "receipt_id is required"
	}
	if q.command == "image" {
		if e := bounded("item_id", 1, 512, true); e != "" {
			return e
		}
	}
	if raw, ok := q.m["image_file_ids"]; ok {
		var ids []string
		if json.Unmarshal(raw, &ids) != nil || len(ids) > 4 {
			return "image_file_ids must be at most four UUIDs"
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if !uuidRE.MatchString(id) || seen[strings.ToLower(id)] {
				return "image_file_ids must be unique UUIDs"
			}
			seen[strings.ToLower(id)] = true
		}
	}
	if q.command == "search" {
		_, hasQ, _ := q.str("query")
		if _, hasImg := q.m["image_file_ids"]; !hasQ && !hasImg {
			return "search needs a query or images"
		}
	}
	return ""
}

func (s *Server) knowledgeError(w http.ResponseWriter, status int, code, msg string) {
	s.writeDetail(w, status, code, msg)
}

func (s *Server) knowledgeCommand(w http.ResponseWriter, r *http.Request, body []byte) {
	if len(body) > knowledgeInputLimit {
		s.knowledgeError(w, http.StatusRequestEntityTooLarge, "KNOWLEDGE_INPUT_TOO_LARGE", "knowledge command exceeds 24 KiB")
		return
	}
	q := &kReq{}
	if json.Unmarshal(body, &q.m) != nil || q.m == nil {
		s.knowledgeError(w, http.StatusUnprocessableEntity, "KNOWLEDGE_INVALID_COMMAND", "body must be a JSON object")
		return
	}
	var version int
	if json.Unmarshal(q.m["version"], &version) != nil || version != 1 {
		s.knowledgeError(w, http.StatusUnprocessableEntity, "KNOWLEDGE_INVALID_COMMAND", "version must be 1")
		return
	}
	cmd, _, _ := q.str("command")
	id, _, _ := q.str("command_id")
	q.command, q.id = cmd, strings.ToLower(id)
	if _, ok := knowledgeKeys[cmd]; !ok || !uuidRE.MatchString(id) {
		s.knowledgeError(w, http.StatusUnprocessableEntity, "KNOWLEDGE_INVALID_COMMAND", "unknown command or command_id not a UUID")
		return
	}
	if msg := validateKnowledge(q); msg != "" {
		s.knowledgeError(w, http.StatusUnprocessableEntity, "KNOWLEDGE_INVALID_COMMAND", msg)
		return
	}
	if code, ok := s.modeWithPrefix(KnowledgeErrorPrefix); ok {
		s.knowledgeError(w, KnowledgeErrors[code], code, "the fake stub was told to answer "+code)
		return
	}
	if s.mode("oversize-error") {
		s.knowledgeError(w, http.StatusBadGateway, "KNOWLEDGE_UPSTREAM_ERROR", strings.Repeat("e", knowledgeOutputLimit+10))
		return
	}
	// Reserve the id before any work; a reused id gets the stored result.
	s.mu.Lock()
	run, seen := s.knowledge[q.id]
	if !seen {
		run = &knowledgeRun{}
		s.knowledge[q.id] = run
	}
	gate, held := s.kGate, s.kHeld
	s.mu.Unlock()
	if seen {
		s.mu.Lock()
		done, stored := run.done, run.body
		s.mu.Unlock()
		if !done {
			s.knowledgeError(w, http.StatusConflict, "KNOWLEDGE_COMMAND_IN_FLIGHT", "a command with this command_id is still running")
			return
		}
		s.writeKnowledge(w, r, q, stored)
		return
	}
	if gate != nil {
		select {
		case held <- q.id:
		default:
		}
		select {
		case <-gate:
		case <-r.Context().Done():
		case <-s.closed:
		}
	}
	out := knowledgeResult(q)
	s.mu.Lock()
	s.kExecutions++
	run.done, run.body = true, out
	s.mu.Unlock()
	s.writeKnowledge(w, r, q, out)
}

// writeKnowledge sends a result envelope as the modes say.
func (s *Server) writeKnowledge(w http.ResponseWriter, r *http.Request, q *kReq, out []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	patch := func(k string, v any) {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(out, &m)
		m[k], _ = json.Marshal(v)
		out = orderedEnvelope(m)
	}
	switch {
	case s.mode("version2"):
		patch("version", 2)
	case s.mode("wrong-id"):
		patch("command_id", newUUID())
	case s.mode("wrong-command"):
		patch("command", "ls")
		if q.command == "ls" {
			patch("command", "tree")
		}
	case s.mode("status-error"):
		patch("status", "error")
	case s.mode("bad-json"):
		out = []byte(`{"version":1,"status":"ok",`)
	case s.mode("oversize"):
		out = padEnvelope(out, knowledgeOutputLimit+1)
	case s.mode("exact-limit"):
		out = padEnvelope(out, knowledgeOutputLimit)
	case s.mode("pretty"):
		out = prettyEnvelope(q)
	case s.mode("redirect"):
		h.Set("Location", baseURL(r)+recorderPrefix+"knowledge")
		h.Del("Content-Type")
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	case s.mode("slow"):
		s.mu.Lock()
		d := s.slowDelay
		s.mu.Unlock()
		if !s.wait(r, d) {
			return
		}
	case s.mode("cancel"):
		s.wait(r, -1)
		return
	case s.mode("truncated"):
		h.Set("Content-Length", strconv.Itoa(len(out)+100))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// wait holds for d (forever when d < 0) or until the client goes away or
// the fake is closed; it reports whether d passed.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	var tc <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-tc:
		return true
	case <-r.Context().Done():
	case <-s.closed:
	}
	return false
}

var envelopeOrder = []string{"version", "command_id", "command", "status", "code", "message", "data", "citations", "trace_id"}

// orderedEnvelope encodes m with the envelope's keys in the server's order.
func orderedEnvelope(m map[string]json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range envelopeOrder {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		if v, ok := m[k]; ok {
			b.Write(v)
		} else {
			b.WriteString("null")
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// padEnvelope grows the trace_id of out so the body is exactly n bytes.
func padEnvelope(out []byte, n int) []byte {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(out, &m)
	m["trace_id"] = json.RawMessage(`""`)
	base := len(orderedEnvelope(m))
	m["trace_id"], _ = json.Marshal(strings.Repeat("p", n-base))
	return orderedEnvelope(m)
}

func prettyEnvelope(q *kReq) []byte {
	return []byte("{\n  \"status\": \"ok\",\n  \"version\": 1,\n  \"command\": \"" + q.command +
		"\",\n  \"command_id\": \"" + q.id + "\",\n  \"data\": {\n    \"zeta\": \"Grüße, 日本語\",\n" +
		"    \"alpha\": \"<a & b>\",\n    \"escaped\": \"\\u00e9\\n\"\n  },\n  \"citations\": [ ],\n" +
		"  \"trace_id\": null,\n  \"code\": null,\n  \"message\": null\n}\n")
}

func citation() map[string]any {
	return map[string]any{
		"id": FakeReceipt, "control_space_id": "6f9619ff-8b86-4011-b42d-00c04fc964ff", "space_name": "Handbook",
		"node_id": "7d444840-9dc0-11d1-b245-5ffdce74fad2", "document_asset_id": "asset-1", "artifact_hash": "ah1",
		"document_version": 1, "parse_artifact_id": "pa-1", "document_title": "Handbook", "page_number": 3,
		"section_path": []string{"Intro"}, "start_offset": 0, "end_offset": 42,
	}
}

// knowledgeResult is the canned envelope for q.
func knowledgeResult(q *kReq) []byte {
	path, _, _ := q.str("path")
	var data any
	citations := []any{}
	switch q.command {
	case "spaces":
		data = map[string]any{"spaces": []any{map[string]any{"id": "6f9619ff-8b86-4011-b42d-00c04fc964ff",
			"name": "Handbook", "description": "Company handbook", "available": true}}}
	case "capabilities":
		data = map[string]any{"capabilities": map[string]any{"query": true}, "read_only": true,
			"search_mode": "fast", "paths": []string{"/knowledge"}}
	case "search":
		data = map[string]any{"items": []any{map[string]any{"rank": 1, "node_id": "7d444840-9dc0-11d1-b245-5ffdce74fad2",
			"receipt_id": FakeReceipt, "text": "Vacation is 25 days.", "text_truncated": false, "sources": []string{"Handbook"}}},
			"has_more": false, "ranking_scope": "this_space_only", "degradation_flags": []string{}}
		citations = append(citations, citation())
	case "open":
		data = map[string]any{"node_id": "7d444840-9dc0-11d1-b245-5ffdce74fad2", "receipt_id": FakeReceipt,
			"text": "Vacation is 25 days.", "text_truncated": false, "kind": "text"}
		citations = append(citations, citation())
	case "images":
		data = map[string]any{"items": []any{map[string]any{"id": "img-1", "modality": "image", "title": "Org chart",
			"caption": "The org chart", "ocrText": "CEO", "pageNumber": 2, "textPreview": "CEO", "parseElementId": "pe-1"}},
			"next_cursor": nil}
	case "image":
		item, _, _ := q.str("item_id")
		data = map[string]any{"image_queued_for_model": true, "item_id": item, "sha256": strings.Repeat("ab", 32)}
	case "diff":
		o, _, _ := q.str("old_path")
		n, _, _ := q.str("new_path")
		data = map[string]any{"oldPath": o, "newPath": n, "changes": []any{}, "truncated": false}
	case "stat":
		data = map[string]any{"path": path, "name": pathBase(path), "kind": "directory"}
	case "cat":
		data = map[string]any{"path": path, "text": "line 1\n", "nextCursor": nil, "truncated": false}
	case "tree":
		data = map[string]any{"root": path, "children": []any{map[string]any{"name": "handbook", "path": path + "/handbook",
			"kind": "directory", "children": []any{}}}, "nextCursor": nil, "truncated": false}
	default: // ls find grep
		data = map[string]any{"items": []any{map[string]any{"name": "handbook", "path": "/knowledge/handbook", "kind": "directory"}},
			"nextCursor": nil, "truncated": false}
	}
	m := map[string]json.RawMessage{}
	put := func(k string, v any) { m[k], _ = json.Marshal(v) }
	put("version", 1)
	put("command_id", q.id)
	put("command", q.command)
	put("status", "ok")
	put("data", data)
	put("citations", citations)
	put("trace_id", "trace-"+q.id[:8])
	return orderedEnvelope(m)
}

func pathBase(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
