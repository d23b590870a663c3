package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeTree fills home with every kind of entry a round trip must keep.
func makeTree(t *testing.T, home string) {
	t.Helper()
	writeFile(t, filepath.Join(home, "a.txt"), "hello\n", 0o644)
	writeFile(t, filepath.Join(home, "bin", "tool"), "#!/bin/sh\necho hi\n", 0o750)
	writeFile(t, filepath.Join(home, "secret"), "key", 0o600)
	writeFile(t, filepath.Join(home, "deep", "er", "est", "f"), strings.Repeat("x", 100_000), 0o640)
	writeFile(t, filepath.Join(home, "empty-file"), "", 0o644)
	writeFile(t, filepath.Join(home, strings.Repeat("long-name-", 12), "f"), "long", 0o644)
	if err := os.MkdirAll(filepath.Join(home, "empty", "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(home, "link-rel")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(home, "link-abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(home, "link-dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(home, "a.txt"), filepath.Join(home, "deep", "hard")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "ro", "inside"), "in a read-only dir", 0o444)
	if err := os.Chmod(filepath.Join(home, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(home, "empty"), 0o711); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(home, "a.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	makeTree(t, src)
	_, _, c1 := newServer(t, Config{Home: src})
	_, _, c2 := newServer(t, Config{Home: dst})
	file := filepath.Join(t.TempDir(), "home.tar.zst")
	ss, err := SaveToFile(context.Background(), c1, file, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() != ss.Bytes {
		t.Fatalf("archive file: %v, %d bytes, stats say %d", err, fi.Size(), ss.Bytes)
	}
	rs, err := RestoreFromFile(context.Background(), c2, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := treeState(t, src)
	diffStates(t, want, treeState(t, dst))
	if rs.Entries != int64(len(want)) {
		t.Errorf("entries = %d, want %d", rs.Entries, len(want))
	}
	if rs.BytesWritten != 6+18+3+100_000+4+18 {
		t.Errorf("bytes_written = %d", rs.BytesWritten)
	}
	// A second restore over the restored tree overwrites and converges.
	if _, err := RestoreFromFile(context.Background(), c2, file, nil); err != nil {
		t.Fatal(err)
	}
	diffStates(t, want, treeState(t, dst))
}

func TestEmptyHomeRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	_, _, c1 := newServer(t, Config{Home: src})
	_, _, c2 := newServer(t, Config{Home: dst})
	file := filepath.Join(t.TempDir(), "empty.tar.zst")
	if _, err := SaveToFile(context.Background(), c1, file, nil, nil); err != nil {
		t.Fatal(err)
	}
	rs, err := RestoreFromFile(context.Background(), c2, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs != (RestoreStats{}) {
		t.Errorf("stats = %+v", rs)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("dst not empty: %v", ents)
	}
}

func TestArchiveFormat(t *testing.T) {
	home := t.TempDir()
	makeTree(t, home)
	writeFile(t, filepath.Join(home, "suid"), "x", 0o755)
	if err := syscall.Chmod(filepath.Join(home, "suid"), 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(home, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	devOK := syscall.Mknod(filepath.Join(home, "null"), syscall.S_IFCHR|0o666, 1<<8|3) == nil

	hdrs := listArchive(t, saveArchive(t, home, nil, ""))
	for name, h := range hdrs {
		if strings.HasPrefix(name, "/") || strings.HasPrefix(name, "./") || strings.Contains(name, "..") {
			t.Errorf("name %q not relative to Home", name)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%q: owner %d:%d %q:%q", name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if (h.Typeflag == '5') != strings.HasSuffix(name, "/") {
			t.Errorf("%q: type %c and trailing slash disagree", name, h.Typeflag)
		}
	}
	for _, skipped := range []string{"fifo", "sock", "null"} {
		if _, ok := hdrs[skipped]; ok {
			t.Errorf("%s archived", skipped)
		}
	}
	if !devOK {
		t.Log("mknod not permitted: device case not exercised")
	}
	checks := []struct {
		name string
		typ  byte
		mode int64
		link string
	}{
		{"bin/", '5', 0o755, ""},
		{"bin/tool", '0', 0o750, ""},
		{"ro/", '5', 0o555, ""},
		{"empty/", '5', 0o711, ""},
		{"empty/nested/", '5', 0o755, ""},
		{"link-rel", '2', 0o777, "a.txt"},
		{"link-abs", '2', 0o777, "/etc/hostname"},
		{"suid", '0', 0o4755, ""},
	}
	for _, c := range checks {
		h, ok := hdrs[c.name]
		if !ok {
			t.Errorf("%s missing; have %v", c.name, names(hdrs))
			continue
		}
		if h.Typeflag != c.typ || h.Mode != c.mode || h.Linkname != c.link {
			t.Errorf("%s: type %c mode %o link %q, want %c %o %q", c.name, h.Typeflag, h.Mode, h.Linkname, c.typ, c.mode, c.link)
		}
	}
	// One of the two names of the hard-linked file is a link to the other.
	a, d := hdrs["a.txt"], hdrs["deep/hard"]
	if !((a.Typeflag == '1' && a.Linkname == "deep/hard") || (d.Typeflag == '1' && d.Linkname == "a.txt")) {
		t.Errorf("hard link not kept: a.txt %c %q, deep/hard %c %q", a.Typeflag, a.Linkname, d.Typeflag, d.Linkname)
	}
}

func TestExcludes(t *testing.T) {
	home := t.TempDir()
	for _, f := range []string{
		"node_modules/x.js", "src/node_modules/y.js", "src/app.go",
		"top.log", "src/deep/a.log", "keep.log", "src/keep.log",
		"build/out.bin", "src/build/out.bin", "notes/build",
		"a1.txt", "a22.txt", "cache/x", "src/cache/y", "src/cache/z/w",
		"docs/a/b/c/d.md", "docs/e.md", "docs/f.txt",
		"tmp/x", "tmp/keep/y", "tmp/keep/z.o",
		"vendor/a", "sub/vendor/b",
	} {
		writeFile(t, filepath.Join(home, f), f, 0o644)
	}
	cases := []struct {
		name     string
		patterns []string
		gone     []string // files not archived
		kept     []string // files archived
	}{
		{"bare name at any depth", []string{"node_modules"},
			[]string{"node_modules/x.js", "src/node_modules/y.js"}, []string{"src/app.go"}},
		{"leading slash anchors", []string{"/vendor"},
			[]string{"vendor/a"}, []string{"sub/vendor/b"}},
		{"middle slash anchors", []string{"src/cache"},
			[]string{"src/cache/y", "src/cache/z/w"}, []string{"cache/x"}},
		{"star", []string{"*.log"},
			[]string{"top.log", "src/deep/a.log", "keep.log"}, []string{"src/app.go"}},
		{"question mark", []string{"a?.txt"},
			[]string{"a1.txt"}, []string{"a22.txt"}},
		{"leading double star", []string{"**/cache"},
			[]string{"cache/x", "src/cache/y"}, []string{"src/app.go"}},
		{"middle double star", []string{"docs/**/*.md"},
			[]string{"docs/a/b/c/d.md", "docs/e.md"}, []string{"docs/f.txt"}},
		{"trailing double star", []string{"tmp/**", "!tmp/keep/", "tmp/keep/*.o"},
			[]string{"tmp/x", "tmp/keep/z.o"}, []string{"tmp/keep/y"}},
		{"trailing slash is directories only", []string{"build/"},
			[]string{"build/out.bin", "src/build/out.bin"}, []string{"notes/build"}},
		{"bang re-includes", []string{"*.log", "!keep.log"},
			[]string{"top.log", "src/deep/a.log"}, []string{"keep.log", "src/keep.log"}},
		{"last match wins", []string{"!keep.log", "*.log"},
			[]string{"keep.log", "top.log"}, nil},
		{"last match wins, anchored re-include", []string{"*.log", "!/keep.log"},
			[]string{"src/keep.log"}, []string{"keep.log"}},
		{"blank patterns ignored", []string{"", "   ", "!"},
			nil, []string{"top.log", "src/app.go"}},
		{"excluded dir not descended into", []string{"src", "!src/app.go"},
			[]string{"src/app.go"}, []string{"top.log"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdrs := listArchive(t, saveArchive(t, home, c.patterns, ""))
			for _, g := range c.gone {
				if _, ok := hdrs[g]; ok {
					t.Errorf("%s archived despite %q", g, c.patterns)
				}
			}
			for _, k := range c.kept {
				if _, ok := hdrs[k]; !ok {
					t.Errorf("%s not archived with %q", k, c.patterns)
				}
			}
		})
	}
	t.Run("malformed pattern", func(t *testing.T) {
		_, err := Save(context.Background(), io.Discard, home, SaveOptions{Excludes: []string{"[a"}})
		if !errors.Is(err, ErrBadPattern) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestStateDirAlwaysExcluded(t *testing.T) {
	for _, rel := range []string{".local/share/shellctl", "work/relocated-state"} {
		t.Run(rel, func(t *testing.T) {
			home := t.TempDir()
			state := filepath.Join(home, rel)
			writeFile(t, filepath.Join(state, "shellctl.db"), "db", 0o600)
			writeFile(t, filepath.Join(state, "jobs", "j1", "output.log"), "out", 0o600)
			writeFile(t, filepath.Join(home, ".local", "share", "other", "f"), "kept", 0o644)
			writeFile(t, filepath.Join(home, "work", "f"), "kept", 0o644)
			// Another spelling of the same directory still matches.
			alias := filepath.Join(t.TempDir(), "alias")
			if err := os.Symlink(state, alias); err != nil {
				t.Fatal(err)
			}
			for _, stateArg := range []string{state, alias} {
				hdrs := listArchive(t, saveArchive(t, home, []string{"!" + rel, "!" + rel + "/**", "!*.db"}, stateArg))
				for name := range hdrs {
					if strings.HasPrefix(name, rel+"/") {
						t.Errorf("state dir entry %q archived (state dir given as %s)", name, stateArg)
					}
				}
				for _, k := range []string{".local/share/other/f", "work/f"} {
					if _, ok := hdrs[k]; !ok {
						t.Errorf("%s missing", k)
					}
				}
			}
		})
	}
}

func TestSaveTrailersMatchBody(t *testing.T) {
	home := t.TempDir()
	makeTree(t, home)
	writeRandom(t, filepath.Join(home, "big"), 3<<20)
	_, srv, _ := newServer(t, Config{Home: home})
	resp, body, err := saveRaw(t, srv, `{"excludes":["*.nothing"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	for _, k := range []string{TrailerStatus, TrailerSHA256, TrailerBytes} {
		if _, declared := resp.Trailer[http.CanonicalHeaderKey(k)]; !declared {
			t.Errorf("trailer %s not declared", k)
		}
	}
	sum := sha256.Sum256(body)
	if got := resp.Trailer.Get(TrailerStatus); got != "ok" {
		t.Errorf("status trailer %q", got)
	}
	if got := resp.Trailer.Get(TrailerSHA256); got != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 trailer %q, body %x", got, sum)
	}
	if got := resp.Trailer.Get(TrailerBytes); got != strconv.Itoa(len(body)) {
		t.Errorf("bytes trailer %q, body %d", got, len(body))
	}
	if hdrs := listArchive(t, body); len(hdrs) == 0 {
		t.Error("empty archive")
	}
}

// failingReader returns its first ok bytes, then an I/O error.
type failingReader struct {
	r  io.Reader
	ok int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.ok <= 0 {
		return 0, syscall.EIO
	}
	if len(p) > f.ok {
		p = p[:f.ok]
	}
	n, err := f.r.Read(p)
	f.ok -= n
	return n, err
}

func setHook(t *testing.T, h func(name string, r io.Reader) io.Reader) {
	t.Helper()
	testHookFileReader = h
	t.Cleanup(func() { testHookFileReader = nil })
}

func TestSaveReadErrorMidStreamCutsConnection(t *testing.T) {
	home := t.TempDir()
	writeRandom(t, filepath.Join(home, "big"), 48<<20)
	setHook(t, func(name string, r io.Reader) io.Reader {
		if name == "big" {
			return &failingReader{r: r, ok: 40 << 20}
		}
		return r
	})
	_, srv, conn := newServer(t, Config{Home: home})

	resp, body, err := saveRaw(t, srv, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: the failure should come after the first byte", resp.StatusCode)
	}
	if err == nil {
		t.Fatalf("body ended cleanly after %d bytes; want a cut connection", len(body))
	}
	if len(body) == 0 {
		t.Fatal("no byte before the cut")
	}
	if s := resp.Trailer.Get(TrailerStatus); s == "ok" {
		t.Fatal("ok trailer on a failed save")
	}

	// The client side removes its partial file and keeps an older archive.
	dir := t.TempDir()
	path := filepath.Join(dir, "home.tar.zst")
	writeFile(t, path, "previous archive", 0o644)
	if _, err := SaveToFile(context.Background(), conn, path, nil, io.Discard); err == nil {
		t.Fatal("SaveToFile succeeded on a cut stream")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("partial file left: %v", ents)
	}
	if b, _ := os.ReadFile(path); string(b) != "previous archive" {
		t.Errorf("previous archive clobbered")
	}
}

func TestSaveErrorBeforeFirstByteIsJSON(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "f"), "small", 0o644)
	setHook(t, func(name string, r io.Reader) io.Reader { return &failingReader{r: r} })
	_, srv, _ := newServer(t, Config{Home: home})
	resp, body, err := saveRaw(t, srv, "")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || errCode(t, body) != "snapshot_failed" {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

func TestSaveRequestBody(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "f.log"), "x", 0o644)
	_, srv, _ := newServer(t, Config{Home: home})
	cases := []struct {
		body   string
		status int
		code   string
	}{
		{"", 200, ""},
		{"  \n", 200, ""},
		{"{}", 200, ""},
		{`{"excludes":["*.log"],"unknown":1}`, 200, ""},
		{"{", 400, "invalid_request"},
		{"[1]", 400, "invalid_request"},
		{"null", 400, "invalid_request"},
		{`{"excludes":"*.log"}`, 400, "invalid_request"},
		{`{"excludes":["[x"]}`, 400, "invalid_request"},
		{`{"excludes":["` + strings.Repeat("a", 70<<10) + `"]}`, 413, "request_too_large"},
	}
	for _, c := range cases {
		resp, body, err := saveRaw(t, srv, c.body)
		if err != nil {
			t.Fatalf("%.30q: %v", c.body, err)
		}
		if resp.StatusCode != c.status || (c.code != "" && errCode(t, body) != c.code) {
			t.Errorf("%.30q: got %d %.200s, want %d %s", c.body, resp.StatusCode, body, c.status, c.code)
		}
	}
}

func TestHomeUnavailable(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	writeFile(t, notDir, "x", 0o644)
	for _, home := range []string{filepath.Join(t.TempDir(), "missing"), notDir} {
		_, srv, _ := newServer(t, Config{Home: home})
		resp, body, _ := saveRaw(t, srv, "")
		if resp.StatusCode != 500 || errCode(t, body) != "home_unavailable" {
			t.Errorf("save with Home %s: %d %s", home, resp.StatusCode, body)
		}
		resp, body = restoreRaw(t, srv, makeArchive(t, file("f", "x")))
		if resp.StatusCode != 500 || errCode(t, body) != "home_unavailable" {
			t.Errorf("restore with Home %s: %d %s", home, resp.StatusCode, body)
		}
	}
}

func TestSaveSkipsVanishedEntries(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "a"), "a", 0o644)
	writeFile(t, filepath.Join(home, "b"), "b", 0o644)
	// Removing the other file while the first is read: whichever comes
	// second has vanished, and is simply not archived.
	setHook(t, func(name string, r io.Reader) io.Reader {
		os.Remove(filepath.Join(home, map[string]string{"a": "b", "b": "a"}[name]))
		return r
	})
	hdrs := listArchive(t, saveArchive(t, home, nil, ""))
	if n := names(hdrs); len(n) != 1 || !slices.Contains([]string{"a", "b"}, n[0]) {
		t.Errorf("entries %v", n)
	}
}

func TestSaveToFileProgress(t *testing.T) {
	home := t.TempDir()
	writeRandom(t, filepath.Join(home, "f"), 1<<20)
	_, _, conn := newServer(t, Config{Home: home})
	var out strings.Builder
	st, err := SaveToFile(context.Background(), conn, filepath.Join(t.TempDir(), "a.tar.zst"), []string{"nothing"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "\rsaved ") || !strings.HasSuffix(out.String(), "\n") || !strings.Contains(out.String(), "/s)") {
		t.Errorf("progress output %q", out.String())
	}
	if st.Bytes == 0 || len(st.SHA256) != 64 {
		t.Errorf("stats %+v", st)
	}
}

// TestSaveLeavesOutDefaultStateDirPath: issue 12 item 3. Home's
// .local/share/shellctl (the original's default state dir) is never
// archived, even when the server's state dir is elsewhere or unset, and no
// pattern re-includes it; a directory of that name deeper in Home is an
// ordinary directory.
func TestSaveLeavesOutDefaultStateDirPath(t *testing.T) {
	for _, stateDir := range []string{"", "elsewhere"} {
		t.Run("state dir "+stateDir, func(t *testing.T) {
			home := t.TempDir()
			writeFile(t, filepath.Join(home, ".local", "share", "shellctl", "shellctl.db"), "db", 0o600)
			writeFile(t, filepath.Join(home, ".local", "share", "other", "f"), "kept", 0o644)
			writeFile(t, filepath.Join(home, "proj", ".local", "share", "shellctl", "f"), "kept", 0o644)
			cfg := Config{Home: home}
			if stateDir != "" {
				cfg.StateDir = filepath.Join(t.TempDir(), stateDir)
				os.Mkdir(cfg.StateDir, 0o700)
			}
			_, srv, _ := newServer(t, cfg)
			resp, body, err := saveRaw(t, srv, `{"excludes":["!.local/share/shellctl","!.local/share/shellctl/**","!*.db"]}`)
			if err != nil || resp.StatusCode != 200 || resp.Trailer.Get(TrailerStatus) != "ok" {
				t.Fatalf("save: %v %d %s", err, resp.StatusCode, body)
			}
			hdrs := listArchive(t, body)
			for name := range hdrs {
				if strings.HasPrefix(name, ".local/share/shellctl") {
					t.Errorf("%q archived", name)
				}
			}
			for _, k := range []string{".local/share/", ".local/share/other/f", "proj/.local/share/shellctl/f"} {
				if _, ok := hdrs[k]; !ok {
					t.Errorf("%s missing", k)
				}
			}
		})
	}
}
