package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// go test ./cmd/dify-agent -run TestHelp -update rewrites the golden files.
var update = flag.Bool("update", false, "rewrite testdata/help/*.txt")

const helpDumpFile = "../../docs/dify-agent-cli-help.json"

// helpDump runs __dump-cli-help and decodes it: command path -> --help.
func helpDump(t *testing.T) (map[string]string, string) {
	t.Helper()
	r := runBin(t, t.TempDir(), nil, strings.NewReader(""), "__dump-cli-help")
	if r.code != 0 {
		t.Fatalf("__dump-cli-help: exit %d: %s", r.code, r.stderr)
	}
	var dump map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &dump); err != nil {
		t.Fatal(err)
	}
	return dump, r.stdout
}

// commandPaths returns the argv (without "dify-agent") of every command.
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	dump, _ := helpDump(t)
	var paths [][]string
	for k := range dump {
		if k == "" {
			paths = append(paths, nil)
			continue
		}
		paths = append(paths, strings.Split(k, " "))
	}
	return paths
}

// The help of every command is exact: it is shown to a model.
func TestHelpGolden(t *testing.T) {
	paths := commandPaths(t)
	if len(paths) < 42 {
		t.Fatalf("only %d commands in the dump", len(paths))
	}
	dir := filepath.Join("testdata", "help")
	seen := map[string]bool{}
	for _, p := range paths {
		name := "root"
		if len(p) > 0 {
			name = strings.Join(p, "_")
		}
		file := filepath.Join(dir, name+".txt")
		seen[name+".txt"] = true
		// Help needs no connection settings.
		r := runBin(t, t.TempDir(), nil, strings.NewReader(""), append(p, "--help")...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%q --help: exit %d, stderr %q", p, r.code, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if len(line) > 100 {
				t.Errorf("%q --help: line longer than 100 bytes: %q", p, line)
			}
		}
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%q: %v (run go test ./cmd/dify-agent -run TestHelp -update)", p, err)
		}
		if r.stdout != string(want) {
			t.Errorf("%q --help differs from %s:\n--- got\n%s--- want\n%s", p, file, r.stdout, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !seen[e.Name()] {
			t.Errorf("%s has no command: remove it", filepath.Join(dir, e.Name()))
		}
	}
}

// "help CMD" and "CMD --help" print the same.
func TestHelpCommandMatchesFlag(t *testing.T) {
	a := runBin(t, t.TempDir(), nil, strings.NewReader(""), "help", "config", "prompt", "push")
	b := runBin(t, t.TempDir(), nil, strings.NewReader(""), "config", "prompt", "push", "-h")
	if a.code != 0 || a.stdout != b.stdout || a.stdout == "" {
		t.Fatalf("help config prompt push = %q (exit %d), -h = %q", a.stdout, a.code, b.stdout)
	}
}

// docs/dify-agent-cli-help.json must be what the binary prints now.
func TestHelpDumpFileIsCurrent(t *testing.T) {
	r := runBin(t, t.TempDir(), nil, strings.NewReader(""), "__dump-cli-help")
	if r.code != 0 {
		t.Fatalf("__dump-cli-help: exit %d: %s", r.code, r.stderr)
	}
	got, err := os.ReadFile(helpDumpFile)
	if err != nil {
		t.Fatalf("read docs/dify-agent-cli-help.json: %v; run `make gen-cli-help`", err)
	}
	if string(got) != r.stdout {
		t.Fatalf("docs/dify-agent-cli-help.json is out of date: run `make gen-cli-help`")
	}
}

// The dump is the original's format: each key a command path, each value
// exactly what "dify-agent PATH --help" prints without trailing newlines;
// keys sorted, two-space indent, a final newline. Hidden commands are not
// in it, so the model never sees home-snapshot.
func TestHelpDumpFormat(t *testing.T) {
	dump, raw := helpDump(t)
	for k, v := range dump {
		args := []string{"--help"}
		if k != "" {
			args = append(strings.Split(k, " "), "--help")
		}
		r := runBin(t, t.TempDir(), nil, strings.NewReader(""), args...)
		if want := strings.TrimRight(r.stdout, "\n"); v != want {
			t.Errorf("dump[%q] = %q, want %q", k, v, want)
		}
	}
	for _, k := range []string{"file upload", "file download", "file public-url", "drive list", "drive pull",
		"drive push", "knowledge", "knowledge search", "knowledge image", "config prompt pull"} {
		if _, ok := dump[k]; !ok {
			t.Errorf("dump has no %q", k)
		}
	}
	for k := range dump {
		if strings.HasPrefix(k, "home-snapshot") || strings.HasPrefix(k, "__") || k == "help" ||
			strings.Contains(dump[k], "home-snapshot") || strings.Contains(dump[k], "--exclude") {
			t.Errorf("hidden command in the dump: %q", k)
		}
	}
	if !strings.HasPrefix(raw, "{\n  \"\": ") || !strings.HasSuffix(raw, "\"\n}\n") {
		t.Errorf("dump is not an indented object ending in a newline: %.40q ... %q", raw, raw[len(raw)-10:])
	}
	// The hidden group still works when asked for by name.
	if r := runBin(t, t.TempDir(), nil, strings.NewReader(""), "home-snapshot", "--help"); r.code != 0 ||
		!strings.Contains(r.stdout, "upload") {
		t.Errorf("home-snapshot --help: exit %d %q", r.code, r.stdout)
	}
}
