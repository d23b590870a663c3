package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// A helper binary someone else could have written is refused: one
// writable by its group or by others, one owned by a user that is neither
// root nor the runner's. The error names the file, what was found and
// what to do.
func TestStageBinaryUntrusted(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "shellctl-runner")
	p := filepath.Join(dir, StageBinary)
	binaryThatSucceeds(t, p)
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{
		{0o775, "writable by its group or by others (mode 0775): make it writable by its owner only (chmod go-w " + p + ")"},
		{0o757, "mode 0757"},
		{0o777, "mode 0777"},
	} {
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		if h, err := openExecutable(dir, StageBinary, self); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			if h != nil {
				h.Close()
			}
			t.Errorf("mode %o: err %v, want it to say %q", c.mode, err, c.want)
		}
	}
	// Owner-only write, as make build and the image install it: taken.
	for _, mode := range []os.FileMode{0o755, 0o700, 0o555} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		h, err := openExecutable(dir, StageBinary, self)
		if err != nil {
			t.Fatalf("mode %o: %v", mode, err)
		}
		h.Close()
	}
	// Another user's: only root can make one here.
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give the binary another owner")
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	want := p + " is owned by uid 4242, not by root or by the runner's uid 0"
	if _, err := openExecutable(dir, StageBinary, self); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("another owner: err %v, want %q", err, want)
	}
}

// The owner rule for a runner that is not root: its own binaries and
// root's are taken, another user's are not.
func TestTrustedFileOwners(t *testing.T) {
	for _, c := range []struct {
		owner, runner uint32
		ok            bool
	}{
		{0, 1000, true}, {1000, 1000, true}, {1001, 1000, false}, {0, 0, true}, {1000, 0, false},
	} {
		st := unix.Stat_t{Uid: c.owner, Mode: unix.S_IFREG | 0o755}
		err := trustedFile("/x/shellctl-stage", &st, int(c.runner))
		if (err == nil) != c.ok {
			t.Errorf("owner %d, runner %d: err %v, want ok %v", c.owner, c.runner, err, c.ok)
		}
	}
}
