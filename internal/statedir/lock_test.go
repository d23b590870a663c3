package statedir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLockExclusive(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, LockName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q (%v), want our pid %d", b, err, os.Getpid())
	}
	// flock is per open file: a second open in this process conflicts
	// just as another process's would.
	_, err = Lock(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid()), "--state-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	release()
	release() // a second call is harmless
	release2, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	release2()
}

func TestLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	// flock(1) holds the lock in a child until its stdin closes.
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("4242\n")
	f.Close()
	cmd := exec.Command("flock", "-x", filepath.Join(dir, LockName), "sh", "-c", "echo locked; read x")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid 4242") {
		t.Fatalf("Lock while another process holds it = %v, want ErrLocked naming pid 4242", err)
	}
	in.Close()
	cmd.Wait()
	release, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock once the other process is gone: %v", err)
	}
	release()
}

func TestLockRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, LockName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("Lock through a planted symlink = %v, want a refusal naming the symlink", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("the symlink's target was changed: %q", b)
	}
}

func TestLockRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, LockName), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Lock(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Lock on a FIFO = %v, want a refusal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lock blocked on a planted FIFO")
	}
}

func TestLockMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	if _, err := Lock(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Lock of a missing dir = %v, want an error naming it", err)
	}
}

func TestLockNotInherited(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	out, err := exec.Command("ls", "-l", "/proc/self/fd/").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), LockName) {
		t.Errorf("a child inherited the lock file:\n%s", out)
	}
}
