package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheRunnerLinksNoHeavyPackages: a runner's binary is resident whole
// in every running job (docs/performance.md, memory), so packages it does
// not need stay out of it. Each of these was cut on purpose: the screen's
// emulator lives in shellctl-screen; log/slog and encoding/json gave way
// to the runner's own logger and JSON; crypto/rand (and with it
// math/big and the FIPS module) to getrandom(2) for the server id.
func TestTheRunnerLinksNoHeavyPackages(t *testing.T) {
	// go test puts its own go first on PATH.
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps of the runner: %v\n%s", err, out)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	if !deps["github.com/shellctl/shellctl/internal/runner"] {
		t.Fatalf("go list -deps names no runner package: %s", out)
	}
	for _, heavy := range []string{
		"crypto/rand", "math/big", "crypto/internal/fips140/aes",
		"log/slog", "encoding/json",
		"github.com/charmbracelet/x/vt", "net/http",
	} {
		if deps[heavy] {
			t.Errorf("shellctl-runner links %s: keep it out of the runner (see this test's comment)", heavy)
		}
	}
}
