package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

// multipartFile returns the "file" part of a recorded signed upload.
func multipartFile(t *testing.T, r fakestub.Request) (filename, contentType string, data []byte) {
	t.Helper()
	_, params, err := mime.ParseMediaType(r.ContentType)
	if err != nil {
		t.Fatalf("upload Content-Type %q: %v", r.ContentType, err)
	}
	mr := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"])
	p, err := mr.NextPart()
	if err != nil || p.FormName() != "file" {
		t.Fatalf("first part: %v %q", err, p.FormName())
	}
	data, _ = io.ReadAll(p)
	if _, err := mr.NextPart(); err != io.EOF {
		t.Fatalf("more than one part: %v", err)
	}
	return p.FileName(), p.Header.Get("Content-Type"), data
}

func (h *harness) mustMode(names ...string) {
	h.t.Helper()
	if err := h.stub.SetMode(names...); err != nil {
		h.t.Fatal(err)
	}
}

func TestFileUpload(t *testing.T) {
	h := newHarness(t)
	h.write("report.txt", []byte("hello report\n"))
	r := h.run("", "file", "upload", "report.txt")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	ids := h.stub.UploadIDs()
	if len(ids) != 1 {
		t.Fatalf("uploads: %q", ids)
	}
	ref := fakestub.FileRef(ids[0])
	reqs := h.stub.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3: %+v", len(reqs), reqs)
	}
	// 1. the upload URL, with the structured-expiry flag and the bare type
	// (.txt is "text/plain; charset=utf-8" to Go; the parameter is dropped).
	up := reqs[0]
	if up.Method != "POST" || up.Path != "/agent-stub/files/upload-request" || up.RawQuery != "expose_expiration=true" ||
		up.Authorization != "Bearer "+testToken || up.ContentType != "application/json" ||
		string(up.Body) != `{"filename":"report.txt","mimetype":"text/plain"}` {
		t.Fatalf("upload-request = %s %s?%s auth %q type %q body %s", up.Method, up.Path, up.RawQuery, up.Authorization, up.ContentType, up.Body)
	}
	// 2. the signed upload: no token, one part with the filename and type.
	sig := reqs[1]
	if sig.Method != "POST" || !strings.HasPrefix(sig.Path, "/signed/upload/") || sig.Authorization != "" {
		t.Fatalf("signed upload = %s %s auth %q", sig.Method, sig.Path, sig.Authorization)
	}
	if fn, ct, data := multipartFile(t, sig); fn != "report.txt" || ct != "text/plain" || string(data) != "hello report\n" {
		t.Fatalf("part = %q %q %q", fn, ct, data)
	}
	if sig.ContentLength <= int64(len("hello report\n")) {
		t.Fatalf("signed upload Content-Length = %d", sig.ContentLength)
	}
	// 3. the display URL.
	dl := reqs[2]
	if dl.Path != "/agent-stub/files/download-request" || dl.Authorization != "Bearer "+testToken ||
		string(dl.Body) != `{"file":{"transfer_method":"tool_file","reference":"`+ref+`"},"for_frontend":true}` {
		t.Fatalf("download-request = %s %s", dl.Path, dl.Body)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	link := out["public_download_url"]
	if !strings.HasPrefix(link, "/files/tools/"+ids[0]+"?sign=") {
		t.Fatalf("link = %q", link)
	}
	want := `{"transfer_method":"tool_file","reference":"` + ref + `","public_download_url":"` + link + `"}` + "\n"
	if r.stdout != want {
		t.Fatalf("stdout = %q, want %q", r.stdout, want)
	}
	// The display URL is relative and is never fetched.
	if rs := h.requests("/files/tools/"); len(rs) != 0 {
		t.Fatalf("the display URL was fetched: %+v", rs)
	}
}

func TestFileUploadNoDownloadLinkAndTypes(t *testing.T) {
	h := newHarness(t)
	h.write("data.unknownext", []byte{1, 2, 3})
	h.write("Makefile", []byte("all:\n"))
	for _, c := range []struct{ file, mime string }{{"data.unknownext", "application/octet-stream"}, {"Makefile", "application/octet-stream"}} {
		before := len(h.stub.Requests())
		r := h.run("", "file", "upload", c.file, "--no-download-link")
		if r.code != 0 || r.stderr != "" || strings.Contains(r.stdout, "public_download_url") ||
			!strings.HasPrefix(r.stdout, `{"transfer_method":"tool_file","reference":"dify-file-ref:`) || !strings.HasSuffix(r.stdout, "\"}\n") {
			t.Fatalf("%s: exit %d stdout %q stderr %q", c.file, r.code, r.stdout, r.stderr)
		}
		reqs := h.stub.Requests()[before:]
		if len(reqs) != 2 {
			t.Fatalf("%s: %d requests, want 2 (no download-request)", c.file, len(reqs))
		}
		if want := `{"filename":"` + c.file + `","mimetype":"` + c.mime + `"}`; string(reqs[0].Body) != want {
			t.Fatalf("%s: body %s, want %s", c.file, reqs[0].Body, want)
		}
	}
}

func TestFileUploadLocalErrors(t *testing.T) {
	h := newHarness(t)
	if err := os.Mkdir(h.path("adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.run("", "file", "upload", "missing.pdf").want(t, 1, "", "dify-agent: local file not found: "+h.path("missing.pdf")+"\n")
	h.run("", "file", "upload", "adir").want(t, 1, "", "dify-agent: local file not found: "+h.path("adir")+"\n")
	if r := h.run("", "file", "upload"); r.code != 2 {
		t.Fatalf("no PATH: exit %d", r.code)
	}
	if r := h.run("", "file", "upload", "a", "b"); r.code != 2 {
		t.Fatalf("two PATHs: exit %d", r.code)
	}
	h.wantNoRequests()
	h.env[agentstub.EnvBaseURL], h.env[agentstub.EnvToken] = "", ""
	h.run("", "file", "upload", "missing.pdf").want(t, 1, "",
		"dify-agent: missing required Agent Stub environment variables: DIFY_AGENT_STUB_API_BASE_URL, DIFY_AGENT_STUB_AUTH_JWE\n")
	h.env[agentstub.EnvBaseURL], h.env[agentstub.EnvToken] = "grpc://127.0.0.1:9000", testToken
	r := h.run("", "file", "upload", "missing.pdf")
	r.wantFail(t, "dify-agent: DIFY_AGENT_STUB_API_BASE_URL uses grpc://")
}

// The link failing after the upload: the JSON line still comes, with the
// retry command on stderr, and exit 1.
func TestFileUploadLinkFailsAfterUpload(t *testing.T) {
	h := newHarness(t)
	h.write("it's.txt", []byte("x"))
	h.stub.Fail("POST /files/download-request", fakestub.ModeServerError)
	r := h.run("", "file", "upload", "it's.txt")
	ids := h.stub.UploadIDs()
	if len(ids) != 1 {
		t.Fatalf("uploads %q", ids)
	}
	ref := fakestub.FileRef(ids[0])
	r.want(t, 1, `{"transfer_method":"tool_file","reference":"`+ref+`"}`+"\n",
		"dify-agent: request public download URL: HTTP 500: the fake stub was told to fail; retry without uploading again: dify-agent file public-url '"+ref+"'\n")

	h.stub.Fail("POST /files/download-request", fakestub.ModeNone)
	h.mustMode("empty-download-url")
	r = h.run("", "file", "upload", "it's.txt")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "public file download response is missing download_url; retry without uploading again: dify-agent file public-url '"+
		fakestub.FileRef(newest(t, h, ids))+"'\n") || strings.Contains(r.stdout, "public_download_url") {
		t.Fatalf("empty link: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got := shQuoteForTest("a'b"); got != `'a'"'"'b'` {
		t.Fatalf("quote = %s", got)
	}
}

func shQuoteForTest(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// newest returns the upload id that is not in old.
func newest(t *testing.T, h *harness, old []string) string {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range old {
		seen[id] = true
	}
	for _, id := range h.stub.UploadIDs() {
		if !seen[id] {
			return id
		}
	}
	t.Fatal("no new upload")
	return ""
}

func TestFileUploadFailures(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(h *harness)
		stderr string
	}{
		{"expired token", func(h *harness) { h.env[agentstub.EnvToken] = fakestub.TokenExpired },
			"dify-agent: request file upload URL: HTTP 401: " + agentstub.AuthExpiredText + "\n"},
		{"wrong token", func(h *harness) { h.env[agentstub.EnvToken] = "nope" },
			"dify-agent: request file upload URL: HTTP 401: invalid or missing Agent Stub authorization\n"},
		{"error envelope", func(h *harness) { h.mustMode("error-envelope"); h.env[agentstub.EnvToken] = "nope" },
			"dify-agent: request file upload URL: HTTP 401: invalid or missing Agent Stub authorization\n"},
		{"422 list", func(h *harness) { h.stub.Fail("POST /files/upload-request", fakestub.ModeUnprocessable) },
			`dify-agent: request file upload URL: HTTP 422: {"detail":[{"loc":["body","file"],"msg":"field required","type":"value_error"}]}` + "\n"},
		{"non-JSON error", func(h *harness) { h.stub.Fail("POST /files/upload-request", fakestub.ModeRawError) },
			"dify-agent: request file upload URL: HTTP 502: <html>"},
		{"signed 403", func(h *harness) { h.stub.Fail("upload *", fakestub.ModeForbidden) },
			`dify-agent: upload file data: upload failed with status 403: {"detail":"forbidden by the fake stub"}` + "\n"},
		{"early answer", func(h *harness) { h.stub.Fail("upload *", fakestub.ModeEarlyAnswer) },
			"dify-agent: upload file data: upload "},
		{"signed stall", func(h *harness) {
			h.stub.Fail("upload *", fakestub.ModeStall)
			h.env[agentstub.EnvTestTransferTimeout] = "300ms"
		}, "dify-agent: upload file data: upload request timed out\n"},
		{"upload answer not JSON", func(h *harness) { h.stub.Fail("upload *", fakestub.ModeMalformed) },
			"dify-agent: parse upload result: "},
		{"no reference", func(h *harness) { h.mustMode("upload-no-reference") },
			"dify-agent: signed file upload response is missing reference\n"},
		{"bad reference", func(h *harness) { h.mustMode("upload-bad-reference") },
			"dify-agent: signed file upload response has invalid reference\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.write("a.pdf", bytes.Repeat([]byte("pdf"), 100000))
			c.setup(h)
			r := h.run("", "file", "upload", "a.pdf")
			r.wantFail(t, c.stderr)
		})
	}
}

func TestFilePublicURL(t *testing.T) {
	h := newHarness(t)
	id, ref := h.stub.AddUpload("x.pdf", "application/pdf", []byte("%PDF"))
	r := h.run("", "file", "public-url", ref)
	var out map[string]string
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || !strings.HasPrefix(out["public_download_url"], "/files/tools/"+id+"?sign=") ||
		r.stdout != `{"transfer_method":"tool_file","reference":"`+ref+`","public_download_url":"`+out["public_download_url"]+`"}`+"\n" {
		t.Fatalf("exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if reqs := h.requests("/agent-stub/"); len(reqs) != 1 || string(reqs[0].Body) !=
		`{"file":{"transfer_method":"tool_file","reference":"`+ref+`"},"for_frontend":true}` {
		t.Fatalf("requests %+v", reqs)
	}
	h.run("", "file", "public-url", "").want(t, 1, "", "dify-agent: file reference must not be empty\n")
	// No local check of the reference: the stub answers 422.
	h.run("", "file", "public-url", "not-a-ref").wantFail(t, "dify-agent: request public download URL: HTTP 422: ")
	h.mustMode("empty-download-url")
	h.run("", "file", "public-url", ref).want(t, 1, "", "dify-agent: public file download response is missing download_url\n")
	h.mustMode()
	h.env[agentstub.EnvToken] = fakestub.TokenExpired
	h.run("", "file", "public-url", ref).want(t, 1, "", "dify-agent: request public download URL: HTTP 401: "+agentstub.AuthExpiredText+"\n")
}

func TestFileDownload(t *testing.T) {
	h := newHarness(t)
	_, ref := h.stub.AddUpload("report.pdf", "application/pdf", []byte("%PDF-1.7 body"))
	h.run("", "file", "download", "tool_file", ref, "--to", "out").want(t, 0, "out/report.pdf\n", "")
	if got := string(h.read("out/report.pdf")); got != "%PDF-1.7 body" {
		t.Fatalf("content %q", got)
	}
	if fi, _ := os.Stat(h.path("out/report.pdf")); fi.Mode().Perm() != 0o644&^umask() {
		t.Fatalf("mode %v", fi.Mode())
	}
	reqs := h.stub.Requests()
	if len(reqs) != 2 || string(reqs[0].Body) != `{"file":{"transfer_method":"tool_file","reference":"`+ref+`"},"for_frontend":false}` ||
		reqs[1].Method != "GET" || !strings.HasPrefix(reqs[1].Path, "/signed/download/") || reqs[1].Authorization != "" {
		t.Fatalf("requests %+v", reqs)
	}
	// Never overwritten: " (1)" before the extension, then " (2)".
	h.run("", "file", "download", "tool_file", ref, "--to", "out").want(t, 0, "out/report (1).pdf\n", "")
	h.run("", "file", "download", "local_file", ref, "--to", "out").want(t, 0, "out/report (2).pdf\n", "")
	if got := string(h.read("out/report.pdf")); got != "%PDF-1.7 body" {
		t.Fatalf("first file changed: %q", got)
	}
	// Default: the current directory, printed absolute.
	h.run("", "file", "download", "datasource_file", ref).want(t, 0, h.path("report.pdf")+"\n", "")
	// remote_url sends url, not reference.
	before := len(h.stub.Requests())
	h.run("", "file", "download", "remote_url", "https://example.com/files/notes.txt", "--to", "out").want(t, 0, "out/notes.txt\n", "")
	if b := h.stub.Requests()[before].Body; string(b) != `{"file":{"transfer_method":"remote_url","url":"https://example.com/files/notes.txt"},"for_frontend":false}` {
		t.Fatalf("remote body %s", b)
	}
	if got := string(h.read("out/notes.txt")); got != "remote content of https://example.com/files/notes.txt\n" {
		t.Fatalf("remote content %q", got)
	}
}

// The server's filename is reduced to a base name; a symlink at the name
// is not written through.
func TestFileDownloadNameSafety(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(h.root, "outside.txt")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ filename, want string }{
		{"../../evil.txt", "out/evil.txt"},
		{"..", "out/downloaded"},
		{".", "out/downloaded (1)"},
		{`dir\win.txt`, "out/win.txt"},
		{".bashrc", "out/.bashrc"},
		{".bashrc", "out/.bashrc (1)"},
	} {
		_, ref := h.stub.AddUpload(c.filename, "text/plain", []byte("data"))
		h.run("", "file", "download", "tool_file", ref, "--to", "out").want(t, 0, c.want+"\n", "")
	}
	if _, err := os.Stat(filepath.Join(h.root, "evil.txt")); !os.IsNotExist(err) {
		t.Fatalf("evil.txt escaped: %v", err)
	}
	if err := os.Symlink(outside, h.path("out/link.txt")); err != nil {
		t.Fatal(err)
	}
	_, ref := h.stub.AddUpload("link.txt", "text/plain", []byte("pwned"))
	h.run("", "file", "download", "tool_file", ref, "--to", "out").want(t, 0, "out/link (1).txt\n", "")
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("written through a symlink: %q", b)
	}
}

func TestFileDownloadFailures(t *testing.T) {
	h := newHarness(t)
	_, ref := h.stub.AddUpload("a.txt", "text/plain", []byte("data"))
	h.run("", "file", "download", "tool_file", "not-canonical", "--to", "out").wantFail(t, "dify-agent: request file download URL: HTTP 422: ")
	h.run("", "file", "download", "ftp_file", ref, "--to", "out").wantFail(t, "dify-agent: request file download URL: HTTP 422: ")
	h.run("", "file", "download", "tool_file", fakestub.FileRef("00000000-0000-4000-8000-000000000000"), "--to", "out").
		want(t, 1, "", "dify-agent: request file download URL: HTTP 404: file not found\n")
	h.stub.Fail("download *", fakestub.ModeForbidden)
	h.run("", "file", "download", "tool_file", ref, "--to", "out").want(t, 1, "",
		`dify-agent: download file data: download failed with status 403: {"detail":"forbidden by the fake stub"}`+"\n")
	h.stub.Fail("download *", fakestub.ModeCutBody)
	h.run("", "file", "download", "tool_file", ref, "--to", "out").wantFail(t, "dify-agent: download file data: download request failed: ")
	if ents, _ := os.ReadDir(h.path("out")); len(ents) != 0 {
		t.Fatalf("failed downloads left files: %v", ents)
	}
	h.stub.Fail("download *", fakestub.ModeNone)
	h.mustMode("empty-download-url")
	h.run("", "file", "download", "tool_file", ref).want(t, 1, "", "dify-agent: signed file download response is missing download_url\n")
	h.mustMode("empty-filename")
	h.run("", "file", "download", "tool_file", ref).want(t, 1, "", "dify-agent: signed file download response is missing filename\n")
	h.mustMode()
	h.env[agentstub.EnvToken] = fakestub.TokenExpired
	h.run("", "file", "download", "tool_file", ref).want(t, 1, "", "dify-agent: request file download URL: HTTP 401: "+agentstub.AuthExpiredText+"\n")
	if r := h.run("", "file", "download", "tool_file"); r.code != 2 {
		t.Fatalf("one argument: exit %d", r.code)
	}
}

// umask is the process umask (the binary inherits it).
func umask() os.FileMode { m := syscall.Umask(0); syscall.Umask(m); return os.FileMode(m) }

// A filename from the backend that holds control characters (a newline,
// ESC, BEL: an OSC 52 sequence that writes the terminal's clipboard),
// or bidirectional overrides is written with "_"
// in their place, and what is printed holds none of them: the terminal
// of whoever reads the answer is not driven by the backend.
func TestFileDownloadNameControlCharacters(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ filename, want string }{
		{"evil\n\x1b]52;c;aGVsbG8=\x07.txt", "out/evil__]52;c;aGVsbG8=_.txt"},
		{"dir/\x1b[2J\x1b[Hclear.sh", "out/_[2J_[Hclear.sh"},
		{"bell\x07.txt", "out/bell_.txt"},
		{"c1\u009b31m.txt", "out/c1_31m.txt"},         // the C1 CSI, encoded
		{"report\u202etxt.exe", "out/report_txt.exe"}, // reads "reportexe.txt"
		{"tab\there\r.txt", "out/tab_here_.txt"},
		{"café ✓.txt", "out/café ✓.txt"}, // printable non-ASCII is kept
	} {
		_, ref := h.stub.AddUpload(c.filename, "text/plain", []byte("data of "+c.want))
		r := h.run("", "file", "download", "tool_file", ref, "--to", "out")
		r.want(t, 0, c.want+"\n", "")
		if b, err := os.ReadFile(h.path(c.want)); err != nil || string(b) != "data of "+c.want {
			t.Errorf("%q: %q, %v", c.want, b, err)
		}
	}
	ents, _ := os.ReadDir(h.path("out"))
	for _, e := range ents {
		if strings.ContainsFunc(e.Name(), func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' }) ||
			!utf8.ValidString(e.Name()) {
			t.Errorf("a file was written with an unsafe name: %q", e.Name())
		}
	}

	// A directory given with control characters (the caller's own) is
	// printed escaped, on one line, and so is an error naming it.
	_, ref := h.stub.AddUpload("a.txt", "text/plain", []byte("a"))
	dir := "o\x1b]0;title\x07"
	h.run("", "file", "download", "tool_file", ref, "--to", dir).want(t, 0, `o\x1b]0;title\x07/a.txt`+"\n", "")
	if _, err := os.Stat(h.path(dir + "/a.txt")); err != nil {
		t.Errorf("not written where asked: %v", err)
	}
	if err := os.WriteFile(h.path("file\x1b[31m"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.run("", "file", "download", "tool_file", ref, "--to", "file\x1b[31m/sub")
	r.wantFail(t, `dify-agent: create file\x1b[31m/sub: `)
	if strings.ContainsAny(r.stderr, "\x1b\x07") {
		t.Errorf("stderr holds a control character: %q", r.stderr)
	}
}
