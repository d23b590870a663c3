package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

func sha(data string) string {
	for _, it := range fakestubCanned() {
		if string(it.Data) == data {
			return it.Hash
		}
	}
	return ""
}

func fakestubCanned() []*fakestub.DriveItem { return fakestub.New("x").Drive() }

func TestDriveList(t *testing.T) {
	h := newHarness(t)
	r := h.run("", "drive", "list")
	want := "12\ttext/plain\t" + sha("nested file\n") + "\tdocs/a/b.txt\n" +
		"8\ttext/markdown\t" + sha("# Drive\n") + "\tdocs/readme.md\n"
	if r.code != 0 || !strings.HasPrefix(r.stdout, want) || !strings.HasSuffix(r.stdout, "-\t-\t-\textra/fields.json\n") ||
		!strings.Contains(r.stdout, "99\ttext/plain\t"+sha("twelve bytes")+"\tsizes/wrong.txt\n") || strings.Count(r.stdout, "\n") != 10 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	reqs := h.stub.Requests()
	if len(reqs) != 1 || reqs[0].Method != "GET" || reqs[0].Path != "/agent-stub/drive/manifest" ||
		reqs[0].RawQuery != "include_download_url=false&prefix=" || reqs[0].Authorization != "Bearer "+testToken {
		t.Fatalf("requests %+v", reqs)
	}
	r = h.run("", "drive", "list", "docs/", "--json")
	r.want(t, 0, `{"items":[{"key":"docs/a/b.txt","size":12,"mime_type":"text/plain","hash":"`+sha("nested file\n")+
		`"},{"key":"docs/readme.md","size":8,"mime_type":"text/markdown","hash":"`+sha("# Drive\n")+`"}]}`+"\n", "")
	if q := h.stub.Requests()[1].RawQuery; q != "include_download_url=false&prefix=docs%2F" {
		t.Fatalf("query %q", q)
	}
	// Unknown fields are dropped, null size and missing type/hash left out.
	h.run("", "drive", "list", "extra/", "--json").want(t, 0, `{"items":[{"key":"extra/fields.json"}]}`+"\n", "")
	h.run("", "drive", "list", "nothing/", "--json").want(t, 0, `{"items":[]}`+"\n", "")
	h.run("", "drive", "list", "nothing/").want(t, 0, "", "")
	if r := h.run("", "drive", "list", "a", "b"); r.code != 2 {
		t.Fatalf("two prefixes: exit %d", r.code)
	}
}

func TestDriveErrors(t *testing.T) {
	h := newHarness(t)
	h.mustMode("drive-gone")
	h.run("", "drive", "list").want(t, 1, "", "dify-agent: agent stub drive manifest failed (HTTP 404): Not Found\n")
	h.run("", "drive", "pull", "--to", "d").want(t, 1, "", "dify-agent: agent stub drive manifest failed (HTTP 404): Not Found\n")
	h.mustMode()
	h.stub.Fail("GET /drive/manifest", fakestub.ModeMalformed)
	h.run("", "drive", "list").wantFail(t, "dify-agent: parse drive manifest: ")
	// A reply that drips one byte per 100 ms runs into the API timeout.
	h.stub.Fail("GET /drive/manifest", fakestub.ModeDrip)
	h.env[agentstub.EnvTestAPITimeout] = "300ms"
	h.run("", "drive", "list").want(t, 1, "", "dify-agent: agent stub drive manifest failed: timeout: no complete answer from the agent stub within 300ms\n")
	h.stub.Fail("GET /drive/manifest", fakestub.ModeStall)
	h.run("", "drive", "list").want(t, 1, "", "dify-agent: agent stub drive manifest failed: timeout: no answer from the agent stub within 300ms\n")
	h.stub.Fail("GET /drive/manifest", fakestub.ModeNone)
	h.env[agentstub.EnvToken] = "nope"
	h.run("", "drive", "list").want(t, 1, "", "dify-agent: agent stub drive manifest failed (HTTP 401): invalid or missing Agent Stub authorization\n")
}

// walkFiles lists the regular files and links under dir, relative.
func walkFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(out)
	return out
}

func TestDrivePull(t *testing.T) {
	h := newHarness(t)
	base := h.path("drive")
	// An existing file is overwritten.
	h.write("drive/docs/readme.md", []byte("old"))
	h.run("", "drive", "pull", "docs", "nothing/", "skills/x/", "--to", "drive").want(t, 0,
		base+"/docs\n"+base+"/skills/x\n", "")
	if got := walkFiles(t, base); strings.Join(got, " ") != "docs/a/b.txt docs/readme.md skills/x/.DIFY-SKILL-FULL.zip skills/x/SKILL.md" {
		t.Fatalf("files %q", got)
	}
	if string(h.read("drive/docs/a/b.txt")) != "nested file\n" || string(h.read("drive/docs/readme.md")) != "# Drive\n" {
		t.Fatal("contents differ")
	}
	var queries []string
	for _, r := range h.requests("/agent-stub/drive/manifest") {
		queries = append(queries, r.RawQuery)
	}
	if strings.Join(queries, " ") != "include_download_url=true&prefix=docs include_download_url=true&prefix=nothing%2F include_download_url=true&prefix=skills%2Fx%2F" {
		t.Fatalf("queries %q", queries)
	}
	for _, r := range h.requests("/signed/download/") {
		if r.Authorization != "" {
			t.Fatal("signed download with a token")
		}
	}
	// The base from the environment, and --json.
	h.env[fakeDriveBaseEnv] = h.path("envdrive")
	h.run("", "drive", "pull", "docs/a", "--json").want(t, 0,
		`{"items":[{"key":"docs/a","local_path":"`+h.path("envdrive/docs/a")+`"}]}`+"\n", "")
	h.run("", "drive", "pull", "none", "--json").want(t, 0, `{"items":[]}`+"\n", "")
	if string(h.read("envdrive/docs/a/b.txt")) != "nested file\n" {
		t.Fatal("env base not used")
	}
}

const fakeDriveBaseEnv = "DIFY_AGENT_STUB_DRIVE_BASE"

// Keys that leave the base are refused before anything is written for
// them; so are size mismatches and items without a URL.
func TestDrivePullRefusals(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ prefix, stderr string }{
		{"../", "dify-agent: drive key resolves outside the drive base: ../escape.txt\n"},
		{"a/", "dify-agent: drive key resolves outside the drive base: a/../../escape\n"},
		{"/etc", "dify-agent: drive key resolves outside the drive base: /etc/x\n"},
		{"sizes/", "dify-agent: downloaded drive file size mismatch for sizes/wrong.txt\n"},
		{"nourl/", "dify-agent: drive manifest item is missing download_url: nourl/item.txt\n"},
	} {
		h.run("", "drive", "pull", c.prefix, "--to", "base/drive").want(t, 1, "", c.stderr)
	}
	if got := walkFiles(t, h.root); len(got) != 0 {
		t.Fatalf("files written: %q", got)
	}
	// The whole drive: stops at the first bad item, keeps what it wrote.
	h.run("", "drive", "pull", "--to", "base/drive").want(t, 1, "", "dify-agent: downloaded drive file size mismatch for sizes/wrong.txt\n")
	if got := walkFiles(t, h.root); strings.Join(got, " ") != "work/base/drive/docs/a/b.txt work/base/drive/docs/readme.md "+
		"work/base/drive/skills/x/.DIFY-SKILL-FULL.zip work/base/drive/skills/x/SKILL.md" {
		t.Fatalf("files %q", got)
	}
	h.stub.Fail("download *", fakestub.ModeServerError)
	h.run("", "drive", "pull", "docs/readme", "--to", "base/drive").wantFail(t,
		"dify-agent: download docs/readme.md: download failed with status 500: ")
}

// A symlink inside the base, in a parent or at the name, never leads a
// write outside.
func TestDrivePullSymlinks(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(h.root, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "readme.md"), []byte("keep"), 0o644)
	base := h.path("drive")
	os.MkdirAll(filepath.Join(base, "docs"), 0o755)
	// docs/a -> outside: "docs/a/b.txt" must not land in outside/b.txt.
	if err := os.Symlink(outside, filepath.Join(base, "docs", "a")); err != nil {
		t.Fatal(err)
	}
	h.run("", "drive", "pull", "docs/a", "--to", "drive").want(t, 1, "",
		"dify-agent: write "+base+"/docs/a/b.txt: open directory docs/a: refusing to follow a symlink\n")
	// A relative link that stays inside the base is refused as well.
	os.Remove(filepath.Join(base, "docs", "a"))
	os.MkdirAll(filepath.Join(base, "real"), 0o755)
	os.Symlink("../real", filepath.Join(base, "docs", "a"))
	h.run("", "drive", "pull", "docs/a", "--to", "drive").wantFail(t, "dify-agent: write ")
	if got := walkFiles(t, outside); strings.Join(got, " ") != "readme.md" {
		t.Fatalf("outside: %q", got)
	}
	if got := walkFiles(t, filepath.Join(base, "real")); len(got) != 0 {
		t.Fatalf("written through a link: %q", got)
	}
	// At the name itself the link is replaced, not written through.
	os.Symlink(filepath.Join(outside, "readme.md"), filepath.Join(base, "docs", "readme.md"))
	h.run("", "drive", "pull", "docs/readme", "--to", "drive").want(t, 0, base+"/docs/readme\n", "")
	if b, _ := os.ReadFile(filepath.Join(outside, "readme.md")); string(b) != "keep" {
		t.Fatalf("outside file changed: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(base, "docs", "readme.md")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("readme.md: %v %v", fi, err)
	}
	// And the base itself may be a symlink (a mount point, say).
	os.Symlink(base, h.path("drivelink"))
	h.run("", "drive", "pull", "docs/readme", "--to", "drivelink").want(t, 0, h.path("drivelink")+"/docs/readme\n", "")
}

// commitBody decodes the one drive commit request.
func commitBody(t *testing.T, h *harness) []map[string]any {
	t.Helper()
	cs := h.requests("/agent-stub/drive/commit")
	if len(cs) != 1 {
		t.Fatalf("%d commits", len(cs))
	}
	var body struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(cs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Items
}

func TestDrivePushFile(t *testing.T) {
	h := newHarness(t)
	h.write("notes.md", []byte("# notes\n"))
	r := h.run("", "drive", "push", "notes.md", "team/notes.md", "--json")
	ids := h.stub.UploadIDs()
	if len(ids) != 1 {
		t.Fatalf("uploads %q", ids)
	}
	reqs := h.stub.Requests()
	if len(reqs) != 3 || reqs[0].RawQuery != "" || string(reqs[0].Body) != `{"filename":"notes.md","mimetype":"text/markdown"}` ||
		string(reqs[2].Body) != `{"items":[{"key":"team/notes.md","file_ref":{"kind":"tool_file","id":"`+ids[0]+`"}}]}` ||
		reqs[2].ContentType != "application/json" || reqs[2].Authorization != "Bearer "+testToken {
		t.Fatalf("requests %+v", reqs)
	}
	if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, `{"items":[{`) || !strings.Contains(r.stdout, `"key":"team/notes.md"`) {
		t.Fatalf("exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if strings.Count(r.stdout, "\n") != 1 || !json.Valid([]byte(r.stdout)) {
		t.Fatalf("stdout is not one JSON line: %q", r.stdout)
	}
	got := h.run("", "drive", "list", "team/", "--json")
	if !strings.Contains(got.stdout, `"key":"team/notes.md","size":8,"mime_type":"text/markdown"`) {
		t.Fatalf("not in the drive: %q", got.stdout)
	}
}

func TestDrivePushDir(t *testing.T) {
	h := newHarness(t)
	h.write("proj/a.txt", []byte("a"))
	h.write("proj/sub/b.py", []byte("b"))
	h.write("proj/.git/HEAD", []byte("ref"))
	h.write("proj/node_modules/x/index.js", []byte("x"))
	h.write("proj/sub/__pycache__/b.pyc", []byte("c"))
	if r := h.run("", "drive", "push", "proj", "/remote/proj/", "--kind", "dir"); r.code != 0 {
		t.Fatalf("push dir: exit %d %q", r.code, r.stderr)
	}
	items := commitBody(t, h)
	var keys []string
	for _, it := range items {
		keys = append(keys, it["key"].(string))
	}
	if strings.Join(keys, " ") != "/remote/proj/a.txt /remote/proj/sub/b.py" {
		t.Fatalf("keys %q", keys)
	}
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"proj", "r"}, "dify-agent: directory drive push requires --kind skill or --kind dir\n"},
		{[]string{"proj", "r", "--kind", "file"}, "dify-agent: --kind file requires a file\n"},
		{[]string{"proj", "r", "--kind", "skill"}, "dify-agent: --kind skill requires a directory containing SKILL.md\n"},
		{[]string{"proj/a.txt", "r", "--kind", "skill"}, "dify-agent: --kind skill requires a directory containing SKILL.md\n"},
		{[]string{"proj/a.txt", "r", "--kind", "dir"}, "dify-agent: --kind dir requires a directory\n"},
		{[]string{"missing", "r"}, "dify-agent: local path not found: " + h.path("missing") + "\n"},
	} {
		h.run("", append([]string{"drive", "push"}, c.args...)...).want(t, 1, "", c.stderr)
	}
	os.MkdirAll(h.path("empty/.git"), 0o755)
	h.write("empty/.git/x", []byte("x"))
	h.run("", "drive", "push", "empty", "r", "--kind", "dir").want(t, 1, "", "dify-agent: directory has no regular files: "+h.path("empty")+"\n")
	os.Symlink("a.txt", h.path("proj/link"))
	h.run("", "drive", "push", "proj", "r", "--kind", "dir").want(t, 1, "", "dify-agent: drive push does not support symlinked files: "+h.path("proj/link")+"\n")
	if n := len(h.requests("/agent-stub/drive/commit")); n != 1 {
		t.Fatalf("%d commits, want the first only", n)
	}
	// A failed upload commits nothing.
	os.Remove(h.path("proj/link"))
	h.stub.Fail("upload b.py", fakestub.ModeServerError)
	h.run("", "drive", "push", "proj", "r", "--kind", "dir").wantFail(t, "dify-agent: upload r/sub/b.py: upload file data: upload failed with status 500: ")
	if n := len(h.requests("/agent-stub/drive/commit")); n != 1 {
		t.Fatalf("%d commits after a failed upload", n)
	}
	h.stub.Fail("upload b.py", fakestub.ModeNone)
	h.mustMode("upload-no-id")
	h.run("", "drive", "push", "proj/a.txt", "r").want(t, 1, "", "dify-agent: upload r: upload response is missing id\n")
	h.mustMode("drive-gone")
	h.run("", "drive", "push", "proj/a.txt", "r").want(t, 1, "", "dify-agent: agent stub drive commit failed (HTTP 404): Not Found\n")
}

func TestDrivePushSkill(t *testing.T) {
	h := newHarness(t)
	h.write("sk/SKILL.md", []byte("---\nname: sk\n---\n"))
	h.write("sk/lib/run.sh", []byte("echo hi\n"))
	h.write("sk/.DS_Store", []byte("junk"))
	h.write("sk/.DIFY-SKILL-FULL.zip", []byte("old zip"))
	h.write("sk/.venv/bin/python", []byte("x"))
	tmp := t.TempDir()
	h.env["TMPDIR"] = tmp
	r := h.run("", "drive", "push", "sk", "skills/sk", "--kind", "skill")
	if r.code != 0 {
		t.Fatalf("exit %d %q", r.code, r.stderr)
	}
	items := commitBody(t, h)
	if len(items) != 2 || items[0]["key"] != "skills/sk/SKILL.md" || items[1]["key"] != "skills/sk/.DIFY-SKILL-FULL.zip" {
		t.Fatalf("items %v", items)
	}
	ups := h.requests("/agent-stub/files/upload-request")
	if len(ups) != 2 || string(ups[0].Body) != `{"filename":"SKILL.md","mimetype":"text/markdown"}` ||
		string(ups[1].Body) != `{"filename":".DIFY-SKILL-FULL.zip","mimetype":"application/zip"}` {
		t.Fatalf("upload requests %+v", ups)
	}
	id := items[1]["file_ref"].(map[string]any)["id"].(string)
	data, _ := h.stub.UploadedData(id)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Method != zip.Deflate {
			t.Errorf("%s not deflated", f.Name)
		}
		if f.Name == "lib/run.sh" {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			if string(b) != "echo hi\n" {
				t.Errorf("run.sh = %q", b)
			}
		}
	}
	if strings.Join(names, " ") != "SKILL.md lib/run.sh" {
		t.Fatalf("zip names %q", names)
	}
	// The zip was built in a temporary file, removed afterwards.
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// A key from the backend that holds terminal sequences is listed escaped:
// no ESC, BEL or newline reaches the terminal, and the line stays one.
func TestDriveListEscapesKeys(t *testing.T) {
	h := newHarness(t)
	h.stub.SetDrive([]*fakestub.DriveItem{{Key: "evil\x1b]52;c;aGk=\x07\nname.txt", Data: []byte("x"), MimeType: "text/\x1b[2Jplain"}})
	r := h.run("", "drive", "list")
	if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b\x07") || strings.Count(r.stdout, "\n") != 1 ||
		!strings.Contains(r.stdout, `evil\x1b]52;c;aGk=\x07\nname.txt`) || !strings.Contains(r.stdout, `text/\x1b[2Jplain`) {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
