package snapshot

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// These tests go through the HTTP route (newServer, restoreRaw) only, so the
// same file runs against any version of the package's Go API.

func errMessage(t *testing.T, b []byte) string {
	t.Helper()
	var env struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("not an error envelope: %q", b)
	}
	return env.Error.Message
}

func symlinkEnt(name, target string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
}

func hardlinkEnt(name, target string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}}
}

func dirEnt(name string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

// liveState makes a state dir at home/rel holding a database and one job's
// output, as a running server has it.
func liveState(t *testing.T, home, rel string) string {
	t.Helper()
	state := filepath.Join(home, rel)
	writeFile(t, filepath.Join(state, "shellctl.db"), "live database bytes", 0o600)
	writeFile(t, filepath.Join(state, "jobs", "j1", "output.log"), "job output", 0o600)
	return state
}

// TestRestoreAliasIntoStateDir: issue 10 item 4. An archive that names the
// state dir through a symlink of its own (or any other alias) must not
// write, create or link anything in it. The old protection compared names
// and let every one of these through.
func TestRestoreAliasIntoStateDir(t *testing.T) {
	for _, rel := range []string{".local/share/shellctl", "work/relocated-state"} {
		cases := []struct {
			name string
			ents func(state string) []ent
		}{
			{"relative alias, file", func(string) []ent {
				return []ent{symlinkEnt("sd", rel), file("sd/shellctl.db", "pwned")}
			}},
			{"absolute alias, file", func(state string) []ent {
				return []ent{symlinkEnt("sd", state), file("sd/shellctl.db", "pwned")}
			}},
			{"alias of a parent", func(string) []ent {
				return []ent{dirEnt("a/"), symlinkEnt("a/p", "../"+filepath.Dir(rel)),
					file("a/p/"+filepath.Base(rel)+"/shellctl.db", "pwned")}
			}},
			{"alias, new file", func(string) []ent {
				return []ent{symlinkEnt("sd", rel), file("sd/planted", "pwned")}
			}},
			{"alias, directory", func(string) []ent {
				return []ent{symlinkEnt("sd", rel), dirEnt("sd/jobs/evil/")}
			}},
			{"alias, symlink inside", func(string) []ent {
				return []ent{symlinkEnt("sd", rel), symlinkEnt("sd/jobs/j1/output.log.new", "/etc/passwd")}
			}},
			{"alias, hard link created inside", func(string) []ent {
				return []ent{file("f", "x"), symlinkEnt("sd", rel), hardlinkEnt("sd/linked", "f")}
			}},
			{"alias, hard link to the database", func(string) []ent {
				return []ent{symlinkEnt("sd", rel), hardlinkEnt("db", "sd/shellctl.db")}
			}},
			{"alias, file over a job's output", func(string) []ent {
				return []ent{symlinkEnt("sd", rel), file("sd/jobs/j1/output.log", "pwned")}
			}},
		}
		for _, c := range cases {
			t.Run(rel+"/"+c.name, func(t *testing.T) {
				home := t.TempDir()
				state := liveState(t, home, rel)
				before := treeState(t, state)
				_, srv, _ := newServer(t, Config{Home: home, StateDir: state})
				resp, body := restoreRaw(t, srv, makeArchive(t, c.ents(state)...))
				if resp.StatusCode != 400 || errCode(t, body) != "archive_malformed" {
					t.Errorf("got %d %s, want 400 archive_malformed", resp.StatusCode, body)
				}
				diffStates(t, before, treeState(t, state))
				if b, _ := os.ReadFile(filepath.Join(state, "shellctl.db")); string(b) != "live database bytes" {
					t.Errorf("database replaced: %q", b)
				}
				if _, err := os.Lstat(filepath.Join(home, "db")); err == nil {
					t.Errorf("a hard link to the database was created in Home")
				}
			})
		}
	}
}

// TestRestoreStateDirByIdentity: the state dir is left alone whatever name
// the archive uses for it, including its own (entries there are skipped,
// the rest is restored), and an entry standing where the state dir is does
// not replace it.
func TestRestoreStateDirByIdentity(t *testing.T) {
	for _, c := range []struct {
		name string
		ents []ent
	}{
		{"own name, file", []ent{file("work/state/shellctl.db", "pwned")}},
		{"own name, directory then file", []ent{dirEnt("work/"), dirEnt("work/state/"), file("work/state/shellctl.db", "pwned")}},
		{"own name, new file", []ent{file("work/state/jobs/j1/new", "pwned")}},
		{"file in place of the state dir", []ent{file("work/state", "pwned")}},
		{"symlink in place of the state dir", []ent{symlinkEnt("work/state", "/tmp")}},
		{"hard link to a state file", []ent{hardlinkEnt("db", "work/state/shellctl.db")}},
		{"tar-style name", []ent{file("./work//state/./shellctl.db", "pwned")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			state := liveState(t, home, "work/state")
			// The server may name its state dir by another path: identity
			// is what counts.
			alias := filepath.Join(t.TempDir(), "alias")
			if err := os.Symlink(state, alias); err != nil {
				t.Fatal(err)
			}
			before := treeState(t, state)
			_, srv, _ := newServer(t, Config{Home: home, StateDir: alias})
			resp, body := restoreRaw(t, srv, makeArchive(t, append(c.ents, file("after", "restored"))...))
			if resp.StatusCode != 200 {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			diffStates(t, before, treeState(t, state))
			if _, err := os.Lstat(filepath.Join(home, "db")); err == nil {
				t.Errorf("a hard link to the database was created in Home")
			}
			if b, _ := os.ReadFile(filepath.Join(home, "after")); string(b) != "restored" {
				t.Errorf("the entry after was not restored: %q", b)
			}
		})
	}
}

// TestRestoreNeverFollowsSymlinks: a symlink, the archive's own or one
// already in Home, is never traversed, even when it points inside Home.
func TestRestoreNeverFollowsSymlinks(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "target"), "original", 0o644)
	cases := []struct {
		name  string
		setup func(t *testing.T, home string)
		ents  []ent
		wants string // the message names this
	}{
		{"file through the archive's link to a directory in Home", nil,
			[]ent{dirEnt("real/"), symlinkEnt("l", "real"), file("l/f", "x")}, `"l"`},
		{"directory through the archive's link", nil,
			[]ent{dirEnt("real/"), symlinkEnt("l", "real"), dirEnt("l/sub/")}, `"l"`},
		{"symlink through the archive's link", nil,
			[]ent{dirEnt("real/"), symlinkEnt("l", "real"), symlinkEnt("l/s", "x")}, `"l"`},
		{"hard link created through the archive's link", nil,
			[]ent{dirEnt("real/"), file("f", "x"), symlinkEnt("l", "real"), hardlinkEnt("l/h", "f")}, `"l"`},
		{"hard link whose target is reached through a link", nil,
			[]ent{dirEnt("real/"), file("real/f", "x"), symlinkEnt("l", "real"), hardlinkEnt("h", "l/f")}, `"l"`},
		{"link deeper in the path", nil,
			[]ent{dirEnt("a/"), dirEnt("a/real/"), symlinkEnt("a/l", "real"), file("a/l/b/c", "x")}, `"a/l"`},
		{"file through a link already in Home, pointing inside", func(t *testing.T, home string) {
			os.Mkdir(filepath.Join(home, "real"), 0o755)
			os.Symlink("real", filepath.Join(home, "l"))
		}, []ent{file("l/f", "x")}, `"l"`},
		{"file through a link already in Home, pointing outside", func(t *testing.T, home string) {
			os.Symlink(outside, filepath.Join(home, "out"))
		}, []ent{file("out/target", "pwned")}, `"out"`},
		{"new file through a link already in Home, pointing outside", func(t *testing.T, home string) {
			os.Symlink(outside, filepath.Join(home, "out"))
		}, []ent{file("out/new/file", "pwned")}, `"out"`},
		{"hard link to outside through a link already in Home", func(t *testing.T, home string) {
			os.Symlink(outside, filepath.Join(home, "out"))
		}, []ent{hardlinkEnt("h", "out/target")}, `"out"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.setup != nil {
				c.setup(t, home)
			}
			beforeOut := treeState(t, outside)
			_, srv, _ := newServer(t, Config{Home: home})
			resp, body := restoreRaw(t, srv, makeArchive(t, c.ents...))
			if resp.StatusCode != 400 || errCode(t, body) != "archive_malformed" {
				t.Fatalf("got %d %s, want 400 archive_malformed", resp.StatusCode, body)
			}
			if msg := errMessage(t, body); !strings.Contains(msg, c.wants) || !strings.Contains(msg, "symbolic link") {
				t.Errorf("message %q does not name the link %s", msg, c.wants)
			}
			diffStates(t, beforeOut, treeState(t, outside))
			// Nothing landed in the directory the link points to (real/f
			// is the archive's own entry in one case).
			for _, dir := range []string{"real", "a/real"} {
				ents, _ := os.ReadDir(filepath.Join(home, dir))
				for _, e := range ents {
					if e.Name() != "f" {
						t.Errorf("%s/%s created through a link", dir, e.Name())
					}
				}
			}
		})
	}
}

// TestRestoreReplacesLinksItNames: an entry that names a symlink itself
// replaces the link (never its target), whether the link was in Home or
// came with the archive.
func TestRestoreReplacesLinksItNames(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "target"), "original", 0o644)
	home := t.TempDir()
	os.Symlink(outside, filepath.Join(home, "dir-was-link"))
	os.Symlink(filepath.Join(outside, "target"), filepath.Join(home, "file-was-link"))
	beforeOut := treeState(t, outside)
	_, srv, _ := newServer(t, Config{Home: home})
	resp, body := restoreRaw(t, srv, makeArchive(t,
		dirEnt("dir-was-link/"), file("dir-was-link/target", "new"),
		file("file-was-link", "new"),
		symlinkEnt("l", "dir-was-link"), dirEnt("l/"), file("l/g", "new"),
	))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	diffStates(t, beforeOut, treeState(t, outside))
	for _, name := range []string{"dir-was-link", "l"} {
		if fi, err := os.Lstat(filepath.Join(home, name)); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory now: %v %v", name, fi, err)
		}
	}
	for _, name := range []string{"dir-was-link/target", "file-was-link", "l/g"} {
		if b, err := os.ReadFile(filepath.Join(home, name)); err != nil || string(b) != "new" {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
}

// TestRestoreDoesNotWriteThroughHardLinkInHome: a name in Home that is a
// hard link to a state file is replaced, never written through.
func TestRestoreDoesNotWriteThroughHardLinkInHome(t *testing.T) {
	home := t.TempDir()
	state := liveState(t, home, ".local/share/shellctl")
	if err := os.Link(filepath.Join(state, "shellctl.db"), filepath.Join(home, "x")); err != nil {
		t.Fatal(err)
	}
	_, srv, _ := newServer(t, Config{Home: home, StateDir: state})
	resp, body := restoreRaw(t, srv, makeArchive(t, file("x", "pwned")))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "shellctl.db")); string(b) != "live database bytes" {
		t.Errorf("database written through a hard link: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "x")); string(b) != "pwned" {
		t.Errorf("x: %q", b)
	}
}

// TestRestoreIntoUnreadableExistingDir: an existing directory that the
// archive lists but the server may not read (mode 000) still receives its
// entries and then gets the archive's mode. Root reads everything, so as
// root the test runs itself again as nobody (uid 65534).
func TestRestoreIntoUnreadableExistingDir(t *testing.T) {
	home := os.Getenv("SNAPSHOT_TEST_UNREADABLE_HOME")
	if home == "" && os.Getuid() == 0 {
		runAsNobody(t)
		return
	}
	if home == "" {
		home = t.TempDir()
	}
	locked := filepath.Join(home, "locked")
	writeFile(t, filepath.Join(locked, "old"), "kept", 0o644)
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	data := makeArchive(t, ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "locked/", Mode: 0o750}}, file("locked/new", "new"))
	if _, err := Restore(t.Context(), bytes.NewReader(data), home, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(locked)
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("locked: %v %v, want mode 750", fi, err)
	}
	for name, want := range map[string]string{"old": "kept", "new": "new"} {
		if b, err := os.ReadFile(filepath.Join(locked, name)); err != nil || string(b) != want {
			t.Errorf("locked/%s: %q %v", name, b, err)
		}
	}
}

// runAsNobody runs the calling test again in a copy of the test binary as
// uid and gid 65534, in a Home that user owns.
func runAsNobody(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("", "snapshot-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "snapshot.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+t.Name()+"$", "-test.v")
	cmd.Env = []string{"SNAPSHOT_TEST_UNREADABLE_HOME=" + home, "HOME=" + home, "TMPDIR=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}

// TestRestoreRefusesHomeThatIsStateDir: when Home itself is the state dir
// (under any name), nothing is restored, and the error is not the
// archive's fault.
func TestRestoreRefusesHomeThatIsStateDir(t *testing.T) {
	home := t.TempDir()
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(home, alias); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(t.Context(), bytes.NewReader(makeArchive(t, file("f", "x"))), home, RestoreOptions{StateDir: alias})
	if err == nil || errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "state dir") {
		t.Fatalf("err = %v, want an error saying Home is the state dir", err)
	}
	if _, err := os.Lstat(filepath.Join(home, "f")); err == nil {
		t.Error("f restored into the state dir")
	}
}
