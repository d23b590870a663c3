package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The image's HEALTHCHECK: `shellctl healthcheck HOST:PORT` exits 0 on a
// 200 {"status":"ok"} from /healthz, sent with the address as its Host
// and no token; 1 on anything else, a server that is not there included.
func TestHealthcheckVerb(t *testing.T) {
	var mu sync.Mutex
	var hosts, auths, paths []string
	status, body := http.StatusOK, `{"status":"ok"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts, auths, paths = append(hosts, r.Host), append(auths, r.Header.Get("Authorization")), append(paths, r.Method+" "+r.URL.Path)
		st, b := status, body
		mu.Unlock()
		w.WriteHeader(st)
		w.Write([]byte(b))
	}))
	defer srv.Close()
	t.Setenv("SHELLCTL_AUTH_TOKEN", "not-for-healthz")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	addr := srv.Listener.Addr().String()
	if rc := run([]string{"healthcheck", addr}); rc != 0 {
		t.Fatalf("healthcheck of a healthy server: rc %d, want 0", rc)
	}
	if len(hosts) != 1 || hosts[0] != addr || auths[0] != "" || paths[0] != "GET /healthz" {
		t.Errorf("requests: hosts %q auth %q paths %q; want one GET /healthz with Host %s and no token", hosts, auths, paths, addr)
	}
	for _, c := range []struct {
		status int
		body   string
	}{{http.StatusServiceUnavailable, `{"status":"ok"}`}, {http.StatusOK, `{"status":"starting"}`}, {http.StatusOK, "not json"}} {
		mu.Lock()
		status, body = c.status, c.body
		mu.Unlock()
		if rc := run([]string{"healthcheck", addr}); rc != 1 {
			t.Errorf("healthcheck of a server answering %d %q: rc %d, want 1", c.status, c.body, rc)
		}
	}
	// Nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	if rc := run([]string{"healthcheck", "--timeout", "2s", gone}); rc != 1 {
		t.Errorf("healthcheck of no server: rc %d, want 1", rc)
	}
	// Not an address, and a client flag that means nothing here: usage.
	// (The client flags are global: leave --server as it was.)
	fl := theClientFlags.flagSet().Lookup("server")
	was := fl.Value.String()
	t.Cleanup(func() { fl.Value.Set(was); fl.Changed = false })
	for _, args := range [][]string{{"healthcheck", "no-port"}, {"healthcheck", "--server", addr, addr}} {
		if rc := run(args); rc != exitClient {
			t.Errorf("%s: rc %d, want %d (usage)", strings.Join(args, " "), rc, exitClient)
		}
	}
}
