package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// program writes a shell script that exits with code.
func program(t *testing.T, to string, code int) {
	t.Helper()
	if err := os.WriteFile(to, []byte("#!/bin/sh\nexit "+strconv.Itoa(code)+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// binaryThatSucceeds copies this test binary to to: run with -test.run=^$
// it exits 0. (A script cannot be started through a descriptor that
// closes at exec: its interpreter could not open it.)
func binaryThatSucceeds(t *testing.T, to string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// The stage's binary is found beside the runner's once and started by its
// handle: a name swapped after the lookup changes nothing.
func TestStageBinaryStartsByHandle(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, StageBinary)
	binaryThatSucceeds(t, p)
	h, err := openExecutable(dir, StageBinary, filepath.Join(dir, "shellctl-runner"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The name now points to a program that fails.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	program(t, p, 1)
	if err := exec.Command(fdPath(h), "-test.run=^$").Run(); err != nil {
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
