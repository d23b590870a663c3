package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/metrics"
)

func TestRequestIDKeptWhenSane(t *testing.T) {
	made := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for in, keep := range map[string]bool{
		"abc-123":                true,
		"A.b_c:d-9":              true,
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
		"":                       false,
		"has space":              false,
		"new\nline":              false,
		`quote"`:                 false,
		"caf\xc3\xa9":            false,
	} {
		got := requestID(in)
		if keep && got != in || !keep && !made.MatchString(got) {
			t.Errorf("requestID(%q) = %q (keep %v)", in, got, keep)
		}
	}
	if requestID("") == requestID("") {
		t.Error("two made ids are equal")
	}
}

// TestEveryRouteIsLabelled: every route of the OpenAPI document (every
// route served), asked with every method it documents, is counted under
// its own pattern, and a path no route serves under "unmatched". A route
// the router serves but labels "unmatched" fails here.
func TestEveryRouteIsLabelled(t *testing.T) {
	s := newFuzzServer(t)
	s.Metrics = metrics.New()
	s.Info = func(context.Context) (any, error) { return map[string]string{}, nil }
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Paths) < 15 {
		t.Fatalf("the document lists %d paths", len(doc.Paths))
	}
	id := "0123456789abcdef"
	want := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			method = strings.ToUpper(method)
			req := httptest.NewRequest(method, strings.ReplaceAll(path, "{id}", id), strings.NewReader("{}"))
			if path == "/v1/jobs/{id}/stream" || path == "/mcp" {
				// A stream of a job that does not exist ends at once; MCP
				// answers its own errors. Both still count.
				req.Header.Set("Accept", "text/event-stream")
			}
			s.ServeHTTP(httptest.NewRecorder(), req)
			want[path] = true
		}
	}
	for _, p := range []string{"/nope", "/v1/nope", "/v1/jobs/" + id + "/nope"} {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	rec := httptest.NewRecorder()
	s.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`shellctl_http_requests_total\{[^}]*route="([^"]+)"`).FindAllStringSubmatch(rec.Body.String(), -1) {
		got[m[1]] = true
	}
	for p := range want {
		if !got[p] {
			t.Errorf("route %s is not counted under its pattern (labels seen: %v)", p, got)
		}
	}
	if !got["unmatched"] {
		t.Errorf("paths no route serves are not counted as unmatched (labels seen: %v)", got)
	}
	for l := range got {
		if l != "unmatched" && !want[l] {
			t.Errorf("label %q is no route of the document", l)
		}
	}
}

// TestEveryAnswerCarriesARequestID: 200s, 401s and 404s alike.
func TestEveryAnswerCarriesARequestID(t *testing.T) {
	s := &Server{Token: "t0ken"}
	for _, c := range []struct {
		path string
		auth bool
		code int
	}{{"/healthz", false, 200}, {"/v1/jobs", false, 401}, {"/metrics", false, 401}, {"/metrics", true, 404}, {"/v1/info", true, 404}, {"/nope", true, 404}} {
		req := httptest.NewRequest("GET", c.path, nil)
		if c.auth {
			req.Header.Set("Authorization", "Bearer t0ken")
		}
		req.Header.Set(RequestIDHeader, "rid-1")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != c.code || rec.Header().Get(RequestIDHeader) != "rid-1" {
			t.Errorf("GET %s: %d with id %q, want %d with rid-1", c.path, rec.Code, rec.Header().Get(RequestIDHeader), c.code)
		}
	}
}

// BenchmarkRequestOverhead is the cost of the id, the log line (discarded)
// and the metrics around a trivial route.
func BenchmarkRequestOverhead(b *testing.B) {
	for _, withObs := range []bool{false, true} {
		s := &Server{}
		name := "bare"
		if withObs {
			s.Metrics = metrics.New()
			s.Logger = slog.New(slog.DiscardHandler)
			name = "ids+log+metrics"
		}
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/healthz", nil)
			for b.Loop() {
				s.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
