package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/client"
)

// TestFollowFallsBackToWait: a server without the stream route (404
// not_found) is followed by wait, from the offset it answers.
func TestFollowFallsBackToWait(t *testing.T) {
	var waits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/stream"):
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no route"}}`))
		case strings.HasSuffix(r.URL.Path, "/wait"):
			waits++
			if waits == 1 {
				w.Write([]byte(`{"job_id":"0123456789abcdef","done":false,"status":"running","exit_code":null,"output_path":"","output":"hel","offset":3,"truncated":false}`))
				return
			}
			w.Write([]byte(`{"job_id":"0123456789abcdef","done":true,"status":"exited","exit_code":3,"output_path":"","output":"lo\n","offset":6,"truncated":false}`))
		default:
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	var out strings.Builder
	f := &follower{c: &client.Client{BaseURL: srv.URL}, id: "0123456789abcdef", out: &sink{w: &out}}
	end, err := f.run(context.Background())
	if err != nil || out.String() != "hello\n" || end.ExitCode == nil || *end.ExitCode != 3 || waits != 2 {
		t.Fatalf("follow: %+v %v, output %q after %d waits", end, err, out.String(), waits)
	}
}
