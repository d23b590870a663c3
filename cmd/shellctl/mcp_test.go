package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClientToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "envtok")
	if err := os.WriteFile(envFile, []byte("from-env-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envToken: "from-env", envTokenFile: envFile}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		flag, file string
		noEnvFile  bool
		want       string
	}{
		{flag: "from-flag", want: "from-flag"},
		{file: file, want: "from-file"},
		{want: "from-env-file"},
		{noEnvFile: true, want: "from-env"},
	} {
		if c.noEnvFile {
			delete(env, envTokenFile)
		}
		got, err := clientToken(c.flag, c.file, getenv)
		if err != nil || got != c.want {
			t.Errorf("clientToken(%q, %q) = %q, %v; want %q", c.flag, c.file, got, err, c.want)
		}
	}
	var ue *usageError
	if _, err := clientToken("a", file, getenv); !errors.As(err, &ue) {
		t.Errorf("both flags: %v, want a usage error", err)
	}
	if _, err := clientToken("", filepath.Join(dir, "missing"), getenv); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("a missing token file: %v, want an error naming --token-file", err)
	}
}

// `shellctl mcp --help` names every tool the server registers.
func TestMCPHelpListsEveryTool(t *testing.T) {
	long := mcpCmd().Long
	for _, tool := range []string{"shell_run", "shell_wait", "shell_input", "shell_interrupt", "shell_status", "shell_list", "shell_screen", "shell_keys"} {
		if !strings.Contains(long, tool) {
			t.Errorf("shellctl mcp --help does not name %s:\n%s", tool, long)
		}
	}
}
