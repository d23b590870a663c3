package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

func TestWithConnect(t *testing.T) {
	root := (&app{}).newRoot()
	for _, c := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"config", "manifest"}, []string{"config", "manifest"}},
		{[]string{"connect", "x"}, []string{"connect", "x"}},
		{[]string{"help"}, []string{"help"}},
		{[]string{"--help"}, []string{"--help"}},
		{[]string{"ssh", "-p", "22"}, []string{"connect", "ssh", "-p", "22"}},
		{[]string{"manifest"}, []string{"connect", "manifest"}},
	} {
		if got, err := withConnect(root, c.in); err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("withConnect(%q) = %q, %v, want %q", c.in, got, err, c.want)
		}
	}
	// A typo of a command is a usage error naming what it may mean.
	for typo, meant := range map[string]string{"hlep": `"help"`, "flie": `"file"`, "konwledge": `"knowledge"`, "drvie": `"drive"`, "conifg": `"config"`} {
		got, err := withConnect(root, []string{typo, "x"})
		if err == nil || !strings.Contains(err.Error(), meant) || !strings.Contains(err.Error(), "unknown command") || got != nil {
			t.Errorf("withConnect(%q) = %q, %v, want a usage error naming %s", typo, got, err, meant)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "a.zip": true, "..a": true, "": false, ".": false,
		"..": false, "a/b": false, `a\b`: false, "a\x00": false} {
		if err := checkName(name); (err == nil) != ok {
			t.Errorf("checkName(%q) = %v", name, err)
		}
	}
}

// Main maps failures to exit 1 and command-line errors to exit 2.
func TestMainExitCodes(t *testing.T) {
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
		return code, errb.String()
	}
	if code, msg := run("config", "manifest"); code != ExitFailed ||
		msg != "dify-agent: read manifest: missing_env: missing required Agent Stub environment variables: DIFY_AGENT_STUB_API_BASE_URL, DIFY_AGENT_STUB_AUTH_JWE\n" {
		t.Fatalf("missing env: %d %q", code, msg)
	}
	if code, _ := run("config", "manifest", "--nope"); code != ExitUsage {
		t.Fatalf("bad flag: %d", code)
	}
	if code, _ := run("config"); code != ExitOK {
		t.Fatalf("group alone: %d", code)
	}
}

// The transfer fan-out runs in-process here so that -race sees it (the
// binary tests in cmd/dify-agent run a binary built without -race).
func TestTransfersInProcess(t *testing.T) {
	stub := fakestub.New("tok")
	srv := httptest.NewServer(stub)
	t.Cleanup(func() { stub.Close(); srv.Close() })
	t.Chdir(t.TempDir())
	env := map[string]string{agentstub.EnvBaseURL: srv.URL, agentstub.EnvToken: "tok"}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
		return code, out.String(), errb.String()
	}
	args := []string{"config", "files", "push"}
	for i := range 8 {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(name, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, name)
	}
	stub.Fail("upload f3", fakestub.ModeServerError)
	code, out, errs := run(args...)
	if code != ExitFailed || strings.Count(out, "\n") != 7 || errs != "dify-agent: push file f3: internal_error: the fake stub was told to fail\n" {
		t.Fatalf("push: %d %q %q", code, out, errs)
	}
	code, out, errs = run("config", "files", "pull", "--json")
	if code != ExitOK || errs != "" || strings.Count(out, `"path"`) != 7 {
		t.Fatalf("pull: %d %q %q", code, out, errs)
	}
}

// home-snapshot upload (a producer goroutine and a pipe) and download run
// in-process, so that -race sees them.
func TestHomeSnapshotInProcess(t *testing.T) {
	stub := fakestub.New("tok")
	srv := httptest.NewServer(stub)
	t.Cleanup(func() { stub.Close(); srv.Close() })
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(src+"/a.txt", []byte(strings.Repeat("a", 3<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(home, token string, args ...string) (int, string) {
		env := map[string]string{agentstub.EnvBaseURL: srv.URL, agentstub.EnvToken: token, "HOME": home}
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
		return code, errb.String()
	}
	if code, msg := run(src, fakestub.TokenHomeWrite, "home-snapshot", "upload"); code != 0 {
		t.Fatalf("upload: %d %s", code, msg)
	}
	if code, msg := run(dst, fakestub.TokenHomeRead, "home-snapshot", "download"); code != 0 {
		t.Fatalf("download: %d %s", code, msg)
	}
	if b, err := os.ReadFile(dst + "/a.txt"); err != nil || len(b) != 3<<20 {
		t.Fatalf("restored: %d %v", len(b), err)
	}
	// A failing upload joins its producer and reports the gateway's error.
	stub.SetMode("store-fail-mid")
	stub.SetPurposeToken("w2", fakestub.ScopeHomeWrite, "snap-2")
	if code, msg := run(src, "w2", "home-snapshot", "upload"); code != 1 || !strings.HasPrefix(msg, "dify-agent: agent stub Home Snapshot upload failed") {
		t.Fatalf("failing upload: %d %q", code, msg)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"help", "help", 0}, {"hlep", "help", 2}, {"", "abc", 3}, {"file", "flie", 2}, {"kitten", "sitting", 3}, {"ssh", "help", 4}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestEscapeUnsafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain path/a b.txt":       "plain path/a b.txt",
		`back\slash`:               `back\slash`,
		"café ✓":                   "café ✓",
		"osc\x1b]52;c;aGk=\x07end": `osc\x1b]52;c;aGk=\x07end`,
		"nl\ncr\rtab\t":            `nl\ncr\rtab\t`,
		"del\x7f c1\u009b":         `del\x7f c1\x9b`,
		"bidi\u202eoverride":       `bidi\u202eoverride`,
		"bad\x9b\xffutf8":          `bad\x9b\xffutf8`,
	} {
		if got := escapeUnsafe(in); got != want {
			t.Errorf("escapeUnsafe(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"report.pdf":            "report.pdf",
		"evil\n\x1b]52;c;x\x07": "evil__]52;c;x_",
		"bad\x9b\xff.txt":       "bad__.txt",
		"rlo\u202etxt.exe":      "rlo_txt.exe",
		"ünïcode ✓.txt":         "ünïcode ✓.txt",
	} {
		if got := safeFileName(in); got != want {
			t.Errorf("safeFileName(%q) = %q, want %q", in, got, want)
		}
	}
	// What the backend says in an error reaches stderr escaped.
	if got := oneLine("HTTP 403:\n\x1b]52;c;aGk=\x07 forbidden"); got != `HTTP 403: \x1b]52;c;aGk=\x07 forbidden` {
		t.Errorf("oneLine: %q", got)
	}
}
