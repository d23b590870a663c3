package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEnvPush(t *testing.T) {
	h := newHarness(t)
	h.write("env.txt", []byte("A=1\r\nB=ü x \n"))
	h.run("", "config", "env", "push", "env.txt").want(t, 0, `{"env_text":"A=1\r\nB=ü x \n"}`+"\n", "")
	if got := h.stub.Env(); got != "A=1\r\nB=ü x \n" {
		t.Fatalf("env = %q", got)
	}
	h.run("C=3", "config", "env", "push", "-").want(t, 0, `{"env_text":"C=3"}`+"\n", "")
	reqs := h.stub.Requests()
	if len(reqs) != 2 || reqs[1].Method != "PATCH" || reqs[1].Path != "/agent-stub/config/env" {
		t.Fatalf("requests = %+v", reqs)
	}

	h2 := newHarness(t)
	h2.run("\xff", "config", "env", "push", "-").wantFail(t, "dify-agent: push env: invalid_utf8: ")
	h2.run("", "config", "env", "push", "nope").want(t, 1, "", "dify-agent: push env: file_not_found: nope does not exist\n")
	h2.stub.SetReadOnly(true)
	h2.run("X=1", "config", "env", "push", "-").wantFail(t, "dify-agent: push env: config_read_only: the configuration is read-only")
	if n := len(h2.stub.Requests()); n != 1 {
		t.Fatalf("%d requests, want only the read-only one", n)
	}
}

func TestNotePullPush(t *testing.T) {
	h := newHarness(t)
	h.stub.SetNote("remember: @[file:a.md]\r\n  ")
	h.run("", "config", "note", "pull").want(t, 0, h.path(".dify_conf/note.md")+"\n", "")
	if got := string(h.read(".dify_conf/note.md")); got != "remember: @[file:a.md]\r\n  " {
		t.Fatalf("note.md = %q", got)
	}
	h.run("", "config", "note", "pull", "--to", "n.txt").want(t, 0, h.path("n.txt")+"\n", "")
	h.write(".dify_conf/note.md", []byte("new note 🙂"))
	h.run("", "config", "note", "push", ".dify_conf/note.md").want(t, 0, `{"note":"new note 🙂"}`+"\n", "")
	if got := h.stub.Note(); got != "new note 🙂" {
		t.Fatalf("note = %q", got)
	}
	h.run("", "config", "note", "push", "-").want(t, 0, `{"note":""}`+"\n", "")
	if got := h.stub.Note(); got != "" {
		t.Fatalf("note = %q, want cleared", got)
	}
}

func TestManifest(t *testing.T) {
	h := newHarness(t)
	h.run("", "config", "manifest").want(t, 0, "skills (0):\nfiles (0):\nnote: 0 bytes\n", "")
	h.run("", "config", "manifest", "--json").want(t, 0,
		`{"skills":{"items":[]},"files":{"items":[]},"note":""}`+"\n", "")
	h.stub.SetSkill("web", []byte("zip"))
	h.stub.SetSkill("db", []byte("zip"))
	h.stub.SetFile("a.md", []byte("a"))
	h.stub.SetNote("ü<")
	h.run("", "config", "manifest").want(t, 0, "skills (2):\n  db\n  web\nfiles (1):\n  a.md\nnote: 3 bytes\n", "")
	h.run("", "config", "manifest", "--json").want(t, 0,
		`{"skills":{"items":[{"name":"db"},{"name":"web"}]},"files":{"items":[{"name":"a.md"}]},"note":"ü<"}`+"\n", "")
}

func TestConnect(t *testing.T) {
	h := newHarness(t)
	h.run("", "connect", "--json", "ssh", "-p", "22", "--json", "host").want(t, 0,
		`{"argv":["ssh","-p","22","--json","host"],"id":"conn-1","status":"connected"}`+"\n", "")
	h.run("", "connect", "psql").want(t, 0,
		"{\n  \"argv\": [\n    \"psql\"\n  ],\n  \"id\": \"conn-2\",\n  \"status\": \"connected\"\n}\n", "")
	reqs := h.requests("/agent-stub/connections")
	var body struct {
		Argv     []string          `json:"argv"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || body.Metadata["cwd"] != h.dir {
		t.Fatalf("body = %s (%v)", reqs[0].Body, err)
	}
}

// An unknown first word is connect with all arguments.
func TestUnknownFirstWordIsConnect(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"mysql", "-h", "db", "--json"},
		{"prompt", "pull"}, // not a top-level command
		{"ssh"},
	} {
		r := h.run("", args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	conns := h.stub.Connections()
	want := [][]string{{"mysql", "-h", "db", "--json"}, {"prompt", "pull"}, {"ssh"}}
	if len(conns) != len(want) {
		t.Fatalf("connections = %q", conns)
	}
	for i := range want {
		if len(conns[i]) != len(want[i]) {
			t.Fatalf("connection %d = %q, want %q", i, conns[i], want[i])
		}
		for j := range want[i] {
			if conns[i][j] != want[i][j] {
				t.Fatalf("connection %d = %q, want %q", i, conns[i], want[i])
			}
		}
	}
}

// A typo of a command is a usage error that names the command it may
// mean, and reaches no backend; completion prints a shell script.
func TestTypoIsUsageErrorAndCompletionWorks(t *testing.T) {
	h := newHarness(t)
	for typo, meant := range map[string]string{"hlep": `"help"`, "flie": `"file"`, "drvie": `"drive"`} {
		r := h.run("", typo)
		if r.code != 2 || !strings.Contains(r.stderr, "unknown command") || !strings.Contains(r.stderr, meant) || r.stdout != "" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want 2 naming %s", typo, r.code, r.stdout, r.stderr, meant)
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := h.run("", "completion", sh)
		if r.code != 0 || !strings.Contains(r.stdout, "dify-agent") || len(r.stdout) < 500 {
			t.Fatalf("completion %s: exit %d, %d bytes of stdout, stderr %q", sh, r.code, len(r.stdout), r.stderr)
		}
	}
	if n := len(h.stub.Requests()); n != 0 {
		t.Fatalf("%d requests reached the backend, want none", n)
	}
	// The help a model reads does not list it.
	if r := h.run("", "--help"); strings.Contains(r.stdout, "completion") {
		t.Fatalf("--help lists completion:\n%s", r.stdout)
	}
}
