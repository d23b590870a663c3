package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

func TestServerErrorEnvelope(t *testing.T) {
	h := newHarness(t)
	h.stub.Fail("GET /config/prompt", fakestub.ModeServerError)
	h.run("", "config", "prompt", "pull").want(t, 1, "",
		"dify-agent: pull prompt: internal_error: the fake stub was told to fail\n")
	if _, err := os.Stat(h.path(".dify_conf/prompt.md")); !os.IsNotExist(err) {
		t.Fatalf("prompt file written after a failed pull: %v", err)
	}
}

func TestNonEnvelopeBodyShownRawShortened(t *testing.T) {
	h := newHarness(t)
	h.stub.Fail("GET /config/manifest", fakestub.ModeRawError)
	r := h.run("", "config", "manifest")
	r.wantFail(t, "dify-agent: read manifest: http_502: <html><head><title>502 Bad Gateway</title></head> <body>")
	if len(r.stderr) > 300 || !strings.HasSuffix(r.stderr, "...\n") {
		t.Fatalf("stderr not shortened (%d bytes): %q", len(r.stderr), r.stderr)
	}
}

func TestMalformedReply(t *testing.T) {
	h := newHarness(t)
	h.stub.Fail("GET /config/prompt", fakestub.ModeMalformed)
	h.run("", "config", "prompt", "pull").want(t, 1, "",
		`dify-agent: pull prompt: bad_response: malformed reply (not JSON): {"prompt": "this reply was cut and is not JSON`+"\n")
}

// The stall mode never answers: the client must give up at its timeout.
func TestStallEndsInTimeout(t *testing.T) {
	h := newHarness(t)
	h.env[agentstub.EnvTestAPITimeout] = "300ms"
	h.stub.Fail(fakestub.AllRoutes, fakestub.ModeStall)
	r := h.run("", "config", "prompt", "pull")
	r.want(t, 1, "", "dify-agent: pull prompt: timeout: no answer from the agent stub within 300ms\n")
	if r.elapsed > 10*time.Second {
		t.Fatalf("took %s", r.elapsed)
	}

	h.write(".dify_conf/prompt.md", []byte("x"))
	h.run("", "config", "prompt", "push").want(t, 1, "",
		"dify-agent: push prompt: timeout: no answer from the agent stub within 300ms\n")
	if n := len(h.requests("/agent-stub/config/prompt")); n != 2 {
		t.Fatalf("%d prompt requests, want 2 (one pull, one push, no retry)", n)
	}
}

func TestStallOfSignedTransferEndsInTimeout(t *testing.T) {
	h := newHarness(t)
	h.env[agentstub.EnvTestTransferTimeout] = "300ms"
	h.stub.SetFile("a", []byte("aaa"))
	h.stub.Fail("download file/a", fakestub.ModeStall)
	r := h.run("", "config", "files", "pull", "a")
	r.want(t, 1, "", "dify-agent: pull file a: timeout: download did not finish within 300ms\n")
	if _, err := os.Stat(h.path(".dify_conf/files/a")); !os.IsNotExist(err) {
		t.Fatalf("file written after a failed pull: %v", err)
	}

	h.write("up.txt", []byte("u"))
	h.stub.Fail("upload up.txt", fakestub.ModeStall)
	h.run("", "config", "files", "push", "up.txt").want(t, 1, "",
		"dify-agent: push file up.txt: timeout: upload did not finish within 300ms\n")
	if n := len(h.requests("/agent-stub/config/push")); n != 0 {
		t.Fatalf("config pushed after a failed upload")
	}
}

func TestCutBody(t *testing.T) {
	h := newHarness(t)
	h.stub.Fail("GET /config/prompt", fakestub.ModeCutBody)
	h.run("", "config", "prompt", "pull").
		wantFail(t, "dify-agent: pull prompt: connection_failed: connection closed before the reply was complete")

	h.stub.SetFile("big", []byte(strings.Repeat("b", 4096)))
	h.stub.Fail("download file/big", fakestub.ModeCutBody)
	h.run("", "config", "files", "pull", "big").
		wantFail(t, "dify-agent: pull file big: transfer_failed: download cut after 100 bytes")
	entries, _ := os.ReadDir(h.path(".dify_conf/files"))
	if len(entries) != 0 {
		t.Fatalf(".dify_conf/files holds %d entries after a cut download, want none", len(entries))
	}
}

// State-changing requests are sent once, whatever the failure.
func TestNoRetryOfStateChangingRequests(t *testing.T) {
	for _, mode := range []fakestub.Mode{fakestub.ModeServerError, fakestub.ModeCutBody, fakestub.ModeRawError} {
		h := newHarness(t)
		h.write(".dify_conf/prompt.md", []byte("x"))
		h.stub.Fail("PUT /config/prompt", mode)
		h.run("", "config", "prompt", "push").wantFail(t, "dify-agent: push prompt: ")
		if n := len(h.stub.Requests()); n != 1 {
			t.Fatalf("mode %d: %d requests, want exactly 1", mode, n)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"config", "prompt", "push", "a", "b"},
			"dify-agent: config prompt push: usage: accepts at most 1 arg(s), received 2; see 'dify-agent config prompt push --help'\n"},
		{[]string{"config", "prompt", "pull", "--bad"},
			"dify-agent: config prompt pull: usage: unknown flag: --bad; see 'dify-agent config prompt pull --help'\n"},
		{[]string{"config", "prompt", "pull", "extra"},
			"dify-agent: config prompt pull: usage: unknown command \"extra\" for \"dify-agent config prompt pull\"; see 'dify-agent config prompt pull --help'\n"},
		{[]string{"config", "nope"},
			"dify-agent: config: usage: unknown command \"nope\" for \"dify-agent config\"; see 'dify-agent config --help'\n"},
		{[]string{"config", "env", "push"},
			"dify-agent: config env push: usage: accepts 1 arg(s), received 0; see 'dify-agent config env push --help'\n"},
		{[]string{"config", "skills", "push"},
			"dify-agent: config skills push: usage: requires at least 1 arg(s), only received 0; see 'dify-agent config skills push --help'\n"},
		{[]string{"config", "files", "pull", "a", "a"},
			"dify-agent: config files pull: usage: \"a\" is given twice; see 'dify-agent config files pull --help'\n"},
		{[]string{"connect"},
			"dify-agent: connect: usage: requires at least 1 arg(s), only received 0; see 'dify-agent connect --help'\n"},
		{[]string{"--verbose"},
			"dify-agent: usage: unknown flag: --verbose; see 'dify-agent --help'\n"},
	} {
		h.run("", c.args...).want(t, 2, "", c.stderr)
	}
	h.wantNoRequests()
}

func TestJSONFailureKeepsStdoutClean(t *testing.T) {
	h := newHarness(t)
	h.stub.Fail("GET /config/manifest", fakestub.ModeServerError)
	h.run("", "config", "manifest", "--json").want(t, 1, "",
		"dify-agent: read manifest: internal_error: the fake stub was told to fail\n")
}

// The configuration commands understand the expired-token detail too.
func TestConfigExpiredToken(t *testing.T) {
	h := newHarness(t)
	h.env[agentstub.EnvToken] = fakestub.TokenExpired
	h.run("", "config", "prompt", "pull").want(t, 1, "",
		"dify-agent: pull prompt: agent_stub_authorization_expired: "+agentstub.AuthExpiredText+"\n")
}
