package main

// The tests of this package run the real dify-agent binary, built once in
// TestMain, against the fake Agent Stub over HTTP on 127.0.0.1. Each test
// gets its own stub and its own working directory.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

// binPath is the dify-agent binary under test.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dify-agent-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "dify-agent")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build dify-agent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testToken = "test-token"

// runLimit is how long one run of the binary may take before the test calls
// it a hang; every timeout under test is far shorter.
const runLimit = 60 * time.Second

type harness struct {
	t    *testing.T
	stub *fakestub.Server
	url  string // the stub's root URL, without /agent-stub
	root string // a temp dir holding only work/
	dir  string // the binary's working directory (root/work)
	env  map[string]string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	stub := fakestub.New(testToken)
	srv := httptest.NewServer(stub) // listens on 127.0.0.1
	t.Cleanup(func() {
		stub.Close()
		srv.Close()
	})
	root := t.TempDir()
	dir := filepath.Join(root, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, stub: stub, url: srv.URL, root: root, dir: dir, env: map[string]string{
		agentstub.EnvBaseURL:             srv.URL,
		agentstub.EnvToken:               testToken,
		agentstub.EnvTestAPITimeout:      "10s",
		agentstub.EnvTestTransferTimeout: "10s",
	}}
}

type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// run runs the binary with args in h.dir, stdin as its standard input.
func (h *harness) run(stdin string, args ...string) result {
	h.t.Helper()
	return runBin(h.t, h.dir, h.env, strings.NewReader(stdin), args...)
}

// runBin runs the binary with only the given DIFY_* variables set (an empty
// value leaves the variable out).
func runBin(t *testing.T, dir string, env map[string]string, stdin *strings.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIFY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("dify-agent %q hung for %s", args, runLimit)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run dify-agent %q: %v", args, err)
	}
	return r
}

// want checks the exit status and the exact stdout and stderr.
func (r result) want(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || r.stdout != stdout || r.stderr != stderr {
		t.Fatalf("got exit %d\nstdout: %q\nstderr: %q\nwant exit %d\nstdout: %q\nstderr: %q",
			r.code, r.stdout, r.stderr, code, stdout, stderr)
	}
}

// wantFail checks exit status 1, empty stdout and one stderr line that
// starts with prefix.
func (r result) wantFail(t *testing.T, prefix string) {
	t.Helper()
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, prefix) ||
		strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Fatalf("got exit %d\nstdout: %q\nstderr: %q\nwant exit 1, no stdout, one stderr line starting %q",
			r.code, r.stdout, r.stderr, prefix)
	}
}

func (h *harness) path(rel string) string { return filepath.Join(h.dir, filepath.FromSlash(rel)) }

func (h *harness) write(rel string, data []byte) {
	h.t.Helper()
	p := h.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) read(rel string) []byte {
	h.t.Helper()
	b, err := os.ReadFile(h.path(rel))
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// requests returns the recorded requests whose path starts with prefix.
func (h *harness) requests(prefix string) []fakestub.Request {
	var out []fakestub.Request
	for _, r := range h.stub.Requests() {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func (h *harness) wantNoRequests() {
	h.t.Helper()
	if rs := h.stub.Requests(); len(rs) != 0 {
		h.t.Fatalf("stub received %d requests, want none: first %s %s", len(rs), rs[0].Method, rs[0].Path)
	}
}

func jsonLine(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
