package main

import (
	"strings"
	"testing"
)

// `shellctl mcp --help` names every tool the server registers.
func TestMCPHelpListsEveryTool(t *testing.T) {
	long := mcpCmd().Long
	for _, tool := range []string{"shell_run", "shell_wait", "shell_input", "shell_interrupt", "shell_status", "shell_list", "shell_screen", "shell_keys"} {
		if !strings.Contains(long, tool) {
			t.Errorf("shellctl mcp --help does not name %s:\n%s", tool, long)
		}
	}
}

// `shellctl version` and `--version` print the link-time version.
func TestVersionVerb(t *testing.T) {
	root := rootCmd()
	if root.Version == "" {
		t.Fatal("the root command has no version: --version would not exist")
	}
	found := false
	for _, c := range root.Commands() {
		found = found || c.Name() == "version"
	}
	if !found {
		t.Fatal("no version verb")
	}
}
