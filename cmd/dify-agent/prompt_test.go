package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// promptCases are texts that must survive push and pull byte for byte.
var promptCases = []struct{ name, text string }{
	{"crlf", "line one\r\nline two\r\n"},
	{"trailing spaces", "a  \nb\t \n   "},
	{"no final newline", "no newline at the end"},
	{"non-ascii", "Grüße, 日本語, emoji 🙂, RTL עברית"},
	{"mention markers", "Use @[skill:foo] with @[file:notes.md] and {{#sys.query#}} then @[tool:web.search]."},
	{"html and escapes", "<b>&amp;</b> \"quoted\" \\backslash\\ \u2028 line sep"},
	{"lone cr and tabs", "a\rb\tc\r"},
	{"blank lines", "\n\n\nx\n\n"},
	{"everything", "# Prompt\r\n\r\nHi @[skill:ü-ß] \t \r\nEnd 🙂  "},
}

func TestPromptPushPullByteExact(t *testing.T) {
	for _, c := range promptCases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(".dify_conf/prompt.md", []byte(c.text))
			h.run("", "config", "prompt", "push").want(t, 0, jsonLine(t, map[string]string{"prompt": c.text}), "")
			if got := h.stub.Prompt(); got != c.text {
				t.Fatalf("stub prompt = %q, want %q", got, c.text)
			}
			if err := os.RemoveAll(h.path(".dify_conf")); err != nil {
				t.Fatal(err)
			}
			h.run("", "config", "prompt", "pull").want(t, 0, h.path(".dify_conf/prompt.md")+"\n", "")
			if got := h.read(".dify_conf/prompt.md"); !bytes.Equal(got, []byte(c.text)) {
				t.Fatalf("pulled %q, want %q", got, c.text)
			}
		})
	}
}

func TestPromptPullToPathCreatesDirs(t *testing.T) {
	h := newHarness(t)
	h.stub.SetPrompt("x\r\n")
	h.write("old.md", []byte("old content that is longer"))
	h.run("", "config", "prompt", "pull", "--to", "a/b/c.md").want(t, 0, h.path("a/b/c.md")+"\n", "")
	h.run("", "config", "prompt", "pull", "--to", "old.md").want(t, 0, h.path("old.md")+"\n", "")
	abs := filepath.Join(h.root, "elsewhere", "p.md")
	h.run("", "config", "prompt", "pull", "--to", abs).want(t, 0, abs+"\n", "")
	for _, rel := range []string{"a/b/c.md", "old.md", "../elsewhere/p.md"} {
		if got := string(h.read(rel)); got != "x\r\n" {
			t.Fatalf("%s = %q", rel, got)
		}
	}
	if entries, _ := os.ReadDir(h.path("a/b")); len(entries) != 1 {
		t.Fatalf("a/b holds %d entries, want only c.md (no temp files left)", len(entries))
	}
}

func TestPromptPushFromPathAndStdin(t *testing.T) {
	h := newHarness(t)
	h.write("my.md", []byte("from path\r\n"))
	h.run("", "config", "prompt", "push", "my.md").want(t, 0, `{"prompt":"from path\r\n"}`+"\n", "")
	h.run("from stdin @[skill:x] ", "config", "prompt", "push", "-").
		want(t, 0, `{"prompt":"from stdin @[skill:x] "}`+"\n", "")
	if got := h.stub.Prompt(); got != "from stdin @[skill:x] " {
		t.Fatalf("stub prompt = %q", got)
	}
}

func TestPromptPushEmptyClears(t *testing.T) {
	h := newHarness(t)
	h.stub.SetPrompt("old")
	h.write(".dify_conf/prompt.md", nil)
	h.run("", "config", "prompt", "push").want(t, 0, `{"prompt":""}`+"\n", "")
	if got := h.stub.Prompt(); got != "" {
		t.Fatalf("stub prompt = %q, want cleared", got)
	}
	h.stub.SetPrompt("old")
	h.run("", "config", "prompt", "push", "-").want(t, 0, `{"prompt":""}`+"\n", "")
	if got := h.stub.Prompt(); got != "" {
		t.Fatalf("stub prompt = %q, want cleared from empty stdin", got)
	}
}

func TestPromptPushMissingFile(t *testing.T) {
	h := newHarness(t)
	h.run("", "config", "prompt", "push").want(t, 1, "",
		"dify-agent: push prompt: file_not_found: .dify_conf/prompt.md does not exist\n")
	h.run("", "config", "prompt", "push", "nope.md").want(t, 1, "",
		"dify-agent: push prompt: file_not_found: nope.md does not exist\n")
	h.wantNoRequests()
}

func TestPromptPushInvalidUTF8NothingSent(t *testing.T) {
	h := newHarness(t)
	h.stub.SetPrompt("kept")
	h.write(".dify_conf/prompt.md", []byte("ok \xff\xfe bad"))
	h.run("", "config", "prompt", "push").want(t, 1, "",
		"dify-agent: push prompt: invalid_utf8: .dify_conf/prompt.md is not valid UTF-8 (first bad byte at offset 3); nothing was sent\n")
	h.run("caf\xe9", "config", "prompt", "push", "-").want(t, 1, "",
		"dify-agent: push prompt: invalid_utf8: standard input is not valid UTF-8 (first bad byte at offset 3); nothing was sent\n")
	h.wantNoRequests()
	if h.stub.Prompt() != "kept" {
		t.Fatal("prompt changed")
	}
}

func TestPromptPushReadOnly(t *testing.T) {
	h := newHarness(t)
	h.stub.SetPrompt("kept")
	h.stub.SetReadOnly(true)
	h.write(".dify_conf/prompt.md", []byte("new"))
	h.run("", "config", "prompt", "push").want(t, 1, "",
		"dify-agent: push prompt: config_read_only: the configuration is read-only: only your own build draft can be changed, not a snapshot or a shared draft\n")
	if h.stub.Prompt() != "kept" {
		t.Fatal("prompt changed")
	}
	// Reading a read-only configuration still works.
	h.run("", "config", "prompt", "pull").want(t, 0, h.path(".dify_conf/prompt.md")+"\n", "")
}
