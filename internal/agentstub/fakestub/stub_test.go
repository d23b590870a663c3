package fakestub

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func newServer(t *testing.T) (*Server, string) {
	s := New("tok")
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); srv.Close() })
	return s, srv.URL
}

func TestTokenCheckAndRecording(t *testing.T) {
	s, url := newServer(t)
	if code, body := do(t, "GET", url+"/agent-stub/config/prompt", "", ""); code != 401 ||
		body != `{"error":{"code":"unauthorized","message":"invalid or expired token"}}`+"\n" {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, _ := do(t, "GET", url+"/agent-stub/config/prompt", "tok", ""); code != 200 {
		t.Fatalf("token: %d", code)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Authorization != "" || reqs[1].Authorization != "Bearer tok" {
		t.Fatalf("requests = %+v", reqs)
	}
}

func TestStrictBodiesAndModes(t *testing.T) {
	s, url := newServer(t)
	if code, _ := do(t, "PUT", url+"/agent-stub/config/prompt", "tok", `{"promt":"x"}`); code != 400 {
		t.Fatalf("unknown field: %d", code)
	}
	s.Fail("PUT /config/prompt", ModeServerError)
	if code, _ := do(t, "PUT", url+"/agent-stub/config/prompt", "tok", `{"prompt":"x"}`); code != 500 {
		t.Fatalf("server error mode: %d", code)
	}
	s.Fail("PUT /config/prompt", ModeNone)
	s.SetReadOnly(true)
	if code, body := do(t, "PUT", url+"/agent-stub/config/prompt", "tok", `{"prompt":"x"}`); code != 403 ||
		!strings.Contains(body, `"config_read_only"`) {
		t.Fatalf("read-only: %d %s", code, body)
	}
	s.SetReadOnly(false)
	if code, body := do(t, "PUT", url+"/agent-stub/config/prompt", "tok", `{"prompt":"x"}`); code != 200 || s.Prompt() != "x" {
		t.Fatalf("after reset: %d %s", code, body)
	}
	s.Fail(AllRoutes, ModeRawError)
	if code, body := do(t, "GET", url+"/agent-stub/config/manifest", "tok", ""); code != 502 || !strings.HasPrefix(body, "<html>") {
		t.Fatalf("raw error: %d %.40s", code, body)
	}
}

// A stalled request is released when the client gives up or the stub closes.
func TestStallReleasedOnClose(t *testing.T) {
	s, url := newServer(t)
	s.Fail(AllRoutes, ModeStall)
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", url+"/agent-stub/config/prompt", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-done:
		t.Fatal("stalled request answered")
	case <-time.After(200 * time.Millisecond):
	}
	s.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stall not released by Close")
	}
}

func TestSignedURLsAreOneTimeAndKindBound(t *testing.T) {
	s, url := newServer(t)
	s.SetFile("f", []byte("data"))
	code, body := do(t, "POST", url+"/agent-stub/files/download-request", "tok",
		`{"config":{"kind":"file","name":"f"},"for_frontend":false}`)
	if code != 200 {
		t.Fatalf("download-request: %d %s", code, body)
	}
	dl := body[strings.Index(body, url):]
	dl = dl[:strings.Index(dl, `"`)]
	// The download token does not work as an upload token.
	if code, _ := do(t, "POST", strings.Replace(dl, "/download/", "/upload/", 1), "", ""); code != 403 {
		t.Fatalf("download token used for upload: %d", code)
	}
	if code, got := do(t, "GET", dl, "", ""); code != 200 || got != "data" {
		t.Fatalf("download: %d %q", code, got)
	}
	if code, _ := do(t, "GET", dl, "", ""); code != 403 {
		t.Fatalf("second use: %d", code)
	}
}
