package e2e

// A real language server in a job, driven over one attach WebSocket with
// LSP's Content-Length framing (issue 33, "done when").

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// goplsVersion is the gopls the test builds from the Go module proxy.
const goplsVersion = "v0.23.0"

// buildGopls builds gopls once per machine (kept under the system's temp
// directory, keyed by version), or skips the test saying why.
func buildGopls(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build gopls with")
	}
	dir := filepath.Join(os.TempDir(), "shellctl-e2e-gopls-"+goplsVersion)
	bin := filepath.Join(dir, "gopls")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	c, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, goBin, "install", "golang.org/x/tools/gopls@"+goplsVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("gopls %s could not be fetched and built from the Go module proxy (%v): %s", goplsVersion, err, bytes.TrimSpace(out))
	}
	return bin
}

// lspConn speaks LSP's framing over an attach socket.
type lspConn struct {
	t    *testing.T
	a    *client.AttachConn
	buf  []byte
	next int
}

func (l *lspConn) send(v map[string]any) {
	l.t.Helper()
	v["jsonrpc"] = "2.0"
	body, _ := json.Marshal(v)
	msg := append([]byte(fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))), body...)
	if err := l.a.Input(ctx(l.t), msg); err != nil {
		l.t.Fatalf("send %s: %v", v["method"], err)
	}
}

func (l *lspConn) call(method string, params any) json.RawMessage {
	l.t.Helper()
	l.next++
	id := l.next
	l.send(map[string]any{"id": id, "method": method, "params": params})
	for {
		m := l.read()
		if m.ID != nil && string(*m.ID) == strconv.Itoa(id) && m.Method == "" {
			if m.Error != nil {
				l.t.Fatalf("%s: error %s", method, m.Error)
			}
			return m.Result
		}
	}
}

type lspMsg struct {
	ID     *json.RawMessage `json:"id"`
	Method string           `json:"method"`
	Result json.RawMessage  `json:"result"`
	Error  json.RawMessage  `json:"error"`
}

// read reads the next framed message (notifications included).
func (l *lspConn) read() lspMsg {
	l.t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if i := bytes.Index(l.buf, []byte("\r\n\r\n")); i >= 0 {
			var n int
			for _, h := range strings.Split(string(l.buf[:i]), "\r\n") {
				if v, ok := strings.CutPrefix(h, "Content-Length: "); ok {
					n, _ = strconv.Atoi(v)
				}
			}
			if n <= 0 {
				l.t.Fatalf("a frame without Content-Length: %q", l.buf[:i])
			}
			if len(l.buf) >= i+4+n {
				body := l.buf[i+4 : i+4+n]
				l.buf = append([]byte(nil), l.buf[i+4+n:]...)
				var m lspMsg
				if err := json.Unmarshal(body, &m); err != nil {
					l.t.Fatalf("a frame that is not JSON: %q", body)
				}
				return m
			}
		}
		m, err := l.a.Next(c)
		if err != nil {
			l.t.Fatalf("reading the language server: %v (have %q)", err, l.buf)
		}
		if m.Control != nil {
			if m.Control.Type == "exit" {
				l.t.Fatalf("the job ended before the answer: %+v (have %q)", *m.Control, l.buf)
			}
			continue
		}
		l.buf = append(l.buf, m.Output...)
	}
}

// lspSetup writes a small module and a copy of gopls into the server's
// Home (the job may run only what its walls let it read), and answers the
// module's directory, its main.go and the job's environment.
func lspSetup(t *testing.T, s *server) (mod, src string, env map[string]string) {
	t.Helper()
	gopls := buildGopls(t)
	mod = filepath.Join(s.Home, "lspmod")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	src = "package main\n\n// Greeting says hello to who, politely.\nfunc Greeting(who string) string { return \"hello \" + who }\n\nfunc main() { println(Greeting(\"ada\")) }\n"
	for name, body := range map[string]string{"go.mod": "module example.com/lspmod\n\ngo 1.22\n", "main.go": src} {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(gopls)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Home, "gopls"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	goBin, _ := exec.LookPath("go")
	env = map[string]string{"PATH": filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
	return mod, src, env
}

// driveLSP does initialize → initialized → textDocument/didOpen →
// textDocument/hover (the doc comment of the function under the cursor
// comes back) → textDocument/definition (its line) → shutdown → exit over
// a, and checks the job ends 0.
func driveLSP(t *testing.T, a *client.AttachConn, mod, src string) {
	t.Helper()
	l := &lspConn{t: t, a: a}
	uri := "file://" + filepath.Join(mod, "main.go")
	init := l.call("initialize", map[string]any{
		"processId": nil, "rootUri": "file://" + mod,
		"capabilities":     map[string]any{},
		"workspaceFolders": []map[string]any{{"uri": "file://" + mod, "name": "lspmod"}},
	})
	if !strings.Contains(string(init), `"hoverProvider":true`) {
		t.Fatalf("initialize answered %s", init)
	}
	l.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	l.send(map[string]any{"method": "textDocument/didOpen", "params": map[string]any{
		"textDocument": map[string]any{"uri": uri, "languageId": "go", "version": 1, "text": src},
	}})
	// Greeting in main's body: line 5, column 22.
	pos := map[string]any{"textDocument": map[string]any{"uri": uri}, "position": map[string]any{"line": 5, "character": 24}}
	hover := l.call("textDocument/hover", pos)
	if !strings.Contains(string(hover), "Greeting says hello to who, politely.") || !strings.Contains(string(hover), "func Greeting(who string) string") {
		t.Fatalf("hover answered %s", hover)
	}
	def := l.call("textDocument/definition", pos)
	if !strings.Contains(string(def), `"line":3`) || !strings.Contains(string(def), "main.go") {
		t.Fatalf("definition answered %s", def)
	}
	l.call("shutdown", nil)
	l.send(map[string]any{"method": "exit"})
	for {
		m, err := a.Next(ctx(t))
		if err != nil {
			t.Fatalf("after exit: %v", err)
		}
		if m.Control != nil && m.Control.Type == "exit" {
			if m.Control.ExitCode == nil || *m.Control.ExitCode != 0 {
				t.Fatalf("gopls ended %+v, want exit 0", *m.Control)
			}
			return
		}
	}
}

// TestAttachLanguageServer: gopls (built from the Go module proxy) in a
// pty job, driven over one attach WebSocket (driveLSP). The job's
// terminal is made raw (`stty raw -echo`), so the attach carries the
// protocol's bytes exactly both ways.
func TestAttachLanguageServer(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	mod, src, env := lspSetup(t, s)
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "stty raw -echo; echo ready; exec ./gopls", Mode: "pty", Cwd: s.Home, Env: env, Timeout: 10})
	if err != nil || !strings.Contains(res.Output, "ready") {
		t.Fatalf("run gopls: %+v %v", res, err)
	}
	a, err := s.c.Attach(ctx(t), res.JobID, client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	// The redraw of the (empty) screen comes first: not the server's.
	for skipped := false; !skipped; {
		m, err := a.Next(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.Control != nil && m.Control.Type == "redraw" {
			if _, err := a.Next(ctx(t)); err != nil {
				t.Fatal(err)
			}
			skipped = true
		}
	}
	driveLSP(t, a, mod, src)
}

// TestAttachLanguageServerPipe: the same gopls as a stdio job run with
// "stdin":"pipe", driven over one attach WebSocket (driveLSP): input goes
// to its stdin pipe, its stdout (output.log, from offset 0) comes back,
// no terminal in between; its stderr (gopls's log) stays in stderr.log.
func TestAttachLanguageServerPipe(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	mod, src, env := lspSetup(t, s)
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "exec ./gopls", Mode: "stdio", Stdin: "pipe", Cwd: s.Home, Env: env, Timeout: 0.1})
	if err != nil || res.Status != "running" {
		t.Fatalf("run gopls: %+v %v", res, err)
	}
	zero := int64(0)
	a, err := s.c.Attach(ctx(t), res.JobID, client.AttachOptions{Offset: &zero})
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	driveLSP(t, a, mod, src)
}
