package main

import (
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/agentstub"
)

func TestBaseURLForms(t *testing.T) {
	for _, suffix := range []string{"", "/", "/agent-stub", "/agent-stub/"} {
		t.Run("path="+suffix, func(t *testing.T) {
			h := newHarness(t)
			h.stub.SetPrompt("p")
			h.env[agentstub.EnvBaseURL] = h.url + suffix
			r := h.run("", "config", "prompt", "pull")
			r.want(t, 0, h.path(".dify_conf/prompt.md")+"\n", "")
			reqs := h.stub.Requests()
			if len(reqs) != 1 || reqs[0].Method != "GET" || reqs[0].Path != "/agent-stub/config/prompt" {
				t.Fatalf("requests = %+v, want one GET /agent-stub/config/prompt", reqs)
			}
			if got := reqs[0].Authorization; got != "Bearer "+testToken {
				t.Fatalf("Authorization = %q", got)
			}
		})
	}
}

func TestBaseURLInvalidNamesVariable(t *testing.T) {
	h := newHarness(t)
	for _, raw := range []string{
		"ftp://" + strings.TrimPrefix(h.url, "http://"),
		h.url + "/other",
		h.url + "/agent-stub/v1",
		h.url + "/agent-stub?x=1",
		strings.TrimPrefix(h.url, "http://"),
		"http://",
	} {
		t.Run(raw, func(t *testing.T) {
			h.env[agentstub.EnvBaseURL] = raw
			r := h.run("", "config", "prompt", "pull")
			r.wantFail(t, "dify-agent: pull prompt: invalid_env: DIFY_AGENT_STUB_API_BASE_URL ")
			h.wantNoRequests()
		})
	}
	t.Run("missing", func(t *testing.T) {
		h.env[agentstub.EnvBaseURL] = ""
		h.run("", "config", "manifest").want(t, 1, "",
			"dify-agent: read manifest: missing_env: missing required Agent Stub environment variables: DIFY_AGENT_STUB_API_BASE_URL\n")
	})
}

func TestMissingTokenFailsBeforeAnyRequest(t *testing.T) {
	h := newHarness(t)
	h.env[agentstub.EnvToken] = ""
	h.write(".dify_conf/prompt.md", []byte("x"))
	for _, args := range [][]string{
		{"config", "prompt", "pull"},
		{"config", "prompt", "push"},
		{"config", "files", "pull"},
		{"ssh", "host"},
	} {
		r := h.run("", args...)
		r.wantFail(t, "dify-agent: ")
		if !strings.HasSuffix(r.stderr, ": missing_env: missing required Agent Stub environment variables: DIFY_AGENT_STUB_AUTH_JWE\n") {
			t.Fatalf("%q: stderr = %q", args, r.stderr)
		}
	}
	h.wantNoRequests()
}

func TestWrongToken(t *testing.T) {
	h := newHarness(t)
	h.env[agentstub.EnvToken] = "wrong"
	h.run("", "config", "prompt", "pull").want(t, 1, "",
		"dify-agent: pull prompt: unauthorized: invalid or expired token (check DIFY_AGENT_STUB_AUTH_JWE)\n")
	if reqs := h.stub.Requests(); len(reqs) != 1 || reqs[0].Authorization != "Bearer wrong" {
		t.Fatalf("requests = %+v", reqs)
	}
}

func TestConnectionRefused(t *testing.T) {
	h := newHarness(t)
	h.env[agentstub.EnvBaseURL] = "http://127.0.0.1:1"
	h.run("", "config", "prompt", "pull").wantFail(t, "dify-agent: pull prompt: connection_failed: ")
}
