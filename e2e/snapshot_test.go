package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// shellctl snapshot save and restore, through a real server and the real
// command line: the state dir inside Home is left out, and the archive
// restores into another server's Home.
func TestSnapshotCommandsRoundTrip(t *testing.T) {
	src := startServer(t, serverOpts{token: "snap-token"})
	os.MkdirAll(filepath.Join(src.Home, "proj", "sub"), 0o755)
	os.WriteFile(filepath.Join(src.Home, "proj", "a.txt"), []byte("alpha\n"), 0o640)
	os.WriteFile(filepath.Join(src.Home, "proj", "sub", "skip.log"), []byte("noise"), 0o600)
	os.Symlink("a.txt", filepath.Join(src.Home, "proj", "link"))
	// The original's state dir inside Home is always left out (and no
	// server may keep its state there: jobs write Home).
	os.MkdirAll(filepath.Join(src.Home, ".local", "share", "shellctl"), 0o700)
	os.WriteFile(filepath.Join(src.Home, ".local", "share", "shellctl", "shellctl.db"), []byte("not a database"), 0o600)
	s2 := startServer(t, serverOpts{token: "snap-token", home: src.Home})
	s2.runDone(t, client.RunRequest{Script: "echo job output"})

	archive := filepath.Join(t.TempDir(), "home.tar.zst")
	cli := func(s *server, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "shellctl"), append([]string{"--server", s.URL}, args...)...)
		cmd.Env = []string{"SHELLCTL_AUTH_TOKEN=snap-token", "PATH=/usr/bin:/bin"}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := cli(s2, "snapshot", "save", "-o", archive, "--exclude", "*.log"); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	dst := startServer(t, serverOpts{token: "snap-token"})
	if out, err := cli(dst, "snapshot", "restore", archive); err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dst.Home, "proj", "a.txt")); err != nil || string(b) != "alpha\n" {
		t.Fatalf("restored file: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst.Home, "proj", "a.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("restored mode: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(dst.Home, "proj", "link")); err != nil || l != "a.txt" {
		t.Fatalf("restored link: %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(dst.Home, "proj", "sub", "skip.log")); !os.IsNotExist(err) {
		t.Fatalf("excluded file restored: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst.Home, ".local", "share", "shellctl")); !os.IsNotExist(err) {
		t.Fatalf("the state dir went into the snapshot: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst.Home, "proj", "sub")); err != nil {
		t.Fatalf("directory of an excluded file missing: %v", err)
	}
}

// Both snapshot routes need the token.
func TestSnapshotRoutesNeedToken(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	anon := &client.Client{BaseURL: s.URL}
	for _, path := range []string{"/v1/snapshot/save", "/v1/snapshot/restore"} {
		st, raw, err := anon.Do(ctx(t), "POST", path, []byte("{}"))
		if err != nil || st != 401 || !strings.Contains(string(raw), `"unauthorized"`) {
			t.Errorf("%s without token = %d %s %v", path, st, raw, err)
		}
	}
}

// A bad SHELLCTL_SNAPSHOT_TIMEOUT keeps serve from starting, naming it.
func TestSnapshotBadTimeoutRefusesToStart(t *testing.T) {
	for _, v := range []string{"soon", "-5m", "0"} {
		state := filepath.Join(t.TempDir(), "state")
		cmd := exec.Command(filepath.Join(binDir, "shellctl"), "serve", "--listen", "127.0.0.1:0", "--state-dir", state)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "SHELLCTL_SNAPSHOT_TIMEOUT=" + v}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(out.String(), "SHELLCTL_SNAPSHOT_TIMEOUT") {
				t.Errorf("SHELLCTL_SNAPSHOT_TIMEOUT=%q: err %v, output %q", v, err, out.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("SHELLCTL_SNAPSHOT_TIMEOUT=%q: serve started", v)
		}
	}
}
