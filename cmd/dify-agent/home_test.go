package main

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

// homeHarness is a harness whose binary runs with HOME set and a purpose
// token.
func homeHarness(t *testing.T, token string) (*harness, string) {
	h := newHarness(t)
	home := filepath.Join(h.root, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	h.env["HOME"] = home
	h.env[agentstub.EnvToken] = token
	return h, home
}

// fillHome makes a Home with every kind of entry.
func fillHome(t *testing.T, home string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(home, "proj", "sub"), 0o750))
	must(os.WriteFile(filepath.Join(home, "proj", "a.txt"), []byte("alpha\n"), 0o640))
	must(os.WriteFile(filepath.Join(home, "proj", "sub", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.Symlink("a.txt", filepath.Join(home, "proj", "rel-link")))
	must(os.Symlink("/etc/hostname", filepath.Join(home, "proj", "abs-link")))
	must(os.Mkdir(filepath.Join(home, "empty"), 0o700))
	must(syscall.Mkfifo(filepath.Join(home, "proj", "fifo"), 0o600))
	must(os.MkdirAll(filepath.Join(home, "workspace", "big"), 0o755))
	must(os.WriteFile(filepath.Join(home, "workspace", "big", "x"), []byte("excluded"), 0o644))
	must(os.MkdirAll(filepath.Join(home, ".local", "share", "shellctl"), 0o755))
	must(os.WriteFile(filepath.Join(home, ".local", "share", "shellctl", "db"), []byte("state"), 0o600))
	must(os.WriteFile(filepath.Join(home, ".local", "keep"), []byte("kept"), 0o600))
	must(os.WriteFile(filepath.Join(home, "workspace.txt"), []byte("not excluded: a sibling"), 0o644))
}

// tree describes every entry under dir: type, permissions, content or
// link target. FIFOs and the like show as "other".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			out[rel] = "dir " + m.Perm().String()
		case m&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case m.IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = "file " + m.Perm().String() + " " + string(b)
		default:
			out[rel] = "other"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func archiveEntries(t *testing.T, data []byte) []*tar.Header {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var out []*tar.Header
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, hdr)
	}
}

// upload, then download into another empty Home: the Homes compare equal
// but for what was excluded and the FIFO.
func TestHomeSnapshotRoundTrip(t *testing.T) {
	h, home := homeHarness(t, fakestub.TokenHomeWrite)
	fillHome(t, home)
	h.env["TMPDIR"] = t.TempDir()
	h.run("", "home-snapshot", "upload", "--exclude", "workspace", "--exclude", ".local/share/shellctl").want(t, 0, "", "")
	reqs := h.stub.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	q := reqs[0]
	if q.Method != "PUT" || q.Path != "/agent-stub/home-snapshots/archive" || q.RawQuery != "" ||
		q.Authorization != "Bearer "+fakestub.TokenHomeWrite || q.ContentType != "application/zstd" || q.ContentLength != -1 {
		t.Fatalf("request %s %s?%s auth %q type %q length %d", q.Method, q.Path, q.RawQuery, q.Authorization, q.ContentType, q.ContentLength)
	}
	if left, _ := os.ReadDir(h.env["TMPDIR"]); len(left) != 0 {
		t.Fatalf("temporary files: %v", left)
	}
	data, ok := h.stub.HomeArchive(fakestub.DefaultSnapshotRef)
	if !ok || int64(len(data)) != h.stub.HomeBytesReceived() {
		t.Fatalf("archive %v, %d bytes of %d", ok, len(data), h.stub.HomeBytesReceived())
	}
	var names []string
	for _, hdr := range archiveEntries(t, data) {
		names = append(names, strings.TrimSuffix(hdr.Name, "/"))
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: owner %d/%d %q/%q", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		if strings.HasPrefix(hdr.Name, "/") || strings.Contains(hdr.Name, "..") {
			t.Errorf("bad name %q", hdr.Name)
		}
	}
	sort.Strings(names)
	want := ".local .local/keep .local/share empty proj proj/a.txt proj/abs-link proj/rel-link proj/sub proj/sub/run.sh workspace.txt"
	if strings.Join(names, " ") != want {
		t.Fatalf("entries\n%s\nwant\n%s", strings.Join(names, " "), want)
	}

	// The other side: an empty Home and the read token.
	dst := filepath.Join(h.root, "home2")
	os.Mkdir(dst, 0o755)
	h.env["HOME"], h.env[agentstub.EnvToken] = dst, fakestub.TokenHomeRead
	h.run("", "home-snapshot", "download").want(t, 0, "", "")
	get := h.stub.Requests()[1]
	if get.Method != "GET" || get.Path != "/agent-stub/home-snapshots/archive" || get.Authorization != "Bearer "+fakestub.TokenHomeRead {
		t.Fatalf("download request %+v", get)
	}
	src := tree(t, home)
	for k := range src {
		if k == "workspace" || strings.HasPrefix(k, "workspace/") || strings.HasPrefix(k, ".local/share/shellctl") || k == "proj/fifo" {
			delete(src, k)
		}
	}
	got := tree(t, dst)
	if len(got) != len(src) {
		t.Fatalf("restored %d entries, want %d\n%v\n%v", len(got), len(src), got, src)
	}
	for k, v := range src {
		if got[k] != v {
			t.Errorf("%s: restored %q, want %q", k, got[k], v)
		}
	}
	// Write-once: a second upload of the same ref is refused.
	h.env["HOME"], h.env[agentstub.EnvToken] = home, fakestub.TokenHomeWrite
	h.run("", "home-snapshot", "upload").want(t, 1, "", "dify-agent: agent stub Home Snapshot upload failed (HTTP 409): object exists\n")
	// Download into a Home that is not empty: refused before any request.
	n := len(h.stub.Requests())
	h.env["HOME"], h.env[agentstub.EnvToken] = dst, fakestub.TokenHomeRead
	h.run("", "home-snapshot", "download").want(t, 1, "", "dify-agent: HOME must be empty before Home Snapshot download\n")
	if len(h.stub.Requests()) != n {
		t.Fatal("a request was made for a Home that is not empty")
	}
}

func TestHomeSnapshotLocalRefusals(t *testing.T) {
	h, home := homeHarness(t, fakestub.TokenHomeWrite)
	for _, c := range []struct {
		exclude, stderr string
	}{
		{"", `dify-agent: invalid Home Snapshot exclude ""`},
		{"/abs", `dify-agent: invalid Home Snapshot exclude "/abs"`},
		{`a\b`, `dify-agent: invalid Home Snapshot exclude "a\\b"`},
		{"*.log", `dify-agent: Home Snapshot exclude must not be a glob: "*.log"`},
		{"a/[x]", `dify-agent: Home Snapshot exclude must not be a glob: "a/[x]"`},
		{"..", `dify-agent: invalid Home Snapshot exclude ".."`},
		{"../x", `dify-agent: invalid Home Snapshot exclude "../x"`},
		{".", `dify-agent: invalid Home Snapshot exclude "."`},
		{"a/", `dify-agent: Home Snapshot exclude must be normalized: "a/"`},
		{"a//b", `dify-agent: Home Snapshot exclude must be normalized: "a//b"`},
		{"a/./b", `dify-agent: Home Snapshot exclude must be normalized: "a/./b"`},
		{"a/../b", `dify-agent: Home Snapshot exclude must be normalized: "a/../b"`},
	} {
		h.run("", "home-snapshot", "upload", "--exclude", c.exclude).want(t, 1, "", c.stderr+"\n")
	}
	for _, c := range []struct{ home, stderr string }{
		{"  ", "dify-agent: HOME must be set\n"},
		{"rel/home", "dify-agent: HOME must be an absolute path\n"},
		{filepath.Join(home, "missing"), "dify-agent: stat HOME: stat " + filepath.Join(home, "missing") + ": no such file or directory\n"},
	} {
		h.env["HOME"] = c.home
		for _, sub := range []string{"upload", "download"} {
			h.run("", "home-snapshot", sub).want(t, 1, "", c.stderr)
		}
	}
	os.WriteFile(filepath.Join(home, "f"), nil, 0o644)
	h.env["HOME"] = filepath.Join(home, "f")
	h.run("", "home-snapshot", "upload").want(t, 1, "", "dify-agent: HOME must be a directory\n")
	if r := h.run("", "home-snapshot", "upload", "extra"); r.code != 2 {
		t.Fatalf("argument: exit %d", r.code)
	}
	h.wantNoRequests()
}

func TestHomeSnapshotTokens(t *testing.T) {
	h, home := homeHarness(t, testToken)
	os.WriteFile(filepath.Join(home, "f"), []byte("x"), 0o644)
	const bad = "dify-agent: agent stub Home Snapshot upload failed (HTTP 401): invalid Home Snapshot authorization\n"
	for _, tok := range []string{testToken, fakestub.TokenHomeRead, fakestub.TokenExpired} {
		h.env[agentstub.EnvToken] = tok
		h.run("", "home-snapshot", "upload").want(t, 1, "", bad)
	}
	h.env["HOME"] = filepath.Join(h.root, "empty")
	os.Mkdir(h.env["HOME"], 0o755)
	h.env[agentstub.EnvToken] = fakestub.TokenHomeWrite
	h.run("", "home-snapshot", "download").want(t, 1, "",
		"dify-agent: agent stub Home Snapshot download failed (HTTP 401): invalid Home Snapshot authorization\n")
	// A purpose token does not open an ordinary route either.
	h.run("", "knowledge", "spaces").want(t, 1, "", "dify-agent: HTTP 401: invalid or missing Agent Stub authorization\n")
	// Any snapshot_ref is the token's, whatever a query would say: the
	// read token of another ref finds nothing.
	h.stub.SetPurposeToken("other-read", fakestub.ScopeHomeRead, "snap-2")
	h.stub.SetHomeArchive(fakestub.DefaultSnapshotRef, fakestub.HostileArchive("setuid", ""))
	h.env[agentstub.EnvToken] = "other-read"
	h.run("", "home-snapshot", "download").want(t, 1, "",
		"dify-agent: agent stub Home Snapshot download failed (HTTP 404): snapshot is missing\n")
}

func TestHomeSnapshotGatewayFailures(t *testing.T) {
	up := func(mode string) string { return "dify-agent: agent stub Home Snapshot upload failed " + mode }
	down := func(mode string) string { return "dify-agent: agent stub Home Snapshot download failed " + mode }
	for _, c := range []struct {
		mode, sub, stderr string
	}{
		{"store-fail", "upload", up("(HTTP 502): store unavailable\n")},
		{"store-fail-mid", "upload", up("")},
		{"unconfigured", "upload", up("(HTTP 503): Home Snapshot gateway is not configured\n")},
		{"redirect", "upload", up("(HTTP 307): Temporary Redirect\n")},
		{"400", "upload", up("(HTTP 400): bad request\n")},
		{"500", "upload", up("(HTTP 500): internal server error\n")},
		{"missing", "download", down("(HTTP 404): snapshot is missing\n")},
		{"store-fail", "download", down("(HTTP 502): store unavailable\n")},
		{"unconfigured", "download", down("(HTTP 503): Home Snapshot gateway is not configured\n")},
		{"redirect", "download", down("(HTTP 307): Temporary Redirect\n")},
		{"500", "download", down("(HTTP 500): internal server error\n")},
		{"not-zstd", "download", "dify-agent: restore Home Snapshot: archive malformed: "},
		{"tail-cut", "download", "dify-agent: restore Home Snapshot: archive malformed: "},
		{"truncate-download", "download", "dify-agent: restore Home Snapshot: "},
	} {
		t.Run(c.mode+"/"+c.sub, func(t *testing.T) {
			tok := fakestub.TokenHomeWrite
			if c.sub == "download" {
				tok = fakestub.TokenHomeRead
			}
			h, home := homeHarness(t, tok)
			if c.sub == "upload" {
				b := make([]byte, 1<<20)
				rand.Read(b)
				os.WriteFile(filepath.Join(home, "big"), b, 0o644)
			} else {
				src := t.TempDir()
				fillHome(t, src)
				h.stub.SetHomeArchive(fakestub.DefaultSnapshotRef, homeArchive(t, src, 1<<20))
			}
			h.mustMode(c.mode)
			h.run("", "home-snapshot", c.sub).wantFail(t, c.stderr)
			if rs := h.requests("/recorder/"); len(rs) != 0 {
				t.Fatalf("redirect followed: %+v", rs)
			}
		})
	}
}

// homeArchive uploads src through the binary (with a random file of pad
// bytes so streams are long) and returns the stored archive.
func homeArchive(t *testing.T, src string, pad int) []byte {
	t.Helper()
	b := make([]byte, pad)
	rand.Read(b)
	os.WriteFile(filepath.Join(src, "pad.bin"), b, 0o644)
	h, _ := homeHarness(t, fakestub.TokenHomeWrite)
	h.env["HOME"] = src
	h.run("", "home-snapshot", "upload").want(t, 0, "", "")
	data, _ := h.stub.HomeArchive(fakestub.DefaultSnapshotRef)
	return data
}

// A reply that never comes: SIGTERM ends both commands, exit 1.
func TestHomeSnapshotStallCancelled(t *testing.T) {
	for _, sub := range []string{"upload", "download"} {
		tok := fakestub.TokenHomeWrite
		if sub == "download" {
			tok = fakestub.TokenHomeRead
		}
		h, home := homeHarness(t, tok)
		if sub == "upload" {
			os.WriteFile(filepath.Join(home, "f"), []byte("x"), 0o644)
		}
		h.mustMode("stall")
		s := startBin(t, h, "home-snapshot", sub)
		// No timeout applies: still running well after the API timeout of
		// the harness would have fired for an ordinary command.
		deadline := time.Now().Add(30 * time.Second)
		for len(h.requests("/agent-stub/home-snapshots/")) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if r := s.wait(); r.code != 1 || !strings.HasPrefix(r.stderr, "dify-agent: ") {
			t.Fatalf("%s after SIGTERM: %d %q", sub, r.code, r.stderr)
		}
	}
}

// The crafted archives: refused ones write nothing outside Home; the
// others restore as /v1/snapshot/restore does.
func TestHomeSnapshotHostileArchives(t *testing.T) {
	outsideRoot := t.TempDir()
	outside := filepath.Join(outsideRoot, "outside")
	os.Mkdir(outside, 0o755)
	for _, name := range []string{"absolute", "dotdot", "inner-dotdot", "hardlink-out", "fifo", "chardev", "symlink-write",
		// Refused by the original's download, not by /v1/snapshot/restore:
		"hardlink", "duplicate", "dir-twice", "unclean"} {
		t.Run(name, func(t *testing.T) {
			h, home := homeHarness(t, fakestub.TokenHomeRead)
			h.stub.SetHostileTarget(outside)
			h.mustMode(fakestub.HostilePrefix + name)
			r := h.run("", "home-snapshot", "download")
			r.wantFail(t, "dify-agent: restore Home Snapshot: archive malformed: ")
			if why, ok := map[string]string{
				"hardlink":  `entry "b.txt": hard link entries are not accepted`,
				"duplicate": `entry "dup.txt": duplicate entry`,
				"dir-twice": `entry "d": duplicate entry`,
				"unclean":   `entry "a//b": not a clean relative name`,
			}[name]; ok && !strings.Contains(r.stderr, why) {
				t.Fatalf("stderr %q, want %q", r.stderr, why)
			}
			if got := walkFiles(t, outsideRoot); len(got) != 0 {
				t.Fatalf("written outside HOME: %q", got)
			}
			for k, v := range tree(t, home) {
				if strings.HasPrefix(v, "file") && strings.Contains(v, "pwned") || v == "other" {
					t.Fatalf("%s restored: %s", k, v)
				}
			}
		})
	}
	for _, c := range []struct {
		name  string
		check func(t *testing.T, home string)
	}{
		{"setuid", func(t *testing.T, home string) {
			fi, err := os.Stat(filepath.Join(home, "suid"))
			if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755&^umask() {
				t.Fatalf("suid: %v %v", fi.Mode(), err)
			}
		}},
		{"readonly-dir", func(t *testing.T, home string) {
			fi, err := os.Stat(filepath.Join(home, "ro"))
			if b, _ := os.ReadFile(filepath.Join(home, "ro", "child.txt")); err != nil || fi.Mode().Perm() != 0o555 || string(b) != "c" {
				t.Fatalf("ro: %v %v %q", fi.Mode(), err, b)
			}
			os.Chmod(filepath.Join(home, "ro"), 0o755) // so the temp dir can be removed
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, home := homeHarness(t, fakestub.TokenHomeRead)
			h.mustMode(fakestub.HostilePrefix + c.name)
			h.run("", "home-snapshot", "download").want(t, 0, "", "")
			c.check(t, home)
		})
	}
}

// The archive is streamed: the CLI's peak memory stays far below the size
// of Home, and no temporary file is written.
func TestHomeSnapshotUploadStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	h, home := homeHarness(t, fakestub.TokenHomeWrite)
	// Written 1 MiB at a time, and the test's own heap returned, because
	// the child's peak RSS counts the parent's pages it shared before exec.
	f, err := os.Create(filepath.Join(home, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for range 96 {
		rand.Read(chunk)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	debug.FreeOSMemory()
	h.env["TMPDIR"] = t.TempDir()
	s := startBin(t, h, "home-snapshot", "upload")
	if r := s.wait(); r.code != 0 {
		t.Fatalf("upload: %d %q", r.code, r.stderr)
	}
	rss := s.cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB
	t.Logf("peak RSS %d MiB for a 96 MiB Home", rss>>20)
	if rss > 64<<20 {
		t.Fatalf("peak RSS %d MiB: the archive is not streamed", rss>>20)
	}
	if got := h.stub.HomeBytesReceived(); got < 96<<20 {
		t.Fatalf("received %d bytes", got)
	}
	if left, _ := os.ReadDir(h.env["TMPDIR"]); len(left) != 0 {
		t.Fatalf("temporary files: %v", left)
	}
}

// The archive of upload is the original's: filepath.WalkDir's lexical
// order, directory names without "/", every name of a hard-linked file a
// file of its own, absolute links into HOME made relative. Restored under
// another path, the Home works the same.
func TestHomeSnapshotUploadFormat(t *testing.T) {
	h, home := homeHarness(t, fakestub.TokenHomeWrite)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"q", "b", "x", "k", "a", "m", "z", "c", "j", "e", "s", "d", "p", "f"} {
		must(os.WriteFile(filepath.Join(home, "n-"+n), []byte(n), 0o644))
	}
	must(os.MkdirAll(filepath.Join(home, "a", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(home, "a.txt"), []byte("sorts after the directory a"), 0o644))
	must(os.WriteFile(filepath.Join(home, "a", "deep", "data"), []byte("data"), 0o600))
	must(os.Link(filepath.Join(home, "a", "deep", "data"), filepath.Join(home, "a", "hard")))
	must(os.MkdirAll(filepath.Join(home, "workspace"), 0o755))
	must(os.WriteFile(filepath.Join(home, "workspace", "w"), []byte("w"), 0o644))
	must(syscall.Mkfifo(filepath.Join(home, "a", "fifo"), 0o600))
	links := map[string][2]string{ // name: target, archived target
		"a/to-data":    {home + "/a/deep/data", "deep/data"},
		"a/deep/to-up": {home + "/a.txt", "../../a.txt"},
		"to-home":      {home, "."},
		"to-excluded":  {home + "/workspace/w", home + "/workspace/w"},
		"to-outside":   {"/etc/hostname", "/etc/hostname"},
		"to-relative":  {"a.txt", "a.txt"},
	}
	for name, l := range links {
		must(os.Symlink(l[0], filepath.Join(home, name)))
	}
	var want []string
	must(filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == home {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		switch {
		case rel == "workspace":
			return filepath.SkipDir
		case rel == "a/fifo":
			return nil
		}
		want = append(want, rel)
		return nil
	}))

	h.run("", "home-snapshot", "upload", "--exclude", "workspace").want(t, 0, "", "")
	data, _ := h.stub.HomeArchive(fakestub.DefaultSnapshotRef)
	var got []string
	for _, hdr := range archiveEntries(t, data) {
		got = append(got, hdr.Name)
		switch {
		case hdr.Typeflag == tar.TypeSymlink:
			if l := links[hdr.Name]; hdr.Linkname != l[1] {
				t.Errorf("%s: archived target %q, want %q", hdr.Name, hdr.Linkname, l[1])
			}
		case hdr.Name == "a/hard" || hdr.Name == "a/deep/data":
			if hdr.Typeflag != tar.TypeReg || hdr.Size != 4 {
				t.Errorf("%s: type %q size %d, want a regular file of 4 bytes", hdr.Name, hdr.Typeflag, hdr.Size)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("archive entries\n%q\nwant, in filepath.WalkDir's order and without a trailing /,\n%q", got, want)
	}

	// Restored under another path: the rewritten links point into the new
	// Home, the two names of data are two files.
	dst := filepath.Join(h.root, "elsewhere", "home")
	must(os.MkdirAll(dst, 0o755))
	h.env["HOME"], h.env[agentstub.EnvToken] = dst, fakestub.TokenHomeRead
	h.run("", "home-snapshot", "download").want(t, 0, "", "")
	for name, content := range map[string]string{"a/to-data": "data", "a/deep/to-up": "sorts after the directory a", "to-home/a/hard": "data"} {
		if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != content {
			t.Errorf("%s in the restored Home: %q %v, want %q", name, b, err, content)
		}
	}
	a, _ := os.Stat(filepath.Join(dst, "a", "deep", "data"))
	b, err := os.Stat(filepath.Join(dst, "a", "hard"))
	if err != nil || os.SameFile(a, b) {
		t.Fatalf("a/hard restored: %v, same file as a/deep/data: %v", err, os.SameFile(a, b))
	}
}
