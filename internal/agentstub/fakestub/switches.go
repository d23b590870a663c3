package fakestub

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Switches of SetMode: the failure modes of agent-cli-backend.md, by name.
// Knowledge and Home Snapshot modes apply to their routes; "redirect" to
// both. HostilePrefix+name serves one hostile Home archive.
var switchNames = map[string]string{
	// drive
	"drive-gone": "404 for every /drive/* route, as the newest stub",
	// file plane
	"empty-download-url":   `download-request answers "download_url": ""`,
	"empty-filename":       `download-request answers "filename": ""`,
	"upload-no-reference":  "signed uploads answer without reference",
	"upload-bad-reference": "signed uploads answer a reference that is not canonical",
	"upload-no-id":         "signed uploads answer without id",
	// envelope
	"error-envelope": `errors of the new routes as {"error":{…}} instead of {"detail":…}`,
	// knowledge
	"version2":       "knowledge: envelope version 2",
	"wrong-id":       "knowledge: another command_id",
	"wrong-command":  "knowledge: another command",
	"status-error":   `knowledge: status "error" with 200`,
	"oversize":       "knowledge: a 200 body of 65 537 bytes",
	"exact-limit":    "knowledge: a 200 body of exactly 65 536 bytes",
	"oversize-error": "knowledge: an error body over 64 KiB",
	"truncated":      "knowledge: Content-Length larger than the bytes sent",
	"bad-json":       "knowledge: a body that is not JSON",
	"pretty":         "knowledge: indented JSON with non-ASCII text and a fixed key order",
	"redirect":       "knowledge and Home Snapshot: 307 to a recorder",
	"slow":           "knowledge: headers delayed (SetSlowDelay, 70 s by default)",
	"cancel":         "knowledge: hold until the client disconnects",
	// home snapshot
	"missing":           "home: GET answers 404",
	"store-fail":        "home: 502 at once",
	"store-fail-mid":    "home: 502 after part of the PUT body was read",
	"unconfigured":      "home: 503, gateway not configured",
	"400":               "home: 400 with a plain body",
	"500":               "home: 500 with a plain body",
	"stall":             "home: headers sent (GET) or nothing read (PUT), then nothing until the client cancels",
	"truncate-download": "home: the GET stream cut mid-body",
	"tail-cut":          "home: the last byte of the archive dropped",
	"not-zstd":          "home: a gzip stream",
}

// HostilePrefix + a name of HostileArchives is a mode.
const HostilePrefix = "hostile:"

// Knowledge error switches: "knowledge-error:CODE" answers the status of
// CODE (KnowledgeErrors) with {"detail":{"code":CODE,"message":…}}.
const KnowledgeErrorPrefix = "knowledge-error:"

// ValidMode reports whether name is a switch of SetMode.
func ValidMode(name string) bool {
	if _, ok := switchNames[name]; ok {
		return true
	}
	if h, ok := strings.CutPrefix(name, HostilePrefix); ok {
		_, ok := hostileBuilders[h]
		return ok
	}
	if c, ok := strings.CutPrefix(name, KnowledgeErrorPrefix); ok {
		_, ok := KnowledgeErrors[c]
		return ok
	}
	return false
}

// ModeNames lists the switch names, for the binary's help.
func ModeNames() []string {
	var out []string
	for n := range switchNames {
		out = append(out, n)
	}
	for h := range hostileBuilders {
		out = append(out, HostilePrefix+h)
	}
	for c := range KnowledgeErrors {
		out = append(out, KnowledgeErrorPrefix+c)
	}
	sort.Strings(out)
	return out
}

// SetMode turns on exactly the named switches (none: all off).
func (s *Server) SetMode(names ...string) error {
	m := map[string]bool{}
	for _, n := range names {
		if !ValidMode(n) {
			return fmt.Errorf("unknown fake stub mode %q (known: %s)", n, strings.Join(ModeNames(), ", "))
		}
		m[n] = true
	}
	s.mu.Lock()
	s.modes = m
	s.errorEnvelope = m["error-envelope"]
	s.mu.Unlock()
	return nil
}

func (s *Server) mode(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modes[name]
}

// modeWithPrefix returns the rest of the first switch that starts with p.
func (s *Server) modeWithPrefix(p string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.modes {
		if rest, ok := strings.CutPrefix(n, p); ok {
			return rest, true
		}
	}
	return "", false
}

// SetSlowDelay sets how long the "slow" mode holds the knowledge headers.
func (s *Server) SetSlowDelay(d time.Duration) { s.mu.Lock(); s.slowDelay = d; s.mu.Unlock() }
