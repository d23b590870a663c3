package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHostCheck(t *testing.T) {
	hc := HostCheck{
		AllowedHosts:   NormalizeHosts([]string{"Sandbox:5004", "", ".svc.cluster.local", "[fd00::7]"}),
		AllowedOrigins: NormalizeOrigins([]string{"https://OK.example/"}),
	}
	h := hc.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for _, tc := range []struct {
		host, origin string
		want         int
		code         string
	}{
		{"127.0.0.1:8765", "", 204, ""},
		{"[::1]:8765", "", 204, ""},
		{"[::1]", "", 204, ""},
		{"10.1.2.3", "", 204, ""},
		{"localhost", "", 204, ""},
		{"app.localhost:3000", "", 204, ""},
		{"sandbox", "", 204, ""},
		{"SANDBOX:1", "", 204, ""},
		{"shellctl-sandbox.ns.svc.cluster.local:5004", "", 204, ""},
		{"", "", 204, ""},
		{"127.0.0.1", "https://ok.example", 204, ""},
		{"evil.example", "", 403, "forbidden_host"},
		{"evil.example:8765", "", 403, "forbidden_host"},
		{"localhost.evil.example", "", 403, "forbidden_host"},
		{"svc.cluster.local.evil.example", "", 403, "forbidden_host"},
		{"sandbox.evil.example", "", 403, "forbidden_host"},
		{"127.0.0.1", "http://evil.example", 403, "forbidden_origin"},
		{"127.0.0.1", "null", 403, "forbidden_origin"},
		{"127.0.0.1", "https://ok.example.evil", 403, "forbidden_origin"},
	} {
		r := httptest.NewRequest("GET", "/v1/jobs", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want || (tc.code != "" && !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`)) {
			t.Errorf("Host %q Origin %q: %d %s, want %d %s", tc.host, tc.origin, w.Code, w.Body.String(), tc.want, tc.code)
		}
	}
}
