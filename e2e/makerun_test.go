package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeRunHasASandboxOfItsOwn: `make run` serves a Home and a state dir
// under the checkout (.run/), never the caller's own Home, which a
// snapshot restore pasted from the README would rewrite.
func TestMakeRunHasASandboxOfItsOwn(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-n", "-C", root, "run")
	cmd.Env = append(os.Environ(), "HOME=/caller/home")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	var serve string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "shellctl serve") {
			serve = l
		}
	}
	wantHome := `HOME="` + filepath.Join(root, ".run/home") + `"`
	wantState := `--state-dir "` + filepath.Join(root, ".run/state") + `"`
	if !strings.Contains(serve, wantHome) || !strings.Contains(serve, wantState) || strings.Contains(serve, "/caller/home") {
		t.Fatalf("make run starts:\n%s\nwant %s and %s", serve, wantHome, wantState)
	}
}
