package e2e

// The file routes (/v1/files/*, docs/files.md) on a real server: each
// route's happy path and errors, PUT's atomicity and size, and the
// attacks a hostile job can make on a server that reads and writes its
// Home: links out of it, "..", a directory swapped for a link to / in a
// loop, FIFOs, sockets and devices, and the state dir under a root.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/shellctl/shellctl/internal/client"
)

// fresp is one answer of a file route.
type fresp struct {
	code    int
	body    []byte
	hdr     http.Header
	trailer http.Header
}

func (r fresp) errCode() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r fresp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", r.code, r.body, err)
	}
}

// fcall sends one request to a file route; q is the query (path=...).
func fcall(t *testing.T, s *server, method, route string, q url.Values, body io.Reader, hdr map[string]string) fresp {
	t.Helper()
	u := s.URL + route
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx(t), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, u, err)
	}
	return fresp{code: resp.StatusCode, body: b, hdr: resp.Header, trailer: resp.Trailer}
}

func qp(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func fjson(t *testing.T, s *server, route string, body any) fresp {
	t.Helper()
	b, _ := json.Marshal(body)
	return fcall(t, s, "POST", route, nil, bytes.NewReader(b), map[string]string{"Content-Type": "application/json"})
}

func want(t *testing.T, what string, r fresp, code int, errCode string) {
	t.Helper()
	if r.code != code || (errCode != "" && r.errCode() != errCode) {
		t.Errorf("%s: %d %s, want %d %s", what, r.code, bytes.TrimSpace(r.body), code, errCode)
	}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func fileSha(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return sha(b)
}

// jobDo runs script as a job in Home and wants exit 0.
func jobDo(t *testing.T, s *server, script string) string {
	t.Helper()
	res, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Timeout: 30})
	if code(res) != 0 {
		t.Fatalf("job %q: exit %d, output %q", script, code(res), out)
	}
	return out
}

func TestFilesRoutes(t *testing.T) {
	s := startServer(t, serverOpts{token: "t0ken", args: []string{"--max-file-bytes", "64KiB"}})
	h := s.Home

	// PUT: 201 new, 200 replaced; sha256 and size of what was written.
	r := fcall(t, s, "PUT", "/v1/files/content", qp("path", "a.txt"), strings.NewReader("hello world\n"), nil)
	want(t, "PUT new", r, 201, "")
	var put struct {
		Path, Sha256 string
		Size         int64
	}
	r.json(t, &put)
	if put.Path != filepath.Join(h, "a.txt") || put.Size != 12 || put.Sha256 != sha([]byte("hello world\n")) {
		t.Errorf("PUT answer %+v", put)
	}
	if b, _ := os.ReadFile(filepath.Join(h, "a.txt")); string(b) != "hello world\n" {
		t.Errorf("file holds %q", b)
	}
	want(t, "PUT replace", fcall(t, s, "PUT", "/v1/files/content", qp("path", h+"/a.txt"), strings.NewReader("hello there\n"), nil), 200, "")
	want(t, "PUT mode", fcall(t, s, "PUT", "/v1/files/content", qp("path", "m.sh", "mode", "0750"), strings.NewReader("#!/bin/sh\n"), nil), 201, "")
	if st, err := os.Stat(filepath.Join(h, "m.sh")); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("PUT mode=0750: %v %v", st.Mode(), err)
	}
	want(t, "PUT into a missing dir", fcall(t, s, "PUT", "/v1/files/content", qp("path", "x/y/z.txt"), strings.NewReader("z"), nil), 404, "not_found")
	want(t, "PUT mkdirs", fcall(t, s, "PUT", "/v1/files/content", qp("path", "x/y/z.txt", "mkdirs", "true"), strings.NewReader("z"), nil), 201, "")
	want(t, "PUT over a directory", fcall(t, s, "PUT", "/v1/files/content", qp("path", "x"), strings.NewReader("z"), nil), 409, "not_a_regular_file")
	want(t, "PUT bad mode", fcall(t, s, "PUT", "/v1/files/content", qp("path", "q", "mode", "rwx"), strings.NewReader("z"), nil), 400, "invalid_request")
	// Over --max-file-bytes, announced or not: 413, nothing left behind.
	big := bytes.Repeat([]byte("b"), 65*1024)
	want(t, "PUT too large", fcall(t, s, "PUT", "/v1/files/content", qp("path", "big"), bytes.NewReader(big), nil), 413, "too_large")
	want(t, "PUT too large, chunked", fcall(t, s, "PUT", "/v1/files/content", qp("path", "big"), io.MultiReader(bytes.NewReader(big)), nil), 413, "too_large")
	ents, _ := os.ReadDir(h)
	for _, e := range ents {
		if strings.Contains(e.Name(), "big") || strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a refused PUT left %s behind", e.Name())
		}
	}

	// GET: bytes, ETag, one Range (206), 416, If-Match on PUT (412).
	r = fcall(t, s, "GET", "/v1/files/content", qp("path", "a.txt"), nil, nil)
	want(t, "GET", r, 200, "")
	if string(r.body) != "hello there\n" || r.hdr.Get("Content-Type") != "application/octet-stream" || r.hdr.Get("ETag") == "" {
		t.Errorf("GET: %q %v", r.body, r.hdr)
	}
	tag := r.hdr.Get("ETag")
	r = fcall(t, s, "GET", "/v1/files/content", qp("path", "a.txt"), nil, map[string]string{"Range": "bytes=6-10"})
	if r.code != 206 || string(r.body) != "there" {
		t.Errorf("Range 6-10: %d %q", r.code, r.body)
	}
	want(t, "Range outside", fcall(t, s, "GET", "/v1/files/content", qp("path", "a.txt"), nil, map[string]string{"Range": "bytes=100-"}), 416, "")
	want(t, "two ranges", fcall(t, s, "GET", "/v1/files/content", qp("path", "a.txt"), nil, map[string]string{"Range": "bytes=0-1,3-4"}), 416, "range_not_satisfiable")
	want(t, "GET a directory", fcall(t, s, "GET", "/v1/files/content", qp("path", "x"), nil, nil), 409, "not_a_regular_file")
	want(t, "GET missing", fcall(t, s, "GET", "/v1/files/content", qp("path", "nope"), nil, nil), 404, "not_found")
	want(t, "GET no path", fcall(t, s, "GET", "/v1/files/content", nil, nil, nil), 400, "invalid_path")
	want(t, "PUT If-Match stale", fcall(t, s, "PUT", "/v1/files/content", qp("path", "a.txt"), strings.NewReader("x"), map[string]string{"If-Match": `"1-2-3"`}), 412, "precondition_failed")
	want(t, "PUT If-None-Match existing", fcall(t, s, "PUT", "/v1/files/content", qp("path", "a.txt"), strings.NewReader("x"), map[string]string{"If-None-Match": "*"}), 412, "precondition_failed")
	want(t, "PUT If-Match missing file", fcall(t, s, "PUT", "/v1/files/content", qp("path", "nofile"), strings.NewReader("x"), map[string]string{"If-Match": tag}), 412, "precondition_failed")
	if b, _ := os.ReadFile(filepath.Join(h, "a.txt")); string(b) != "hello there\n" {
		t.Errorf("a refused PUT changed the file: %q", b)
	}
	want(t, "PUT If-Match current", fcall(t, s, "PUT", "/v1/files/content", qp("path", "a.txt"), strings.NewReader("v3\n"), map[string]string{"If-Match": tag}), 200, "")
	want(t, "PUT If-None-Match new", fcall(t, s, "PUT", "/v1/files/content", qp("path", "new.txt"), strings.NewReader("n"), map[string]string{"If-None-Match": "*"}), 201, "")

	// stat, follow or not.
	if err := os.Symlink("a.txt", filepath.Join(h, "lnk")); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type, Mode string
		Size       int64
	}
	r = fcall(t, s, "GET", "/v1/files/stat", qp("path", "lnk"), nil, nil)
	want(t, "stat follow", r, 200, "")
	if r.json(t, &st); st.Type != "file" || st.Size != 3 || st.Mode != "0644" {
		t.Errorf("stat lnk: %s", r.body)
	}
	r = fcall(t, s, "GET", "/v1/files/stat", qp("path", "lnk", "follow", "false"), nil, nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"type":"symlink"`) || !strings.Contains(string(r.body), `"link_target":"a.txt"`) {
		t.Errorf("stat follow=false: %d %s", r.code, r.body)
	}
	want(t, "stat missing", fcall(t, s, "GET", "/v1/files/stat", qp("path", "nope"), nil, nil), 404, "not_found")
	want(t, "stat bad follow", fcall(t, s, "GET", "/v1/files/stat", qp("path", "a.txt", "follow", "maybe"), nil, nil), 400, "invalid_request")

	// list: sorted, limit, hidden.
	for _, n := range []string{"c", "b", ".hid"} {
		os.WriteFile(filepath.Join(h, "x", n), nil, 0o644)
	}
	var ls struct {
		Entries   []struct{ Name, Type string }
		Truncated bool
	}
	r = fcall(t, s, "GET", "/v1/files/list", qp("path", "x"), nil, nil)
	r.json(t, &ls)
	names := []string{}
	for _, e := range ls.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	if got := strings.Join(names, ","); got != ".hid:file,b:file,c:file,y:dir" || ls.Truncated {
		t.Errorf("list x: %s (truncated %v)", got, ls.Truncated)
	}
	r = fcall(t, s, "GET", "/v1/files/list", qp("path", "x", "limit", "2", "hidden", "false"), nil, nil)
	ls.Entries = nil
	r.json(t, &ls)
	if len(ls.Entries) != 2 || ls.Entries[0].Name != "b" || !ls.Truncated {
		t.Errorf("list limit 2 hidden=false: %s", r.body)
	}
	want(t, "list a file", fcall(t, s, "GET", "/v1/files/list", qp("path", "a.txt"), nil, nil), 409, "not_a_directory")
	want(t, "list limit", fcall(t, s, "GET", "/v1/files/list", qp("path", "x", "limit", "10001"), nil, nil), 400, "invalid_request")

	// edit: ok, no match, ambiguous (count), replace_all, not text.
	os.WriteFile(filepath.Join(h, "e.txt"), []byte("one two two three\n"), 0o600)
	r = fjson(t, s, "/v1/files/edit", map[string]any{"path": "e.txt", "old_text": "one", "new_text": "1"})
	want(t, "edit", r, 200, "")
	if b, _ := os.ReadFile(filepath.Join(h, "e.txt")); string(b) != "1 two two three\n" || !strings.Contains(string(r.body), `"replacements":1`) || !strings.Contains(string(r.body), sha(b)) {
		t.Errorf("edit: %q, answer %s", b, r.body)
	}
	if fi, _ := os.Stat(filepath.Join(h, "e.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("edit changed the mode to %v", fi.Mode())
	}
	want(t, "edit no match", fjson(t, s, "/v1/files/edit", map[string]any{"path": "e.txt", "old_text": "four", "new_text": "4"}), 409, "edit_no_match")
	r = fjson(t, s, "/v1/files/edit", map[string]any{"path": "e.txt", "old_text": "two", "new_text": "2"})
	want(t, "edit ambiguous", r, 409, "edit_ambiguous")
	if !strings.Contains(string(r.body), `"count":2`) {
		t.Errorf("edit_ambiguous without its count: %s", r.body)
	}
	r = fjson(t, s, "/v1/files/edit", map[string]any{"path": "e.txt", "old_text": "two", "new_text": "2", "replace_all": true})
	if b, _ := os.ReadFile(filepath.Join(h, "e.txt")); r.code != 200 || string(b) != "1 2 2 three\n" {
		t.Errorf("edit replace_all: %d %s, file %q", r.code, r.body, b)
	}
	os.WriteFile(filepath.Join(h, "bin"), []byte{0xff, 0xfe, 0, 1}, 0o644)
	want(t, "edit binary", fjson(t, s, "/v1/files/edit", map[string]any{"path": "bin", "old_text": "a", "new_text": "b"}), 415, "not_text")
	want(t, "edit empty old_text", fjson(t, s, "/v1/files/edit", map[string]any{"path": "e.txt", "old_text": "", "new_text": "b"}), 400, "invalid_request")
	want(t, "edit unknown field", fjson(t, s, "/v1/files/edit", map[string]any{"path": "e.txt", "old": "a"}), 400, "invalid_request")

	// mkdir.
	want(t, "mkdir", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": "d1/d2", "mode": "0700"}), 201, "")
	if fi, err := os.Stat(filepath.Join(h, "d1/d2")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mkdir mode 0700: %v %v", fi, err)
	}
	want(t, "mkdir existing, parents", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": "d1/d2"}), 200, "")
	want(t, "mkdir existing, no parents", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": "d1/d2", "parents": false}), 409, "already_exists")
	want(t, "mkdir no parents, missing parent", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": "n1/n2", "parents": false}), 404, "not_found")

	// move.
	want(t, "move", fjson(t, s, "/v1/files/move", map[string]any{"from": "new.txt", "to": "d1/moved.txt"}), 200, "")
	if _, err := os.Stat(filepath.Join(h, "d1/moved.txt")); err != nil {
		t.Errorf("move: %v", err)
	}
	want(t, "move onto existing", fjson(t, s, "/v1/files/move", map[string]any{"from": "m.sh", "to": "a.txt"}), 409, "already_exists")
	want(t, "move overwrite", fjson(t, s, "/v1/files/move", map[string]any{"from": "m.sh", "to": "a.txt", "overwrite": true}), 200, "")
	want(t, "move missing", fjson(t, s, "/v1/files/move", map[string]any{"from": "gone", "to": "b"}), 404, "not_found")
	want(t, "move a root", fjson(t, s, "/v1/files/move", map[string]any{"from": h, "to": "b"}), 400, "invalid_path")

	// delete.
	want(t, "delete file", fcall(t, s, "DELETE", "/v1/files", qp("path", "a.txt"), nil, nil), 200, "")
	want(t, "delete non-empty dir", fcall(t, s, "DELETE", "/v1/files", qp("path", "x"), nil, nil), 409, "dir_not_empty")
	r = fcall(t, s, "DELETE", "/v1/files", qp("path", "x", "recursive", "true"), nil, nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"removed":6`) {
		t.Errorf("delete recursive x (x, y, z.txt, b, c, .hid): %d %s", r.code, r.body)
	}
	want(t, "delete missing", fcall(t, s, "DELETE", "/v1/files", qp("path", "x"), nil, nil), 404, "not_found")
	want(t, "delete Home", fcall(t, s, "DELETE", "/v1/files", qp("path", h, "recursive", "true"), nil, nil), 400, "invalid_path")

	// auth and methods.
	r = fcall(t, &server{URL: s.URL, t: t}, "GET", "/v1/files/stat", qp("path", "e.txt"), nil, nil)
	want(t, "no token", r, 401, "unauthorized")
	want(t, "POST stat", fcall(t, s, "POST", "/v1/files/stat", qp("path", "e.txt"), nil, nil), 405, "method_not_allowed")
}

// A 40 MB file goes up and comes down byte-exact.
func TestFilesLargeUpDown(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	data := make([]byte, 40<<20)
	rand.Read(data)
	r := fcall(t, s, "PUT", "/v1/files/content", qp("path", "big.bin"), bytes.NewReader(data), nil)
	want(t, "PUT 40 MB", r, 201, "")
	if !strings.Contains(string(r.body), sha(data)) {
		t.Errorf("PUT answer %s, want sha256 %s", r.body, sha(data))
	}
	r = fcall(t, s, "GET", "/v1/files/content", qp("path", "big.bin"), nil, nil)
	if r.code != 200 || !bytes.Equal(r.body, data) {
		t.Errorf("GET 40 MB: %d, %d bytes, equal %v", r.code, len(r.body), bytes.Equal(r.body, data))
	}
}

// A reader looping during a 200 MB PUT over a file sees the old file or
// the new one, never a mix (the PUT writes beside it and renames).
func TestFilesPutIsAtomic(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	old := bytes.Repeat([]byte("old "), 1<<18)
	if err := os.WriteFile(filepath.Join(s.Home, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 200 << 20
	newSum := sha256.New()
	gen := func(w io.Writer) {
		chunk := bytes.Repeat([]byte("NEW!"), 1<<18)
		for n := 0; n < size; n += len(chunk) {
			w.Write(chunk)
		}
	}
	gen(newSum)
	wantNew, wantOld := hex.EncodeToString(newSum.Sum(nil)), sha(old)
	pr, pw := io.Pipe()
	go func() { gen(pw); pw.Close() }()
	var done atomic.Bool
	var wg sync.WaitGroup
	reads, sawOld := 0, 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			req, _ := http.NewRequest("GET", s.URL+"/v1/files/content?path=f", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("GET: %v", err)
				return
			}
			h := sha256.New()
			io.Copy(h, resp.Body)
			resp.Body.Close()
			got := hex.EncodeToString(h.Sum(nil))
			reads++
			switch got {
			case wantOld:
				sawOld++
			case wantNew:
			default:
				t.Errorf("read %d during the PUT: sha256 %s, neither the old file's nor the new one's", reads, got)
				return
			}
		}
	}()
	r := fcall(t, s, "PUT", "/v1/files/content", qp("path", "f"), pr, nil)
	done.Store(true)
	wg.Wait()
	want(t, "PUT 200 MB", r, 200, "")
	if sawOld == 0 {
		t.Errorf("%d reads, none during the PUT: the test proves nothing", reads)
	}
	if fileSha(t, filepath.Join(s.Home, "f")) != wantNew {
		t.Error("the file is not the new one after the PUT")
	}
	t.Logf("%d reads during and after the PUT (%d of the old file)", reads, sawOld)
}

// A job plants links in Home to /etc/shadow and to a file and directory
// outside every root: no route reads, writes or removes anything through
// them.
func TestFilesAttackLinksOutOfHome(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	outside := t.TempDir() // no file root
	sentinel := filepath.Join(outside, "sentinel")
	os.WriteFile(sentinel, []byte("SENTINEL-CONTENT\n"), 0o644)
	shadowSum := fileSha(t, "/etc/shadow")
	jobDo(t, s, fmt.Sprintf("ln -s /etc/shadow $HOME/shadow && ln -s %s $HOME/sent && ln -s %s $HOME/out && ln -s ../../../../../../../..%s $HOME/rel", sentinel, outside, sentinel))

	for _, p := range []string{"shadow", "sent", "rel", s.Home + "/shadow"} {
		r := fcall(t, s, "GET", "/v1/files/content", qp("path", p), nil, nil)
		want(t, "content through "+p, r, 403, "path_not_allowed")
		if bytes.Contains(r.body, []byte("root:")) || bytes.Contains(r.body, []byte("SENTINEL-CONTENT")) {
			t.Errorf("content through %s read outside Home: %q", p, r.body)
		}
		want(t, "stat through "+p, fcall(t, s, "GET", "/v1/files/stat", qp("path", p), nil, nil), 403, "path_not_allowed")
		want(t, "edit through "+p, fjson(t, s, "/v1/files/edit", map[string]any{"path": p, "old_text": "SENTINEL", "new_text": "pwned"}), 403, "path_not_allowed")
	}
	want(t, "PUT through a link to a file outside", fcall(t, s, "PUT", "/v1/files/content", qp("path", "sent"), strings.NewReader("pwned"), nil), 403, "path_not_allowed")
	want(t, "PUT into a linked dir outside", fcall(t, s, "PUT", "/v1/files/content", qp("path", "out/new"), strings.NewReader("pwned"), nil), 403, "path_not_allowed")
	want(t, "PUT mkdirs into a linked dir", fcall(t, s, "PUT", "/v1/files/content", qp("path", "out/d/new", "mkdirs", "true"), strings.NewReader("pwned"), nil), 403, "path_not_allowed")
	want(t, "list a linked dir", fcall(t, s, "GET", "/v1/files/list", qp("path", "out"), nil, nil), 403, "path_not_allowed")
	want(t, "mkdir in a linked dir", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": "out/made"}), 403, "path_not_allowed")
	want(t, "move out of a linked dir", fjson(t, s, "/v1/files/move", map[string]any{"from": "out/sentinel", "to": "stolen"}), 403, "path_not_allowed")
	want(t, "move into a linked dir", fjson(t, s, "/v1/files/move", map[string]any{"from": "shadow", "to": "out/x"}), 403, "path_not_allowed")
	want(t, "delete in a linked dir", fcall(t, s, "DELETE", "/v1/files", qp("path", "out/sentinel"), nil, nil), 403, "path_not_allowed")
	r0 := fcall(t, s, "GET", "/v1/files/archive", qp("path", s.Home), nil, nil)
	want(t, "archive Home", r0, 200, "")
	ents := untarEntries(t, r0.body)
	if e := ents["shadow"]; e.typ != tar.TypeSymlink || e.link != "/etc/shadow" {
		t.Errorf("archive: the link to /etc/shadow is stored as %+v, want a symbolic link", e)
	}
	for n, e := range ents {
		if strings.Contains(e.body, "root:") || strings.Contains(e.body, "SENTINEL-CONTENT") {
			t.Errorf("archive: %s holds what lies outside Home", n)
		}
	}
	// The link itself is Home's: stat without following shows it, delete
	// removes the link and never what it points to.
	r := fcall(t, s, "GET", "/v1/files/stat", qp("path", "shadow", "follow", "false"), nil, nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"link_target":"/etc/shadow"`) {
		t.Errorf("stat follow=false of the link: %d %s", r.code, r.body)
	}
	want(t, "delete the link to a dir, recursive", fcall(t, s, "DELETE", "/v1/files", qp("path", "out", "recursive", "true"), nil, nil), 200, "")
	want(t, "delete the link to shadow", fcall(t, s, "DELETE", "/v1/files", qp("path", "shadow"), nil, nil), 200, "")
	if b, err := os.ReadFile(sentinel); err != nil || string(b) != "SENTINEL-CONTENT\n" {
		t.Errorf("the file outside Home changed: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the directory outside Home holds %d entries, want only the sentinel", len(ents))
	}
	if fileSha(t, "/etc/shadow") != shadowSum {
		t.Error("/etc/shadow changed")
	}
}

// "..", and absolute paths outside every root, are refused by every
// route; a link that stays within Home is followed.
func TestFilesAttackDotDotAndAbsolute(t *testing.T) {
	s := startServer(t, serverOpts{})
	sibling := filepath.Join(filepath.Dir(s.Home), "sibling-"+filepath.Base(s.Home))
	os.MkdirAll(sibling, 0o755)
	t.Cleanup(func() { os.RemoveAll(sibling) })
	os.WriteFile(filepath.Join(sibling, "f"), []byte("sib"), 0o644)
	rel := "../" + filepath.Base(sibling) + "/f"
	for _, p := range []string{"/etc/passwd", rel, s.Home + "/../" + filepath.Base(sibling) + "/f", "../../../../../../etc/passwd", "/proc/self/environ"} {
		want(t, "content "+p, fcall(t, s, "GET", "/v1/files/content", qp("path", p), nil, nil), 403, "path_not_allowed")
		want(t, "stat "+p, fcall(t, s, "GET", "/v1/files/stat", qp("path", p), nil, nil), 403, "path_not_allowed")
		want(t, "list "+filepath.Dir(p), fcall(t, s, "GET", "/v1/files/list", qp("path", filepath.Dir(p)), nil, nil), 403, "path_not_allowed")
		want(t, "PUT "+p, fcall(t, s, "PUT", "/v1/files/content", qp("path", p), strings.NewReader("x"), nil), 403, "path_not_allowed")
		want(t, "edit "+p, fjson(t, s, "/v1/files/edit", map[string]any{"path": p, "old_text": "sib", "new_text": "x"}), 403, "path_not_allowed")
		want(t, "mkdir "+p, fjson(t, s, "/v1/files/mkdir", map[string]any{"path": p + "d"}), 403, "path_not_allowed")
		want(t, "move from "+p, fjson(t, s, "/v1/files/move", map[string]any{"from": p, "to": "stolen"}), 403, "path_not_allowed")
		want(t, "delete "+p, fcall(t, s, "DELETE", "/v1/files", qp("path", p), nil, nil), 403, "path_not_allowed")
	}
	if b, _ := os.ReadFile(filepath.Join(sibling, "f")); string(b) != "sib" {
		t.Errorf("the sibling file changed: %q", b)
	}
	// Within Home, absolute and relative links are followed.
	os.MkdirAll(filepath.Join(s.Home, "real"), 0o755)
	os.WriteFile(filepath.Join(s.Home, "real", "f"), []byte("in"), 0o644)
	os.Symlink(filepath.Join(s.Home, "real"), filepath.Join(s.Home, "abslink"))
	os.Symlink("real/f", filepath.Join(s.Home, "rellink"))
	for _, p := range []string{"abslink/f", "rellink", "real/../real/f"} {
		if r := fcall(t, s, "GET", "/v1/files/content", qp("path", p), nil, nil); r.code != 200 || string(r.body) != "in" {
			t.Errorf("content %s (within Home): %d %s", p, r.code, r.body)
		}
	}
	want(t, "PUT through a link within Home", fcall(t, s, "PUT", "/v1/files/content", qp("path", "rellink"), strings.NewReader("new"), nil), 200, "")
	if b, _ := os.ReadFile(filepath.Join(s.Home, "real", "f")); string(b) != "new" {
		t.Errorf("PUT through a link within Home wrote %q into its target", b)
	}
}

// A job swaps a directory of Home for a link to / in a tight loop while
// the server reads, lists, stats, writes, edits, makes, moves and deletes
// beneath it: no request ever reaches the directory outside Home that the
// link would lead to.
func TestFilesAttackSwapDirForLinkToRoot(t *testing.T) {
	parallel(t)
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	out, err := os.MkdirTemp("", "files-escape-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	const tries = 200
	os.WriteFile(filepath.Join(out, "secret"), []byte("ESCAPED\n"), 0o644)
	os.WriteFile(filepath.Join(out, "outonly"), []byte("ESCAPED\n"), 0o644)
	os.MkdirAll(filepath.Join(out, "vdir", "sub"), 0o755)
	os.WriteFile(filepath.Join(out, "vdir", "sub", "f"), []byte("x"), 0o644)
	for i := range tries {
		os.WriteFile(filepath.Join(out, fmt.Sprintf("victim-%d", i)), nil, 0o644)
	}
	before, _ := os.ReadDir(out)
	rel := strings.TrimPrefix(out, "/")
	// The job makes d/<out's path>/secret inside Home, then swaps d and a
	// link to / by renames, as fast as it can.
	script := fmt.Sprintf(`cd "$HOME" && mkdir -p "d/%s/vdir" && echo INSIDE > "d/%s/secret" && ln -s / lnk && echo ready && exec perl -e 'while (1) { rename "d", "d.real"; rename "lnk", "d"; rename "d", "lnk"; rename "d.real", "d"; }'`, rel, rel)
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Mode: "stdio", Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done || !strings.Contains(res.Output, "ready") {
		t.Fatalf("the swapping job did not start: done %v, output %q", res.Done, res.Output)
	}
	defer s.c.Terminate(ctx(t), res.JobID, 1)
	base := "d/" + rel
	var ok, refused int
	count := func(r fresp) {
		if r.code < 300 {
			ok++
		} else {
			refused++
		}
	}
	for i := range tries {
		r := fcall(t, s, "GET", "/v1/files/content", qp("path", base+"/secret"), nil, nil)
		if bytes.Contains(r.body, []byte("ESCAPED")) {
			t.Fatalf("try %d: content read the file outside Home", i)
		}
		count(r)
		r = fcall(t, s, "GET", "/v1/files/stat", qp("path", base+"/secret"), nil, nil)
		if r.code == 200 && strings.Contains(string(r.body), `"size":8`) {
			t.Fatalf("try %d: stat saw the file outside Home: %s", i, r.body)
		}
		count(r)
		r = fcall(t, s, "GET", "/v1/files/list", qp("path", base), nil, nil)
		if strings.Contains(string(r.body), "outonly") {
			t.Fatalf("try %d: list saw the directory outside Home: %s", i, r.body)
		}
		count(r)
		count(fcall(t, s, "PUT", "/v1/files/content", qp("path", fmt.Sprintf("%s/w-%d", base, i)), strings.NewReader("pwned"), nil))
		count(fjson(t, s, "/v1/files/edit", map[string]any{"path": base + "/secret", "old_text": "ESCAPED", "new_text": "pwned"}))
		count(fjson(t, s, "/v1/files/mkdir", map[string]any{"path": fmt.Sprintf("%s/m-%d", base, i)}))
		count(fjson(t, s, "/v1/files/move", map[string]any{"from": base + "/outonly", "to": fmt.Sprintf("moved-%d", i)}))
		count(fcall(t, s, "DELETE", "/v1/files", qp("path", fmt.Sprintf("%s/victim-%d", base, i)), nil, nil))
		count(fcall(t, s, "DELETE", "/v1/files", qp("path", base+"/vdir", "recursive", "true"), nil, nil))
		r = fcall(t, s, "GET", "/v1/files/archive", qp("path", "d"), nil, nil)
		if r.code == 200 {
			for name, body := range untar(t, r.body) {
				if strings.Contains(name, "outonly") || strings.Contains(body, "ESCAPED") {
					t.Fatalf("try %d: the archive holds %s (%q) from outside Home", i, name, body)
				}
			}
		}
		count(r)
	}
	s.c.Terminate(ctx(t), res.JobID, 1)
	after, _ := os.ReadDir(out)
	if len(after) != len(before) {
		names := []string{}
		for _, e := range after {
			names = append(names, e.Name())
		}
		t.Errorf("the directory outside Home changed: %d entries before, %d after: %v", len(before), len(after), names)
	}
	for _, f := range []string{"secret", "outonly"} {
		if b, _ := os.ReadFile(filepath.Join(out, f)); string(b) != "ESCAPED\n" {
			t.Errorf("%s outside Home was changed: %q", f, b)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "vdir", "sub", "f")); err != nil {
		t.Errorf("the directory outside Home lost vdir/sub/f: %v", err)
	}
	// Both outcomes were seen: the race was run, not avoided.
	if ok == 0 || refused == 0 {
		t.Errorf("%d answers succeeded and %d were refused: the swap was not raced", ok, refused)
	}
	t.Logf("%d tries of 10 routes: %d succeeded (inside Home), %d refused", tries, ok, refused)
}

// A FIFO, a socket and a device a job made in Home are answered 409
// not_a_regular_file at once, never opened for reading (a FIFO would
// block, /dev/zero never end); a link to /dev/zero is refused as leading
// out of Home.
func TestFilesAttackSpecialFiles(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	out := jobDo(t, s, `cd "$HOME" && mkfifo fifo && perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Local => "sock", Listen => 1) or die "socket: $!"' && ln -s /dev/zero zlink && (mknod zero c 1 5 && echo mknod=ok || echo mknod=no)`)
	specials := []string{"fifo", "sock"}
	if strings.Contains(out, "mknod=ok") {
		specials = append(specials, "zero")
	} else {
		t.Logf("the job may not make a device (%q): /dev/zero is tried through a link and a --file-root below", out)
	}
	for _, p := range specials {
		start := time.Now()
		want(t, "content "+p, fcall(t, s, "GET", "/v1/files/content", qp("path", p), nil, nil), 409, "not_a_regular_file")
		want(t, "PUT "+p, fcall(t, s, "PUT", "/v1/files/content", qp("path", p), strings.NewReader("x"), nil), 409, "not_a_regular_file")
		want(t, "edit "+p, fjson(t, s, "/v1/files/edit", map[string]any{"path": p, "old_text": "a", "new_text": "b"}), 409, "not_a_regular_file")
		want(t, "list "+p, fcall(t, s, "GET", "/v1/files/list", qp("path", p), nil, nil), 409, "not_a_directory")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: the refusals took %v, not at once", p, d)
		}
		r := fcall(t, s, "GET", "/v1/files/stat", qp("path", p), nil, nil)
		if r.code != 200 || strings.Contains(string(r.body), `"type":"file"`) {
			t.Errorf("stat %s: %d %s", p, r.code, r.body)
		}
	}
	want(t, "content of a link to /dev/zero", fcall(t, s, "GET", "/v1/files/content", qp("path", "zlink"), nil, nil), 403, "path_not_allowed")
	// /dev itself as a root: its devices are still no regular files.
	s2 := startServer(t, serverOpts{args: []string{"--file-root", "/dev"}})
	start := time.Now()
	want(t, "content /dev/zero", fcall(t, s2, "GET", "/v1/files/content", qp("path", "/dev/zero"), nil, nil), 409, "not_a_regular_file")
	want(t, "PUT /dev/null", fcall(t, s2, "PUT", "/v1/files/content", qp("path", "/dev/null"), strings.NewReader("x"), nil), 409, "not_a_regular_file")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("/dev/zero: the refusal took %v, not at once", d)
	}
}

// The state dir under a --file-root is out of reach: by its name, beneath
// it, and through a link within the root.
func TestFilesAttackStateDirThroughRoot(t *testing.T) {
	parent := t.TempDir()
	state := filepath.Join(parent, "state")
	s := startServer(t, serverOpts{stateDir: state, args: []string{"--file-root", parent}})
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) == 0 {
		t.Fatalf("state dir: %v %v", ents, err)
	}
	inside := filepath.Join(state, ents[0].Name())
	os.Symlink(state, filepath.Join(parent, "sd"))
	os.Symlink("state", filepath.Join(parent, "sdrel"))
	want(t, "list the root", fcall(t, s, "GET", "/v1/files/list", qp("path", parent), nil, nil), 200, "")
	for _, p := range []string{state, inside, parent + "/sd", parent + "/sd/" + ents[0].Name(), parent + "/sdrel/x", state + "/../state"} {
		want(t, "stat "+p, fcall(t, s, "GET", "/v1/files/stat", qp("path", p), nil, nil), 403, "path_not_allowed")
		want(t, "list "+p, fcall(t, s, "GET", "/v1/files/list", qp("path", p), nil, nil), 403, "path_not_allowed")
		want(t, "content "+p, fcall(t, s, "GET", "/v1/files/content", qp("path", p), nil, nil), 403, "path_not_allowed")
		want(t, "PUT "+p+"/new", fcall(t, s, "PUT", "/v1/files/content", qp("path", p+"/new", "mkdirs", "true"), strings.NewReader("x"), nil), 403, "path_not_allowed")
		want(t, "mkdir "+p+"/new", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": p + "/newdir"}), 403, "path_not_allowed")
		want(t, "edit "+p, fjson(t, s, "/v1/files/edit", map[string]any{"path": p, "old_text": "a", "new_text": "b"}), 403, "path_not_allowed")
	}
	want(t, "mkdir the state dir", fjson(t, s, "/v1/files/mkdir", map[string]any{"path": state}), 403, "path_not_allowed")
	want(t, "delete the state dir", fcall(t, s, "DELETE", "/v1/files", qp("path", state, "recursive", "true"), nil, nil), 403, "path_not_allowed")
	want(t, "delete in the state dir", fcall(t, s, "DELETE", "/v1/files", qp("path", inside), nil, nil), 403, "path_not_allowed")
	want(t, "move the state dir", fjson(t, s, "/v1/files/move", map[string]any{"from": state, "to": parent + "/moved"}), 403, "path_not_allowed")
	want(t, "move into the state dir", fjson(t, s, "/v1/files/move", map[string]any{"from": parent + "/sd", "to": state + "/x"}), 403, "path_not_allowed")
	after, _ := os.ReadDir(state)
	if len(after) != len(ents) {
		t.Errorf("the state dir changed: %d entries, were %d", len(after), len(ents))
	}
	// The server still works.
	if _, err := s.c.List(ctx(t), "", 10); err != nil {
		t.Errorf("the server after the attempts: %v", err)
	}
}

type tarEntry struct {
	typ  byte
	link string
	body string
	size int64
}

// untarEntries reads a whole tar stream (failing on a cut one).
func untarEntries(t *testing.T, b []byte) map[string]tarEntry {
	t.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the archive is not a whole tar stream: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("the archive's %s is cut: %v", h.Name, err)
		}
		out[h.Name] = tarEntry{typ: h.Typeflag, link: h.Linkname, body: string(body), size: h.Size}
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	out := map[string]string{}
	for n, e := range untarEntries(t, b) {
		out[n] = e.body
	}
	return out
}

func archiveWarnings(t *testing.T, r fresp) []struct {
	Kind, Path string
	Count      int
} {
	t.Helper()
	var w []struct {
		Kind, Path string
		Count      int
	}
	if err := json.Unmarshal([]byte(r.trailer.Get("X-Archive-Warnings")), &w); err != nil {
		t.Fatalf("X-Archive-Warnings %q: %v", r.trailer.Get("X-Archive-Warnings"), err)
	}
	return w
}

func hasWarning(t *testing.T, r fresp, kind, path string) bool {
	for _, w := range archiveWarnings(t, r) {
		if w.Kind == kind && strings.Contains(w.Path, path) {
			return true
		}
	}
	return false
}

// archive: a tree with files, a link, a FIFO, names equal after NFC and a
// control character; tar and tar.zst; the trailers; each bound.
func TestFilesArchive(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	jobDo(t, s, `cd "$HOME" && mkdir -p proj/src/deep && printf 'main\n' > proj/src/main.go && printf 'deep\n' > proj/src/deep/d.txt && head -c 3000000 /dev/zero > proj/big.bin && ln -s /etc/shadow proj/shadow && mkfifo proj/fifo && printf a > "proj/$(printf 'e\314\201')" && printf b > "proj/$(printf '\303\251')" && printf c > "proj/bell$(printf '\a')"`)
	r := fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj"), nil, nil)
	want(t, "archive", r, 200, "")
	if r.trailer.Get("X-Archive-Status") != "ok" || r.trailer.Get("X-Archive-Sha256") != sha(r.body) || r.trailer.Get("X-Archive-Bytes") != fmt.Sprint(len(r.body)) || r.trailer.Get("X-Archive-Files") != "6" {
		t.Errorf("trailers %v (stream of %d bytes, sha256 %s)", r.trailer, len(r.body), sha(r.body))
	}
	ents := untarEntries(t, r.body)
	if ents["src/main.go"].body != "main\n" || ents["src/deep/d.txt"].body != "deep\n" || ents["big.bin"].size != 3000000 || ents["src/"].typ != tar.TypeDir {
		t.Errorf("archive entries: %v", ents)
	}
	if e := ents["shadow"]; e.typ != tar.TypeSymlink || e.link != "/etc/shadow" {
		t.Errorf("the link is stored as %+v", e)
	}
	if _, ok := ents["fifo"]; ok || !hasWarning(t, r, "not_a_regular_file", "fifo") {
		t.Errorf("the FIFO: archived %v, warnings %s", ok, r.trailer.Get("X-Archive-Warnings"))
	}
	if !hasWarning(t, r, "nfc_duplicate", "é") {
		t.Errorf("no nfc_duplicate warning: %s", r.trailer.Get("X-Archive-Warnings"))
	}
	if !hasWarning(t, r, "control_character", `bell\a`) {
		t.Errorf("no control_character warning: %s", r.trailer.Get("X-Archive-Warnings"))
	}
	// tar.zst holds the same entries.
	rz := fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj", "format", "tar.zst"), nil, nil)
	if rz.hdr.Get("Content-Type") != "application/zstd" || rz.trailer.Get("X-Archive-Sha256") != sha(rz.body) {
		t.Errorf("tar.zst: %v %v", rz.hdr, rz.trailer)
	}
	dec, err := zstd.NewReader(bytes.NewReader(rz.body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(dec)
	if err != nil {
		t.Fatalf("tar.zst: %v", err)
	}
	if got := untarEntries(t, plain); len(got) != len(ents) {
		t.Errorf("tar.zst holds %d entries, tar %d", len(got), len(ents))
	}
	// Bounds: each leaves out with a warning.
	r = fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj", "max_file_bytes", "1000"), nil, nil)
	if _, ok := untarEntries(t, r.body)["big.bin"]; ok || !hasWarning(t, r, "max_file_bytes", "big.bin") || r.trailer.Get("X-Archive-Status") != "ok" {
		t.Errorf("max_file_bytes: big.bin archived %v, trailers %v", ok, r.trailer)
	}
	r = fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj", "max_files", "2"), nil, nil)
	if r.trailer.Get("X-Archive-Status") != "truncated" || r.trailer.Get("X-Archive-Files") != "2" || !hasWarning(t, r, "max_files", "") {
		t.Errorf("max_files=2: trailers %v", r.trailer)
	}
	r = fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj", "max_bytes", "100"), nil, nil)
	if r.trailer.Get("X-Archive-Status") != "truncated" || !hasWarning(t, r, "max_bytes", "") {
		t.Errorf("max_bytes=100: trailers %v", r.trailer)
	}
	want(t, "archive a file", fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj/src/main.go"), nil, nil), 409, "not_a_directory")
	want(t, "archive bad format", fcall(t, s, "GET", "/v1/files/archive", qp("path", "proj", "format", "zip"), nil, nil), 400, "invalid_request")
	want(t, "archive outside", fcall(t, s, "GET", "/v1/files/archive", qp("path", "/etc"), nil, nil), 403, "path_not_allowed")
}

// A job makes 200 000 empty directories: the archive stops at the
// traversal budget with a warning, in bounded time and memory.
func TestFilesArchiveTraversalBudget(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{home: scratchHome(t)})
	jobDo(t, s, `cd "$HOME" && perl -e 'mkdir "t" or die; for my $i (1..200000) { mkdir "t/$i" or die "$i: $!" }'`)
	hwm := func() int64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
		var kb int64
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")), "%d", &kb)
			}
		}
		return kb << 10
	}
	before := hwm()
	start := time.Now()
	r := fcall(t, s, "GET", "/v1/files/archive", qp("path", "t"), nil, nil)
	d := time.Since(start)
	want(t, "archive", r, 200, "")
	ents := untarEntries(t, r.body)
	if r.trailer.Get("X-Archive-Status") != "truncated" || !hasWarning(t, r, "max_entries_visited", "") || len(ents) > 100_000 {
		t.Errorf("200 000 dirs: status %q, %d entries, warnings %s", r.trailer.Get("X-Archive-Status"), len(ents), r.trailer.Get("X-Archive-Warnings"))
	}
	if d > 30*time.Second {
		t.Errorf("the archive took %v", d)
	}
	if grew := hwm() - before; grew > 256<<20 {
		t.Errorf("the server's peak memory grew by %d MiB", grew>>20)
	}
	t.Logf("200 000 dirs: %d entries in %v, peak memory %d -> %d MiB", len(ents), d, before>>20, hwm()>>20)
}

// A file a job keeps appending to is archived whole or left out with a
// warning, never cut or mixed.
func TestFilesArchiveGrowingFile(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Mode: "stdio", Timeout: 1, Script: `cd "$HOME" && mkdir g && head -c 2000000 /dev/zero | tr '\0' x > g/grow && echo ready && exec perl -e 'open my $f, ">>", "g/grow" or die; $f->autoflush(1); while (1) { print $f "x" x 4096; select(undef, undef, undef, 0.0005) }'`})
	if err != nil || res.Done || !strings.Contains(res.Output, "ready") {
		t.Fatalf("the growing job: %v %+v", err, res)
	}
	defer s.c.Terminate(ctx(t), res.JobID, 1)
	left, whole := 0, 0
	for range 30 {
		r := fcall(t, s, "GET", "/v1/files/archive", qp("path", "g"), nil, nil)
		want(t, "archive", r, 200, "")
		e, ok := untarEntries(t, r.body)["grow"]
		switch {
		case ok && (int64(len(e.body)) != e.size || strings.Trim(e.body, "x") != ""):
			t.Fatalf("the growing file was archived cut or mixed: %d bytes for a size of %d", len(e.body), e.size)
		case ok:
			whole++
		case hasWarning(t, r, "changed", "grow"):
			left++
		default:
			t.Fatalf("the growing file is neither archived nor warned of: %s", r.trailer.Get("X-Archive-Warnings"))
		}
	}
	if left == 0 {
		t.Errorf("the file was never seen changing (%d whole): the test proves nothing", whole)
	}
	t.Logf("30 archives: %d left out with a warning, %d whole", left, whole)
}

// sseEvents opens a watch and returns its events (name + data) as they
// come, after the ready event.
func sseEvents(t *testing.T, s *server, q url.Values) (<-chan [2]string, func()) {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	req, _ := http.NewRequestWithContext(c, "GET", s.URL+"/v1/files/watch?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch: %d %s", resp.StatusCode, b)
	}
	ch := make(chan [2]string, 1024)
	ready := make(chan struct{})
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		ev := ""
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				ev = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				if ev == "ready" {
					close(ready)
					continue
				}
				select {
				case ch <- [2]string{ev, strings.TrimPrefix(l, "data: ")}:
				case <-c.Done():
					return
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("watch: no ready event")
	}
	return ch, cancel
}

// watch: a job's changes beneath a watched directory arrive as events,
// in a new subdirectory too (recursive).
func TestFilesWatch(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	os.MkdirAll(filepath.Join(s.Home, "w"), 0o755)
	ch, stop := sseEvents(t, s, qp("path", "w"))
	defer stop()
	jobDo(t, s, `cd "$HOME/w" && echo a > f && mkdir sub && echo b > sub/g && mv f f2 && rm sub/g`)
	wantEv := map[string]bool{
		`{"op":"create","path":"` + s.Home + `/w/f","type":"file"}`:     false,
		`{"op":"write","path":"` + s.Home + `/w/f","type":"file"}`:      false,
		`{"op":"create","path":"` + s.Home + `/w/sub","type":"dir"}`:    false,
		`{"op":"create","path":"` + s.Home + `/w/sub/g","type":"file"}`: false,
		`{"op":"rename","path":"` + s.Home + `/w/f","type":"file"}`:     false,
		`{"op":"create","path":"` + s.Home + `/w/f2","type":"file"}`:    false,
		`{"op":"remove","path":"` + s.Home + `/w/sub/g","type":"file"}`: false,
	}
	deadline := time.After(10 * time.Second)
	left := len(wantEv)
	for left > 0 {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("the watch ended")
			}
			if seen, ok := wantEv[e[1]]; ok && !seen && e[0] == "change" {
				wantEv[e[1]] = true
				left--
			}
		case <-deadline:
			t.Fatalf("events not seen: %v", wantEv)
		}
	}
	want(t, "watch a file", fcall(t, s, "GET", "/v1/files/watch", qp("path", "w/f2"), nil, nil), 409, "not_a_directory")
	want(t, "watch outside", fcall(t, s, "GET", "/v1/files/watch", qp("path", "/etc"), nil, nil), 403, "path_not_allowed")
}

// A watcher that does not read while a job makes hundreds of thousands
// of changes gets an overflow event, and the server stays bounded.
func TestFilesWatchOverflow(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	os.MkdirAll(filepath.Join(s.Home, "w"), 0o755)
	ch, stop := sseEvents(t, s, qp("path", "w"))
	defer stop()
	// Writes alternate between two files: the kernel merges only equal
	// consecutive events.
	jobDo(t, s, `cd "$HOME/w" && perl -e 'open my $a, ">", "a" or die; open my $b, ">", "b" or die; $a->autoflush(1); $b->autoflush(1); for (1..300000) { print $a "x"; print $b "y" }'`)
	deadline := time.After(60 * time.Second)
	for n := 0; ; n++ {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the watch ended after %d events without an overflow", n)
			}
			if e[0] == "overflow" {
				t.Logf("overflow after %d events", n)
				return
			}
		case <-deadline:
			t.Fatalf("no overflow event after %d events", n)
		}
	}
}

// shellctl cp (both ways, a file and a directory, tar on - both ways),
// ls and cat.
func TestFilesCLI(t *testing.T) {
	s := startServer(t, serverOpts{})
	local := t.TempDir()
	os.MkdirAll(filepath.Join(local, "src", "sub"), 0o755)
	os.WriteFile(filepath.Join(local, "src", "a.txt"), []byte("alpha\n"), 0o640)
	os.WriteFile(filepath.Join(local, "src", "sub", "b.txt"), []byte("beta\n"), 0o644)

	if r := cli(t, s, local, "", "cp", "src/a.txt", ":up.txt"); r.code != 0 {
		t.Fatalf("cp file up: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Home, "up.txt")); string(b) != "alpha\n" {
		t.Errorf("cp file up wrote %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(s.Home, "up.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("cp file up: mode %v, want the local file's 0640", fi.Mode())
	}
	if r := cli(t, s, local, "", "cp", "src", ":proj"); r.code != 0 {
		t.Fatalf("cp dir up: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Home, "proj", "sub", "b.txt")); string(b) != "beta\n" {
		t.Errorf("cp dir up: proj/sub/b.txt holds %q", b)
	}
	if r := cli(t, s, local, "", "cat", "proj/a.txt"); r.code != 0 || r.stdout != "alpha\n" {
		t.Errorf("cat: %v", r)
	}
	if r := cli(t, s, local, "", "ls", "proj"); r.code != 0 || !strings.Contains(r.stdout, " a.txt\n") || !strings.Contains(r.stdout, " sub/\n") {
		t.Errorf("ls: %v", r)
	}
	if r := cli(t, s, local, "", "cp", ":proj", "down"); r.code != 0 {
		t.Fatalf("cp dir down: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "down", "sub", "b.txt")); string(b) != "beta\n" {
		t.Errorf("cp dir down: down/sub/b.txt holds %q", b)
	}
	if r := cli(t, s, local, "", "cp", ":up.txt", "."); r.code != 0 {
		t.Fatalf("cp file down into .: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "up.txt")); string(b) != "alpha\n" {
		t.Errorf("cp file down: %q", b)
	}
	// - is a tar stream both ways.
	r := cli(t, s, local, "", "cp", ":proj", "-")
	if r.code != 0 {
		t.Fatalf("cp :proj -: %v", r)
	}
	ents := untarEntries(t, []byte(r.stdout))
	if ents["sub/b.txt"].body != "beta\n" || ents["a.txt"].body != "alpha\n" {
		t.Errorf("cp :proj -: %v", ents)
	}
	if r := cli(t, s, local, r.stdout, "cp", "-", ":fromtar"); r.code != 0 {
		t.Fatalf("cp - :fromtar: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Home, "fromtar", "sub", "b.txt")); string(b) != "beta\n" {
		t.Errorf("cp - :fromtar: sub/b.txt holds %q", b)
	}
	if r := cli(t, s, local, "", "cp", "a", "b"); r.code == 0 || !strings.Contains(r.stderr, "colon") {
		t.Errorf("cp without a server side: %v", r)
	}
	if r := cli(t, s, local, "", "cat", "/etc/shadow"); r.code == 0 || !strings.Contains(r.stderr, "path_not_allowed") {
		t.Errorf("cat /etc/shadow: %v", r)
	}
}

// A PUT whose body stalls is cut after --body-read-timeout: 408, and no
// temporary file is left beside the target.
func TestFilesPutStalledBody(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--body-read-timeout", "1s"}})
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("some bytes, then nothing"))
	start := time.Now()
	r := fcall(t, s, "PUT", "/v1/files/content", qp("path", "stalled"), pr, nil)
	want(t, "stalled PUT", r, 408, "request_timeout")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the stalled PUT took %v", d)
	}
	if ents, _ := os.ReadDir(s.Home); len(ents) != 0 {
		t.Errorf("the stalled PUT left %d entries in Home (%s…)", len(ents), ents[0].Name())
	}
}

// At most 8 archives stream at once: a ninth is 429 at once, and one
// more is served once one has ended.
func TestFilesArchivesAtOnceAreBounded(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	os.MkdirAll(filepath.Join(s.Home, "a"), 0o755)
	f, _ := os.Create(filepath.Join(s.Home, "a", "big"))
	f.Truncate(64 << 20) // more than the sockets' buffers hold
	f.Close()
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for i := range 8 {
		// Unread: the server blocks sending it, the archive stays open.
		resp, err := http.Get(s.URL + "/v1/files/archive?path=a")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("archive %d: %v %v", i, err, resp)
		}
		open = append(open, resp)
	}
	want(t, "a ninth archive", fcall(t, s, "GET", "/v1/files/archive", qp("path", "a", "max_file_bytes", "1"), nil, nil), 429, "too_many_archives")
	open[0].Body.Close()
	open = open[1:]
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := fcall(t, s, "GET", "/v1/files/archive", qp("path", "a", "max_file_bytes", "1"), nil, nil)
		if r.code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no archive served after one ended: %d %s", r.code, r.body)
		}
	}
}
