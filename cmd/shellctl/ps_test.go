package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shellctl/shellctl/internal/statedir"
)

// ps reads a job's script beneath the state dir and never through a link
// planted there.
func TestCommandOfFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"00000000000000aa", "00000000000000bb"} {
		if err := os.MkdirAll(filepath.Join(root, "jobs", id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "jobs", "00000000000000aa", "script"), []byte("echo a\necho b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not for ps"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "jobs", "00000000000000bb", "script")); err != nil {
		t.Fatal(err)
	}
	sd, err := statedir.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if got := commandOf(sd, "00000000000000aa", commandRead); got == nil || *got != oneLine("echo a\necho b\n") {
		t.Fatalf("commandOf of a real script = %v", got)
	}
	if got := commandOf(sd, "00000000000000bb", commandRead); got != nil {
		t.Fatalf("commandOf followed a planted link: %q", *got)
	}
	if got := commandOf(sd, "../../etc", commandRead); got != nil {
		t.Fatalf("commandOf took an id that is no job id: %q", *got)
	}
}
