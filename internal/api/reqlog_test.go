package api

import (
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

func TestRoutePattern(t *testing.T) {
	id := "0123456789abcdef"
	for path, want := range map[string][2]string{
		"/healthz":                     {"/healthz", ""},
		"/metrics":                     {"/metrics", ""},
		"/v1/info":                     {"/v1/info", ""},
		"/v1/jobs":                     {"/v1/jobs", ""},
		"/v1/jobs/run":                 {"/v1/jobs/run", ""},
		"/v1/jobs/" + id:               {"/v1/jobs/{id}", id},
		"/v1/jobs/NOTANID":             {"/v1/jobs/{id}", ""},
		"/v1/jobs/" + id + "/wait":     {"/v1/jobs/{id}/wait", id},
		"/v1/jobs/" + id + "/log/tail": {"/v1/jobs/{id}/log/tail", id},
		"/v1/jobs/" + id + "/stream":   {"/v1/jobs/{id}/stream", id},
		"/v1/jobs/" + id + "/nope":     {"unmatched", ""},
		"/v1/snapshot/save":            {"/v1/snapshot/save", ""},
		"/etc/passwd":                  {"unmatched", ""},
	} {
		if p, j := routePattern(path); p != want[0] || j != want[1] {
			t.Errorf("routePattern(%q) = %q, %q; want %q, %q", path, p, j, want[0], want[1])
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
