package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestBuildIsVersioned: make build stamps a v0.x.y version (the git tag,
// or CHANGELOG.md's newest version in a clone without tags), which
// shellctl version and GET /v1/info report.
func TestBuildIsVersioned(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "-n", "-C", root, "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`buildinfo\.Version=(v\d+\.\d+\.\d+\S*)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("make build stamps no v0.x.y version:\n%s", out)
	}
	cl, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	base := regexp.MustCompile(`^v\d+\.\d+\.\d+`).FindString(m[1])
	if !strings.Contains(string(cl), "\n## "+base+"\n") {
		t.Fatalf("version %s (%s) has no section in CHANGELOG.md", m[1], base)
	}
}
