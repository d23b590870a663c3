package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Skipf("no %s: %v", from, err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// The stage's binary is found beside the runner's once and started by its
// handle: a name swapped after the lookup changes nothing.
func TestStageBinaryStartsByHandle(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, StageBinary)
	copyFile(t, "/bin/true", p, 0o755)
	h, err := openExecutable(dir, StageBinary, filepath.Join(dir, "shellctl-runner"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The name now points to a program that fails.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "/bin/false", p, 0o755)
	if err := exec.Command(fdPath(h)).Run(); err != nil {
		t.Fatalf("start by the handle: %v (the swapped name was followed)", err)
	}
	if err := exec.Command(p).Run(); err == nil {
		t.Fatal("the swapped-in program exited 0: the test proves nothing")
	}
}

// Missing or not executable: an error that names the file and says what
// to do (the runner then uses its own binary as the stage).
func TestStageBinaryRefusals(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "shellctl-runner")
	if _, err := openExecutable(dir, StageBinary, self); err == nil || !strings.Contains(err.Error(), "install it beside "+self) {
		t.Errorf("missing: err %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, StageBinary), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openExecutable(dir, StageBinary, self); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("not executable: err %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := openExecutable(dir, "sub", self); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("directory: err %v", err)
	}
}
