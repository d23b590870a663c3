package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "file-tok\n", 0o600)
	crlf := file("crlf", "crlf-tok\r\n", 0o600)
	bare := file("bare", " spaced tok ", 0o600)
	blank := file("blank", "  \n", 0o600)
	loose := file("loose", "loose-tok\n", 0o644)
	other := file("other", "env-file-tok\n", 0o600)
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name            string
		flag, flagFile  string
		env             map[string]string
		want, from      string
		wantErr         string // substring of the error; "" = no error
		usage, wantNote bool
	}{
		{name: "nothing", want: "", from: ""},
		{name: "flag", flag: "f", want: "f", from: "--token"},
		{name: "flag over env and env file", flag: "f", env: map[string]string{envToken: "e", envTokenFile: other}, want: "f", from: "--token"},
		{name: "flag file", flagFile: good, want: "file-tok", from: "--token-file " + good},
		{name: "flag file over env file and env", flagFile: good, env: map[string]string{envToken: "e", envTokenFile: other}, want: "file-tok", from: "--token-file " + good, wantNote: true},
		{name: "env file", env: map[string]string{envTokenFile: other}, want: "env-file-tok", from: envTokenFile + " " + other},
		{name: "env file over env", env: map[string]string{envToken: "e", envTokenFile: other}, want: "env-file-tok", from: envTokenFile + " " + other, wantNote: true},
		{name: "env", env: map[string]string{envToken: " e "}, want: " e ", from: envToken},
		{name: "empty flag falls through", flag: "", env: map[string]string{envToken: "e"}, want: "e", from: envToken},
		{name: "crlf dropped", flagFile: crlf, want: "crlf-tok", from: "--token-file " + crlf},
		{name: "no newline, kept exactly", flagFile: bare, want: " spaced tok ", from: "--token-file " + bare},
		{name: "blank line is returned for CheckToken", flagFile: blank, want: "  ", from: "--token-file " + blank},
		{name: "loose mode warns", flagFile: loose, want: "loose-tok", from: "--token-file " + loose, wantNote: true},
		{name: "both flags", flag: "f", flagFile: good, wantErr: "--token and --token-file", usage: true},
		{name: "missing file", flagFile: missing, wantErr: missing},
		{name: "missing env file", env: map[string]string{envTokenFile: missing, envToken: "e"}, wantErr: envTokenFile},
		{name: "empty file", flagFile: file("empty", "", 0o600), wantErr: "is empty"},
		{name: "newline only", flagFile: file("nl", "\n", 0o600), wantErr: "is empty"},
		{name: "two lines", flagFile: file("two", "a\nb\n", 0o600), wantErr: "more than one line"},
		{name: "too large", flagFile: file("big", strings.Repeat("a", maxTokenFile+1), 0o600), wantErr: "larger than"},
		{name: "a directory", flagFile: dir, wantErr: dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveToken(tc.flag, tc.flagFile, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				var ue *usageError
				if errors.As(err, &ue) != tc.usage {
					t.Errorf("usage error = %v, want %v", !tc.usage, tc.usage)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got.token != tc.want || got.from != tc.from {
				t.Errorf("got token %q from %q, want %q from %q", got.token, got.from, tc.want, tc.from)
			}
			if (len(got.notes) > 0) != tc.wantNote {
				t.Errorf("notes = %q, want some: %v", got.notes, tc.wantNote)
			}
		})
	}
}

// The scrub is tested in a child process: it rewrites the process's own
// environment memory.
const scrubChildEnv = "SHELLCTL_TEST_SCRUB_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(scrubChildEnv) != "" {
		scrubChild()
		return
	}
	os.Exit(m.Run())
}

// scrubChild scrubs its environment and prints what Go still sees and what
// /proc/self/environ shows, for TestScrubEnv.
func scrubChild() {
	names, err := scrubEnv()
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		return
	}
	os.Stdout.WriteString("names " + strings.Join(names, ",") + "\n")
	for _, k := range []string{"MY_PASS", "DATABASE_URL", "SHELLCTL_AUTH_TOKEN", "HARMLESS", "DUP_SECRET"} {
		os.Stdout.WriteString("go " + k + "=" + os.Getenv(k) + "\n")
	}
	found := false
	for _, kv := range os.Environ() {
		if kv == "DATABASE_URL=postgres://u:pw-db-7c1@h/db" {
			found = true
		}
	}
	if found {
		os.Stdout.WriteString("environ-ok\n")
	}
	raw, _ := os.ReadFile("/proc/self/environ")
	os.Stdout.WriteString("proc " + string(bytes.ReplaceAll(raw, []byte{0}, []byte{'|'})) + "\n")
}

func TestScrubEnv(t *testing.T) {
	// os.StartProcess, not os/exec: the latter would drop the duplicate.
	env := []string{
		scrubChildEnv + "=1",
		"MY_PASS=pw-pass-3e9",
		"DATABASE_URL=postgres://u:pw-db-7c1@h/db",
		"SHELLCTL_AUTH_TOKEN=pw-tok-55a",
		"HARMLESS=visible-4d2",
		"DUP_SECRET=pw-first-1a",
		"DUP_SECRET=pw-second-2b",
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^$"}, &os.ProcAttr{Env: env, Files: []*os.File{nil, w, os.Stderr}})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	r.Close()
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("child: %v %v\n%s", st, err, out)
	}
	s := string(out)
	if strings.Contains(s, "error ") {
		t.Fatalf("scrubEnv: %s", s)
	}
	// Go's view is unchanged: the server still has what it needs.
	for _, want := range []string{
		"go MY_PASS=pw-pass-3e9\n", "go DATABASE_URL=postgres://u:pw-db-7c1@h/db\n",
		"go SHELLCTL_AUTH_TOKEN=pw-tok-55a\n", "go HARMLESS=visible-4d2\n", "go DUP_SECRET=pw-first-1a\n",
		"environ-ok\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("after the scrub Go lost %q:\n%s", want, s)
		}
	}
	_, proc, _ := strings.Cut(s, "proc ")
	for _, secret := range []string{"pw-pass-3e9", "pw-db-7c1", "pw-tok-55a", "pw-first-1a", "pw-second-2b"} {
		if strings.Contains(proc, secret) {
			t.Errorf("/proc/self/environ still shows %q: %s", secret, proc)
		}
	}
	for _, want := range []string{"HARMLESS=visible-4d2|", "MY_PASS=xxxxxxxxxxx|", scrubChildEnv + "=1|"} {
		if !strings.Contains(proc, want) {
			t.Errorf("/proc/self/environ lacks %q: %s", want, proc)
		}
	}
	if !strings.Contains(s, "names MY_PASS,DATABASE_URL,SHELLCTL_AUTH_TOKEN,DUP_SECRET\n") {
		t.Errorf("scrubbed names: %s", s)
	}
}
