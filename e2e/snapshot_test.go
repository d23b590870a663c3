package e2e

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

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

// Issue 10 item 4, against a real server: an archive that makes its own
// alias of the state dir (`sd -> <state dir>`, an absolute link, the state
// dir being outside Home as serve requires) and then names the database
// through it is refused, the database is the same file with the same bytes, nothing is
// planted next to it, and the server still restarts on it with its jobs.
func TestSnapshotRestoreAliasLeavesStateDirAlone(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	s := startServer(t, serverOpts{token: "snap-token", home: home, stateDir: state})
	res, _ := s.runDone(t, client.RunRequest{Script: "echo before the restore"})
	// A clean stop, so the database file is complete and quiet while it is
	// compared; then the same server again, the one under attack.
	s.kill(syscall.SIGTERM)
	db := filepath.Join(state, "shellctl.db")
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	fiBefore, _ := os.Stat(db)
	s.start()

	var raw bytes.Buffer
	zw, _ := zstd.NewWriter(&raw)
	tw := tar.NewWriter(zw)
	for _, h := range []tar.Header{
		{Typeflag: tar.TypeSymlink, Name: "sd", Linkname: state},
		{Typeflag: tar.TypeReg, Name: "sd/shellctl.db", Mode: 0o600, Size: 5},
		{Typeflag: tar.TypeReg, Name: "sd/planted", Mode: 0o600, Size: 5},
	} {
		tw.WriteHeader(&h)
		if h.Size > 0 {
			tw.Write([]byte("pwned"))
		}
	}
	tw.Close()
	zw.Close()
	st, body, err := s.c.Do(ctx(t), "POST", "/v1/snapshot/restore", raw.Bytes())
	if err != nil || st != 400 || !strings.Contains(string(body), `"archive_malformed"`) || !strings.Contains(string(body), "symbolic link") {
		t.Errorf("restore through an alias = %d %s %v, want 400 archive_malformed naming the link", st, body, err)
	}

	s.kill(syscall.SIGTERM)
	after, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if fiAfter, _ := os.Stat(db); !os.SameFile(fiBefore, fiAfter) {
		t.Errorf("the database file was replaced by another one")
	}
	if !bytes.Equal(before, after) {
		t.Errorf("database bytes changed (%d bytes before, %d after; %q)", len(before), len(after), after[:min(len(after), 16)])
	}
	if _, err := os.Lstat(filepath.Join(state, "planted")); err == nil {
		t.Errorf("a file was planted in the state dir")
	}
	s.start()
	list, err := s.c.List(ctx(t), "", 10)
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	found := false
	for _, j := range list {
		found = found || j.JobID == res.JobID
	}
	if !found {
		t.Errorf("the job run before the restore is gone after a restart: %+v", list)
	}
}
