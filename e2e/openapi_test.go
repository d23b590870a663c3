package e2e

// Every answer the integration tests receive is checked against the
// OpenAPI document (internal/api/openapi.json, served at
// GET /v1/openapi.json): http.DefaultTransport is wrapped in TestMain, so
// every client of the tests that does not bring its own transport goes
// through the check. A mismatch fails the test whose server answered; one
// that cannot be put on a test (its test is over) fails the package.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/shellctl/shellctl/internal/api"
	"github.com/shellctl/shellctl/internal/openapicheck"
)

var oaCheck struct {
	mu      sync.Mutex
	servers map[string]*testing.T // host:port → the test whose server it is
	orphans []string              // mismatches no test could be told of
	checked int
}

// installOpenAPICheck wraps http.DefaultTransport in the document's check.
func installOpenAPICheck() error {
	c, err := openapicheck.Load(api.OpenAPI)
	if err != nil {
		return err
	}
	oaCheck.servers = map[string]*testing.T{}
	http.DefaultTransport = &openapicheck.Transport{
		Base:    http.DefaultTransport,
		Checker: c,
		// The answers of the tests' servers, and of any other shellctl
		// serve a test started by hand (they carry a request id; the
		// fake Agent Stub's and other helpers' do not).
		Want: func(r *http.Request, resp *http.Response) bool {
			oaCheck.mu.Lock()
			defer oaCheck.mu.Unlock()
			_, ok := oaCheck.servers[r.URL.Host]
			ok = ok || resp.Header.Get(api.RequestIDHeader) != ""
			if ok {
				oaCheck.checked++
			}
			return ok
		},
		Report: oaReport,
	}
	return nil
}

// oaRegister says the server at rawURL is test t's, until t ends (after
// the cleanups t registered before, which stop its server): the address
// may then be another listener's, such as a later test's --metrics-listen,
// whose answers are no API's.
func oaRegister(t *testing.T, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return
	}
	oaCheck.mu.Lock()
	if oaCheck.servers != nil {
		oaCheck.servers[u.Host] = t
	}
	oaCheck.mu.Unlock()
	t.Cleanup(func() {
		oaCheck.mu.Lock()
		if oaCheck.servers[u.Host] == t {
			delete(oaCheck.servers, u.Host)
		}
		oaCheck.mu.Unlock()
	})
}

func oaReport(r *http.Request, err error) {
	oaCheck.mu.Lock()
	t := oaCheck.servers[r.URL.Host]
	oaCheck.mu.Unlock()
	msg := "answer does not match the OpenAPI document (internal/api/openapi.json): " + err.Error()
	if t != nil && oaTell(t, msg) {
		return
	}
	oaCheck.mu.Lock()
	oaCheck.orphans = append(oaCheck.orphans, msg)
	oaCheck.mu.Unlock()
}

// oaTell fails t; false when t is over (testing panics then).
func oaTell(t *testing.T, msg string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	t.Error(msg)
	return true
}

// oaFinish fails the package for mismatches no test could be told of.
func oaFinish(code int) int {
	oaCheck.mu.Lock()
	defer oaCheck.mu.Unlock()
	if len(oaCheck.orphans) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d answers did not match the OpenAPI document:\n%s\n", len(oaCheck.orphans), strings.Join(oaCheck.orphans, "\n"))
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "openapi: %d answers checked against the document\n", oaCheck.checked)
	}
	return code
}

func TestOpenAPIDocumentIsServedAndChecksAnswers(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	status, raw, err := s.c.Do(ctx(t), http.MethodGet, "/v1/openapi.json", nil)
	if err != nil || status != 200 {
		t.Fatalf("GET /v1/openapi.json: %d %v", status, err)
	}
	if !bytes.Equal(raw, api.OpenAPI) {
		t.Fatal("the served document is not the repository's file")
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") || len(doc.Paths) < 20 {
		t.Fatalf("served document: openapi %q, %d paths, %v", doc.OpenAPI, len(doc.Paths), err)
	}
	// Behind the token like every route but /healthz.
	resp, err := http.Get(s.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without the token: %d, want 401", resp.StatusCode)
	}
	// The check is in force for this package's requests.
	if _, ok := http.DefaultTransport.(*openapicheck.Transport); !ok {
		t.Fatal("http.DefaultTransport does not check answers against the document")
	}
}
