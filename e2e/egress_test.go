package e2e

// Integration tests of the egress credential proxy (issue 32,
// shared/spec/egress.md): real clients (curl, wget, Python's urllib, git)
// in real jobs, through the real proxy, to an HTTPS upstream on loopback
// whose certificate a test CA signed. The upstream sees the value; the
// job, its output, the state dir and the server's logs never do.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// egValue is the credential's value: it must reach the upstream and
// nothing else.
const (
	egValue    = "ghp_egressE2Evalue7f3a91c2"
	egSysValue = "ghp_systemTierValue4be81d"
	egOther    = "sk-other-credential-22c9e1"
)

// egUpstream is an HTTPS server on loopback with a certificate of a test
// CA, for the names the hosts file maps to 127.0.0.1. It answers every
// request with what it saw (headers and query) as JSON, and serves a git
// smart-HTTP ref advertisement.
type egUpstream struct {
	// release ends the /sse answer's wait (closed by the test).
	release chan struct{}
	srv     *httptest.Server
	port    string
	caFile  string
	mu      sync.Mutex
	seen    []egSeen
}

type egSeen struct {
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	Query  string      `json:"query"`
	Header http.Header `json:"header"`
}

var egNames = []string{"api.github.com", "raw.githubusercontent.com", "other.test", "plain.test"}

func egStartUpstream(t *testing.T) *egUpstream {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: egNames, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("169.254.169.254")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	u := &egUpstream{caFile: filepath.Join(dir, "upstream-ca.pem"), release: make(chan struct{})}
	if err := os.WriteFile(u.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

func (u *egUpstream) serve(w http.ResponseWriter, r *http.Request) {
	s := egSeen{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone()}
	u.mu.Lock()
	u.seen = append(u.seen, s)
	u.mu.Unlock()
	if r.URL.Path == "/sse" {
		// An event stream: the first event, then a wait for the test.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one "+r.Header.Get("Authorization")+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-u.release:
		case <-time.After(30 * time.Second):
		}
		io.WriteString(w, "data: two\n\n")
		return
	}
	if strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack" {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
		sha := strings.Repeat("1a", 20)
		io.WriteString(w, pkt("# service=git-upload-pack\n")+"0000"+
			pkt(sha+" HEAD\x00symref=HEAD:refs/heads/main agent=e2e\n")+pkt(sha+" refs/heads/main\n")+"0000")
		return
	}
	// The answer echoes what came: an upstream that reflects the
	// request's headers (also in a response header).
	w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s)
}

// saw returns the requests the upstream saw whose path is path.
func (u *egUpstream) saw(path string) []egSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []egSeen
	for _, s := range u.seen {
		if s.Path == path {
			out = append(out, s)
		}
	}
	return out
}

// egServer starts a server with the proxy, the upstream's CA and names,
// and --egress-allow-private (the upstream is on loopback).
func egServer(t *testing.T, u *egUpstream, extra ...string) (*server, string) {
	t.Helper()
	return egServerWith(t, u, append([]string{"--egress-allow-private"}, extra...)...)
}

// egServerWith is egServer without --egress-allow-private.
func egServerWith(t *testing.T, u *egUpstream, extra ...string) (*server, string) {
	t.Helper()
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 "+strings.Join(egNames, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	caOut := filepath.Join(dir, "ca-out")
	args := append([]string{"-v", "--egress-proxy", "127.0.0.1:0", "--egress-ca-out", caOut,
		"--egress-upstream-ca", u.caFile, "--egress-hosts", hosts}, extra...)
	s := startServer(t, serverOpts{args: args})
	// Tunnelled hosts are verified by the job itself: it gets the
	// upstream's CA in its HOME.
	b, err := os.ReadFile(u.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Home, "upstream-ca.pem"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return s, caOut
}

// egDo sends method path with body (raw bytes) and returns the status and
// answer.
func (s *server) egDo(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// egCred is one credential in Dify's newest shape.
func egCred(provider, name, value, header, expr string, domains ...string) string {
	d, _ := json.Marshal(domains)
	return fmt.Sprintf(`{"provider":%q,"name":%q,"value":%q,"inject":{"type":"http-header","http_header":{"name":%q,"expr":%q,"domains":%s}}}`,
		provider, name, value, header, expr, d)
}

func (s *server) egPrepare(t *testing.T, session string, creds ...string) {
	t.Helper()
	code, body := s.egDo(t, http.MethodPut, "/v1/prepare", fmt.Sprintf(`{"session_id":%q,"credentials":[%s]}`, session, strings.Join(creds, ",")))
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`"registered":%d`, len(creds))) {
		t.Fatalf("prepare %s: %d %s", session, code, body)
	}
}

// egNoValue fails when any of the values is in the state dir, the
// server's log, or the directories a job reads and writes.
func egNoValue(t *testing.T, s *server, dirs []string, values ...string) {
	t.Helper()
	for _, root := range append([]string{s.StateDir, s.Home}, dirs...) {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, v := range values {
				if strings.Contains(string(b), v) {
					t.Errorf("the value of a credential is in %s", p)
				}
			}
			return nil
		})
	}
	log := strings.Join(s.allStderr(), "\n")
	if len(log) == 0 {
		t.Error("the server logged nothing: the log check checks nothing")
	}
	for _, v := range values {
		if strings.Contains(log, v) {
			t.Errorf("the value of a credential is in the server's log")
		}
	}
}

// TestEgressPrepareDifyShape sends the spec's example byte for byte, then
// both of Dify's shapes, and the refusals of the spec.
func TestEgressPrepareDifyShape(t *testing.T) {
	u := egStartUpstream(t)
	s, _ := egServer(t, u)
	example := `{"session_id": "s-42",
 "credentials": [
   {"provider": "github", "name": "token", "value": "ghp_…",
    "inject": {"type": "http-header",
               "config": {"name": "Authorization", "expr": "Bearer {{.Value}}",
                          "domains": ["api.github.com", "*.githubusercontent.com"]}}}]}`
	if code, body := s.egDo(t, http.MethodPut, "/v1/prepare", example); code != 200 || strings.TrimSpace(body) != `{"registered":1}` {
		t.Fatalf("the spec's example: %d %s", code, body)
	}
	newest := `{"sandbox_id":"sb-1","credentials":[{"provider":"openai","name":"key","value":"sk-x","env_name":"OPENAI_API_KEY","inject":{"type":"http-header","http_header":{"name":"Authorization","expr":"Bearer {{.Value}}","domains":["api.openai.com"]}}}]}`
	if code, body := s.egDo(t, http.MethodPut, "/v1/prepare", newest); code != 200 {
		t.Fatalf("inject.http_header with sandbox_id: %d %s", code, body)
	}
	cred := egCred("p", "n", "v", "X-Key", "{{.Value}}", "a.test")
	for _, c := range []struct {
		name, body, code string
		status           int
	}{
		{"no credentials", `{"session_id":"s","credentials":[]}`, "invalid_request", 400},
		{"not JSON", `{"session_id":`, "invalid_request", 400},
		{"no session", `{"credentials":[` + cred + `]}`, "validation_error", 422},
		{"bad session", `{"session_id":"a/b","credentials":[` + cred + `]}`, "validation_error", 422},
		{"other type", `{"session_id":"s","credentials":[{"provider":"p","name":"n","value":"v","inject":{"type":"query","config":{"name":"k","domains":["a.test"]}}}]}`, "validation_error", 422},
		{"template calls a function", `{"session_id":"s","credentials":[` + egCred("p", "n", "v", "X-Key", `{{printf "%s" .Value}}`, "a.test") + `]}`, "validation_error", 422},
		{"template does not parse", `{"session_id":"s","credentials":[` + egCred("p", "n", "v", "X-Key", `{{.Value`, "a.test") + `]}`, "validation_error", 422},
		{"no domains", `{"session_id":"s","credentials":[` + egCred("p", "n", "v", "X-Key", "") + `]}`, "validation_error", 422},
		{"empty value", `{"session_id":"s","credentials":[` + egCred("p", "n", "", "X-Key", "", "a.test") + `]}`, "validation_error", 422},
		{"bad header", `{"session_id":"s","credentials":[` + egCred("p", "n", "v", "X Key", "", "a.test") + `]}`, "validation_error", 422},
		{"ambiguous", `{"session_id":"s","credentials":[` + egCred("p", "a", "v", "Authorization", "", "*.example.com") + "," + egCred("p", "b", "w", "authorization", "", "api.example.com") + `]}`, "ambiguous_binding", 422},
	} {
		code, body := s.egDo(t, http.MethodPut, "/v1/prepare", c.body)
		if code != c.status || !strings.Contains(body, `"code":"`+c.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.name, code, body, c.status, c.code)
		}
		if strings.Contains(body, `"v"`) && c.status != 400 {
			t.Errorf("%s: the answer holds a value: %s", c.name, body)
		}
	}
	if code, body := s.egDo(t, http.MethodDelete, "/v1/prepare/s-42", ""); code != 200 || strings.TrimSpace(body) != `{"removed":1}` {
		t.Errorf("DELETE: %d %s", code, body)
	}
	if code, body := s.egDo(t, http.MethodDelete, "/v1/prepare/s-42", ""); code != 404 || !strings.Contains(body, "not_found") {
		t.Errorf("DELETE again: %d %s", code, body)
	}
	off := startServer(t, serverOpts{})
	if code, body := off.egDo(t, http.MethodPut, "/v1/prepare", example); code != 409 || !strings.Contains(body, "egressproxy_disabled") {
		t.Errorf("without --egress-proxy: %d %s", code, body)
	}
}

// egClients is a job script that calls url with every client at hand,
// each line of output tagged with the client.
const egClients = `
set +e
echo "curl: $(curl -sS -H 'X-Query-Echo: 1' "$URL/curl?k=v")"
echo "hdr: $(curl -sS -o /dev/null -D - "$URL/hdr" | grep -i '^x-echo-authorization' | tr -d '\r')"
echo "python: $(python3 -c 'import os,urllib.request;print(urllib.request.urlopen(os.environ["URL"]+"/python").read().decode())' 2>&1)"
if command -v wget >/dev/null; then echo "wget: $(wget -q --ca-certificate="$SSL_CERT_FILE" -O - "$URL/wget" 2>&1)"; fi
echo "git: $(git ls-remote "$URL/repo.git" 2>&1)"
echo "env: $(env | grep -c 'ghp_')"
echo "environ: $(cat /proc/self/environ | tr '\0' '\n' | grep -c 'ghp_') of $(cat /proc/self/environ | tr '\0' '\n' | grep -c '^SECRET_GITHUB_TOKEN=__secret:github/token__$')"
echo "ph: $SECRET_GITHUB_TOKEN"
`

// TestEgressRealClientsGetTheValueOnlyUpstream: curl, Python's urllib,
// wget and git, in a job of the session, reach the upstream with the
// value in the header; the job sees only the placeholder, also in the
// answers (the upstream echoes the header back), and the value is in no
// file, log or output.
func TestEgressRealClientsGetTheValueOnlyUpstream(t *testing.T) {
	parallel(t)
	u := egStartUpstream(t)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			s, caOut := egServer(t, u, "--log-format", format)
			s.egPrepare(t, "s-1", egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com", "*.githubusercontent.com"))
			url := "https://api.github.com:" + u.port
			res, out := s.runDone(t, client.RunRequest{Script: egClients, Mode: "stdio", SessionID: "s-1",
				Env: map[string]string{"URL": url}})
			if code(res) != 0 {
				t.Fatalf("exit %d: %s", code(res), out)
			}
			for _, path := range []string{"/curl", "/python", "/wget", "/repo.git/info/refs"} {
				seen := u.saw(path)
				if path == "/wget" && len(seen) == 0 {
					if _, err := exec.LookPath("wget"); err != nil {
						continue
					}
				}
				if len(seen) == 0 {
					t.Errorf("%s: the upstream saw no request; job output:\n%s", path, out)
					continue
				}
				if got := seen[len(seen)-1].Header.Get("Authorization"); got != "Bearer "+egValue {
					t.Errorf("%s: the upstream saw Authorization %q", path, got)
				}
			}
			for _, want := range []string{"curl: {", "python: {", "Bearer __secret:github/token__", "refs/heads/main", "hdr: X-Echo-Authorization: Bearer __secret:github/token__", "env: 0", "environ: 0 of 1", "ph: __secret:github/token__"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, egValue) {
				t.Errorf("the job's output holds the value:\n%s", out)
			}
			egNoValue(t, s, []string{caOut}, egValue)
			u.mu.Lock()
			u.seen = nil
			u.mu.Unlock()
		})
	}
}

// TestEgressPlaceholderRules: a placeholder toward a host no credential
// matches is tunnelled as its own text; one of a credential bound
// elsewhere, inside an intercepted host, is refused 403
// domain_not_allowed; one in plain HTTP is refused 403
// plaintext_not_allowed; in the query it is replaced for the bound host.
func TestEgressPlaceholderRules(t *testing.T) {
	u := egStartUpstream(t)
	s, caOut := egServer(t, u)
	s.egPrepare(t, "s-2",
		egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com"),
		egCred("other", "key", egOther, "X-Other-Key", "{{.Value}}", "other.test"))
	script := `
set +e
echo "tunnel: $(curl -sS --cacert ~/upstream-ca.pem -H "X-Carry: $SECRET_GITHUB_TOKEN" "https://plain.test:$PORT/tunnel")"
echo "misbound: $(curl -sS -w ' %{http_code}' -H "X-Carry: $SECRET_OTHER_KEY" "https://api.github.com:$PORT/misbound")"
echo "plaintext: $(curl -sS -w ' %{http_code}' -H "X-Carry: $SECRET_GITHUB_TOKEN" "http://plain.test:$PORT/plaintext")"
echo "query: $(curl -sS "https://api.github.com:$PORT/query?token=$SECRET_GITHUB_TOKEN")"
echo "other: $(curl -sS "https://other.test:$PORT/other")"
`
	res, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", SessionID: "s-2", Env: map[string]string{"PORT": u.port}})
	if code(res) != 0 {
		t.Fatalf("exit %d: %s", code(res), out)
	}
	if seen := u.saw("/tunnel"); len(seen) != 1 || seen[0].Header.Get("X-Carry") != "__secret:github/token__" || seen[0].Header.Get("Authorization") != "" {
		t.Errorf("tunnelled: the upstream saw %+v", seen)
	}
	if len(u.saw("/misbound")) != 0 || !strings.Contains(out, `"error":"domain_not_allowed","provider":"other","name":"key","domain":"api.github.com"`) || !strings.Contains(out, " 403") {
		t.Errorf("misbound placeholder not refused:\n%s", out)
	}
	if len(u.saw("/plaintext")) != 0 || !strings.Contains(out, `plaintext: {"error":"plaintext_not_allowed"`) {
		t.Errorf("plain HTTP placeholder not refused:\n%s", out)
	}
	if seen := u.saw("/query"); len(seen) != 1 || seen[0].Query != "token="+egValue {
		t.Errorf("query: the upstream saw %+v", seen)
	}
	if seen := u.saw("/other"); len(seen) != 1 || seen[0].Header.Get("X-Other-Key") != egOther {
		t.Errorf("other: the upstream saw %+v", seen)
	}
	if strings.Contains(out, egValue) || strings.Contains(out, egOther) {
		t.Errorf("a value reached the job:\n%s", out)
	}
	egNoValue(t, s, []string{caOut}, egValue, egOther)
}

// TestEgressTiersAndReplace: the session tier beats the system tier
// (--egress-credentials-file), a job without a session gets the system
// tier, and a second PUT replaces the session's credentials.
func TestEgressTiersAndReplace(t *testing.T) {
	u := egStartUpstream(t)
	file := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(file, []byte("["+egCred("github", "token", egSysValue, "Authorization", "Bearer {{.Value}}", "api.github.com")+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, caOut := egServer(t, u, "--egress-credentials-file", file)
	s.egPrepare(t, "s-3", egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com"))
	call := func(session, path string) string {
		res, out := s.runDone(t, client.RunRequest{Script: `curl -sS -o /dev/null "https://api.github.com:$PORT` + path + `"; echo "vars: $(env | grep '^SECRET_' | sort | tr '\n' ' ')"`,
			Mode: "stdio", SessionID: session, Env: map[string]string{"PORT": u.port}})
		if code(res) != 0 {
			t.Fatalf("exit %d: %s", code(res), out)
		}
		seen := u.saw(path)
		if len(seen) != 1 {
			t.Fatalf("%s: the upstream saw %d requests; output %s", path, len(seen), out)
		}
		return seen[0].Header.Get("Authorization") + " | " + out
	}
	if got := call("s-3", "/session"); !strings.HasPrefix(got, "Bearer "+egValue+" |") {
		t.Errorf("session tier did not win: %s", got)
	}
	if got := call("", "/none"); !strings.HasPrefix(got, "Bearer "+egSysValue+" |") {
		t.Errorf("a job without a session did not get the system tier: %s", got)
	}
	// A re-PUT replaces: github/token leaves the session, other/key comes.
	s.egPrepare(t, "s-3", egCred("other", "key", egOther, "X-Other-Key", "{{.Value}}", "other.test"))
	got := call("s-3", "/replaced")
	if !strings.HasPrefix(got, "Bearer "+egSysValue+" |") || !strings.Contains(got, "SECRET_OTHER_KEY=__secret:other/key__") {
		t.Errorf("after a re-PUT: %s", got)
	}
	egNoValue(t, s, []string{caOut}, egValue, egSysValue, egOther)
}

// TestEgressProxyRefusesPrivateAndOwnListeners: without
// --egress-allow-private the metadata address is refused; with it, the
// server's own API and metrics listeners still are, by CONNECT and by an
// absolute URI, so the proxy is no way around the API wall. A key of
// another session is refused 407.
func TestEgressProxyRefusesPrivateAndOwnListeners(t *testing.T) {
	u := egStartUpstream(t)
	s, _ := egServerWith(t, u)
	script := `
set +e
echo "meta-connect: $(curl -sS -w ' %{http_code}' https://169.254.169.254/latest/meta-data/ 2>&1)"
echo "meta-plain: $(curl -sS -w ' %{http_code}' http://169.254.169.254/latest/meta-data/ 2>&1)"
echo "loopback: $(curl -sS -w ' %{http_code}' "https://api.github.com:$PORT/x" 2>&1)"
`
	_, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Env: map[string]string{"PORT": u.port}})
	for _, want := range []string{"meta-plain: {\"error\":\"address_not_allowed\"", "loopback:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "meta-connect:") || strings.Contains(out, "meta-connect: {") || !strings.Contains(out, "403") {
		t.Errorf("CONNECT to the metadata address not refused with 403:\n%s", out)
	}
	if len(u.saw("/x")) != 0 {
		t.Errorf("a loopback upstream was reached without --egress-allow-private")
	}

	p := egStartUpstream(t)
	s2, _ := egServer(t, p, "--metrics-listen", "127.0.0.1:0")
	api := strings.TrimPrefix(s2.URL, "http://")
	metrics := s2.MetricsAddrFromLog(t)
	script = fmt.Sprintf(`
set +e
P="$HTTP_PROXY"
echo "api-plain: $(curl -sS --noproxy '' -x "$P" -w ' %%{http_code}' http://%[1]s/v1/jobs 2>&1)"
echo "api-connect: $(curl -sS --noproxy '' -x "$P" -p -w ' %%{http_code}' http://%[1]s/v1/jobs 2>&1)"
echo "api-name: $(curl -sS --noproxy '' -x "$P" -w ' %%{http_code}' http://localhost:%[3]s/v1/jobs 2>&1)"
echo "metrics: $(curl -sS --noproxy '' -x "$P" -w ' %%{http_code}' http://%[2]s/metrics 2>&1)"
echo "upstream: $(curl -sS --cacert ~/upstream-ca.pem -o /dev/null -w '%%{http_code}' "https://api.github.com:$PORT/ok" 2>&1)"
echo "other-session: $(curl -sS --noproxy '' -x "$(echo "$P" | sed 's#//_:#//s-9:#')" -w ' %%{http_code}' -o /dev/null "https://api.github.com:$PORT/y" 2>&1)"
`, api, metrics, api[strings.LastIndex(api, ":")+1:])
	_, out = s2.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Env: map[string]string{"PORT": p.port}})
	for _, want := range []string{
		"api-plain: {\"error\":\"address_not_allowed\"",
		"api-name: {\"error\":\"address_not_allowed\"",
		"metrics: {\"error\":\"address_not_allowed\"",
		"upstream: 200",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"jobs"`) || strings.Contains(out, "shellctl_") || strings.Contains(out, "forbidden_from_job") {
		t.Errorf("a job reached the API or metrics through the proxy:\n%s", out)
	}
	if !strings.Contains(out, "api-connect:") || !strings.Contains(out, "403") {
		t.Errorf("CONNECT to the API not refused:\n%s", out)
	}
	if !strings.Contains(out, "other-session:") || !strings.Contains(out, "407") {
		t.Errorf("another session's key was not refused 407:\n%s", out)
	}
}

// MetricsAddrFromLog is the --metrics-listen address the server printed.
func (s *server) MetricsAddrFromLog(t *testing.T) string {
	t.Helper()
	line := s.waitStderr(t, "the metrics address", func(l string) bool { return strings.Contains(l, "metrics without auth on http://") })
	a := line[strings.Index(line, "http://")+len("http://"):]
	return strings.TrimSuffix(strings.Fields(a)[0], "/metrics")
}

// TestEgressProxyOnly: under --egress=proxy-only a job's direct connection
// to the upstream fails (Landlock refuses the connect) while the proxied
// one works; with --egress-allow-domains a host not listed gets 403 from
// the proxy.
func TestEgressProxyOnly(t *testing.T) {
	u := egStartUpstream(t)
	s, _ := egServer(t, u, "--egress=proxy-only", "--egress-allow-domains", "api.github.com,*.githubusercontent.com")
	s.egPrepare(t, "s-5", egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com"))
	script := `
set +e
curl -sS --noproxy '*' --cacert ~/upstream-ca.pem -o /dev/null "https://127.0.0.1:$PORT/direct"; echo "direct: $?"
echo "proxied: $(curl -sS -o /dev/null -w '%{http_code}' "https://api.github.com:$PORT/proxied")"
echo "tunnelled: $(curl -sS --cacert ~/upstream-ca.pem -o /dev/null -w '%{http_code}' "https://raw.githubusercontent.com:$PORT/raw")"
echo "refused: $(curl -sS -w ' %{http_code}' "http://other.test:$PORT/refused" 2>&1)"
curl -sS --cacert ~/upstream-ca.pem -o /dev/null "https://other.test:$PORT/refused2" 2>&1 | head -c 200; echo
`
	res, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", SessionID: "s-5", Env: map[string]string{"PORT": u.port}})
	if code(res) != 0 {
		t.Fatalf("exit %d: %s", code(res), out)
	}
	for _, want := range []string{"proxied: 200", "tunnelled: 200", `refused: {"error":"domain_not_allowed"`, "CONNECT tunnel failed, response 403"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "direct: 0") || len(u.saw("/direct")) != 0 {
		t.Errorf("a direct connection got out under proxy-only:\n%s", out)
	}
	if len(u.saw("/refused")) != 0 || len(u.saw("/refused2")) != 0 {
		t.Errorf("a host not in --egress-allow-domains was reached")
	}
	if seen := u.saw("/proxied"); len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+egValue {
		t.Errorf("proxied: the upstream saw %+v", seen)
	}
}

// TestEgressRecordInfoMetricsCLI: shellctl prepare --session and shellctl
// run --session; the record names the credentials a job could use (never
// a value); GET /v1/info shows the proxy, its policy and the CA's
// fingerprint (that of the certificate jobs read); the metrics count the
// decisions.
func TestEgressRecordInfoMetricsCLI(t *testing.T) {
	u := egStartUpstream(t)
	s, caOut := egServer(t, u)
	dir := t.TempDir()
	file := filepath.Join(dir, "creds.json")
	if err := os.WriteFile(file, []byte(`{"credentials":[`+egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, s, dir, "", "prepare", "--session", "s-cli", "--from-file", file); r.code != 0 || !strings.Contains(r.stdout, "registered 1") {
		t.Fatalf("shellctl prepare: %s", r)
	}
	r := cli(t, s, dir, "", "run", "--mode", "stdio", "--session", "s-cli", "-e", "PORT="+u.port,
		`curl -sS "https://api.github.com:$PORT/cli"; echo; echo "ph=$SECRET_GITHUB_TOKEN"`)
	if r.code != 0 || !strings.Contains(r.stdout, "ph=__secret:github/token__") || strings.Contains(r.stdout, egValue) {
		t.Fatalf("shellctl run --session: %s", r)
	}
	if seen := u.saw("/cli"); len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+egValue {
		t.Fatalf("the upstream saw %+v", seen)
	}
	list, err := s.c.List(ctx(t), "", 10)
	if err != nil || len(list) == 0 {
		t.Fatalf("list: %v", err)
	}
	_, rec, _ := s.get(t, s.URL+"/v1/jobs/"+list[0].JobID+"/record", true, nil)
	var got struct {
		SessionID *string `json:"session_id"`
		Egress    *struct {
			Policy      string `json:"policy"`
			Proxy       string `json:"proxy"`
			Credentials []struct{ Provider, Name string }
		} `json:"egress"`
	}
	if err := json.Unmarshal([]byte(rec), &got); err != nil || got.Egress == nil {
		t.Fatalf("record: %v %s", err, rec)
	}
	if got.Egress.Policy != "open" || got.Egress.Proxy == "" || len(got.Egress.Credentials) != 1 ||
		got.Egress.Credentials[0].Provider != "github" || got.Egress.Credentials[0].Name != "token" || got.SessionID == nil || *got.SessionID != "s-cli" {
		t.Errorf("record's egress: %s", rec)
	}
	if strings.Contains(rec, egValue) {
		t.Errorf("the record holds the value")
	}
	_, info, _ := s.get(t, s.URL+"/v1/info", true, nil)
	var in struct {
		Egress struct {
			Enabled  bool   `json:"enabled"`
			Proxy    string `json:"proxy"`
			Policy   string `json:"policy"`
			CASHA256 string `json:"ca_sha256"`
		} `json:"egress"`
	}
	if err := json.Unmarshal([]byte(info), &in); err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(filepath.Join(caOut, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		t.Fatalf("ca.pem is not PEM")
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(blk.Bytes))
	if !in.Egress.Enabled || in.Egress.Proxy != got.Egress.Proxy || in.Egress.Policy != "open" || in.Egress.CASHA256 != sum {
		t.Errorf("info's egress %+v, CA's fingerprint %s", in.Egress, sum)
	}
	m, _ := s.scrape(t, s.URL+"/metrics", true)
	if m[`shellctl_egress_requests_total{decision="intercepted"}`] < 1 || m[`shellctl_egress_substitutions_total{result="done"}`] < 1 {
		t.Errorf("egress metrics did not count: %v", m)
	}
	if r := cli(t, s, dir, "", "prepare", "--session", "s-cli", "--delete"); r.code != 0 || !strings.Contains(r.stdout, "removed 1") {
		t.Errorf("shellctl prepare --delete: %s", r)
	}
	egNoValue(t, s, []string{caOut}, egValue)
}

// TestEgressRefusesSecretsJobsCanRead: serve refuses a CA key directory or
// a credentials file inside a path jobs read (their HOME here), and a CA
// bundle directory inside one they write.
func TestEgressRefusesSecretsJobsCanRead(t *testing.T) {
	home := t.TempDir()
	creds := filepath.Join(home, "creds.json")
	os.WriteFile(creds, []byte("["+egCred("p", "n", "v", "X-K", "", "a.test")+"]"), 0o600)
	for flag, val := range map[string]string{"--egress-ca-dir": filepath.Join(home, "ca"), "--egress-credentials-file": creds, "--egress-ca-out": filepath.Join(home, "out")} {
		args := []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(t.TempDir(), "state"), "--egress-proxy", "127.0.0.1:0"}
		if flag != "--egress-ca-out" {
			args = append(args, "--egress-ca-out", filepath.Join(t.TempDir(), "out"))
		}
		cmd := exec.Command(filepath.Join(binDir, "shellctl"), append(args, flag, val)...)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "which jobs can") {
			t.Errorf("serve %s %s in the jobs' HOME: %v %s", flag, val, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "ca", "ca-key.pem")); err == nil {
		t.Errorf("the CA key was written where jobs read")
	}
}

// TestEgressJobCannotTakeAnotherSessionsKey: a job of no session looks
// for another job's proxy key in /proc/*/environ (and cmdline) while that
// job of session s-b runs, and tries to use it: it finds none, and the
// upstream never sees s-b's value on its behalf.
func TestEgressJobCannotTakeAnotherSessionsKey(t *testing.T) {
	parallel(t)
	u := egStartUpstream(t)
	s, _ := egServer(t, u)
	s.egPrepare(t, "s-b", egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com"))
	victim, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo ready; sleep 60", Mode: "stdio", SessionID: "s-b", Timeout: 5})
	if err != nil || !strings.Contains(victim.Output, "ready") {
		t.Fatalf("victim: %v %+v", err, victim)
	}
	script := `
found=""
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
  k=$(cat "$f" 2>/dev/null | tr '\0' '\n' | grep -o 'http://s-b:[^@]*@[^ ]*' | head -1)
  if [ -n "$k" ]; then found="$k"; break; fi
done
echo "found: ${found:-none}"
echo "own: $(cat /proc/self/environ | tr '\0' '\n' | grep -c 'http://_:[^@]*@')"
if [ -n "$found" ]; then curl -sS -x "$found" -o /dev/null "https://api.github.com:$PORT/stolen"; fi
echo done
`
	_, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Env: map[string]string{"PORT": u.port}})
	if !strings.Contains(out, "own: 4") {
		t.Fatalf("the scan does not find a key where one is (its own four proxy variables):\n%s", out)
	}
	if !strings.Contains(out, "found: none") {
		t.Errorf("a job read another session's proxy key:\n%s", out)
	}
	if seen := u.saw("/stolen"); len(seen) != 0 && seen[0].Header.Get("Authorization") == "Bearer "+egValue {
		t.Errorf("another session's credential was used by a job of no session")
	}
	s.c.Terminate(ctx(t), victim.JobID, 0)
}

// TestEgressStreamsAndSandboxID: an intercepted event stream reaches the
// job event by event (scrubbed), not when the upstream ends; a run with
// Dify's sandbox_id is a job of that session.
func TestEgressStreamsAndSandboxID(t *testing.T) {
	u := egStartUpstream(t)
	s, _ := egServer(t, u)
	s.egPrepare(t, "sb-9", egCred("github", "token", egValue, "Authorization", "Bearer {{.Value}}", "api.github.com"))
	body := fmt.Sprintf(`{"script":"curl -sSN https://api.github.com:%s/sse | head -1","mode":"stdio","sandbox_id":"sb-9","timeout":25}`, u.port)
	start := time.Now()
	code, out := s.egDo(t, http.MethodPost, "/v1/jobs/run", body)
	took := time.Since(start)
	close(u.release)
	// The answer comes once output went idle: the first event is in it
	// while the upstream still holds the stream open.
	if code != 200 || !strings.Contains(out, `data: one Bearer __secret:github/token__`) {
		t.Fatalf("run with sandbox_id: %d %s", code, out)
	}
	if took > 20*time.Second {
		t.Errorf("the first event came after %v: the stream was held until the upstream ended", took)
	}
	if seen := u.saw("/sse"); len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+egValue {
		t.Errorf("the upstream saw %+v", seen)
	}
}

// TestEgressStableCA: with --egress-ca-dir the CA, and so its fingerprint
// in GET /v1/info, is the same after a restart.
func TestEgressStableCA(t *testing.T) {
	u := egStartUpstream(t)
	s, _ := egServer(t, u, "--egress-ca-dir", filepath.Join(t.TempDir(), "ca"))
	fp := func() string {
		_, info, _ := s.get(t, s.URL+"/v1/info", true, nil)
		var in struct {
			Egress struct {
				CASHA256 string `json:"ca_sha256"`
			} `json:"egress"`
		}
		json.Unmarshal([]byte(info), &in)
		return in.Egress.CASHA256
	}
	before := fp()
	s.restart(syscall.SIGTERM)
	if after := fp(); before == "" || after != before {
		t.Errorf("CA fingerprint %q before a restart, %q after", before, after)
	}
}
