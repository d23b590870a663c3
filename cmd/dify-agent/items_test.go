package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

type zipEntry struct {
	name string
	body string
	mode fs.FileMode
}

func makeZip(t *testing.T, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			hdr.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSkillsPullAllUnpacks(t *testing.T) {
	h := newHarness(t)
	h.stub.SetSkill("alpha", makeZip(t,
		zipEntry{name: "SKILL.md", body: "# alpha\r\n"},
		zipEntry{name: "scripts/", mode: fs.ModeDir | 0o755},
		zipEntry{name: "scripts/run.sh", body: "#!/bin/sh\n", mode: 0o755}))
	// Zipped with its directory on top: the directory is stripped.
	h.stub.SetSkill("beta", makeZip(t, zipEntry{name: "beta/SKILL.md", body: "# beta"}, zipEntry{name: "beta/x/y.txt", body: "y"}))
	// A stale local copy is replaced.
	h.write(".dify_conf/skills/alpha/stale.md", []byte("old"))

	h.run("", "config", "skills", "pull").want(t, 0,
		h.path(".dify_conf/skills/alpha")+"\n"+h.path(".dify_conf/skills/beta")+"\n", "")
	for rel, want := range map[string]string{
		".dify_conf/skills/alpha/SKILL.md":       "# alpha\r\n",
		".dify_conf/skills/alpha/scripts/run.sh": "#!/bin/sh\n",
		".dify_conf/skills/beta/SKILL.md":        "# beta",
		".dify_conf/skills/beta/x/y.txt":         "y",
	} {
		if got := string(h.read(rel)); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	if st, err := os.Stat(h.path(".dify_conf/skills/alpha/scripts/run.sh")); err != nil || st.Mode()&0o100 == 0 {
		t.Errorf("run.sh lost its exec bit: %v %v", st.Mode(), err)
	}
	if _, err := os.Stat(h.path(".dify_conf/skills/alpha/stale.md")); !os.IsNotExist(err) {
		t.Errorf("stale local file kept: %v", err)
	}
	entries, _ := os.ReadDir(h.path(".dify_conf/skills"))
	if len(entries) != 2 {
		t.Errorf(".dify_conf/skills holds %d entries, want alpha and beta only", len(entries))
	}
	for _, r := range h.requests("/signed/") {
		if r.Authorization != "" {
			t.Errorf("signed URL %s got an Authorization header", r.Path)
		}
	}
}

// A skill archive may not write outside its directory: the whole archive is
// refused before anything is written.
func TestSkillsPullRefusesPathEscapes(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "abs-evil")
	for name, z := range map[string][]zipEntry{
		"dotdot":        {{name: "SKILL.md", body: "ok"}, {name: "../evil", body: "x"}},
		"absolute":      {{name: "SKILL.md", body: "ok"}, {name: abs, body: "x"}},
		"nested dotdot": {{name: "SKILL.md", body: "ok"}, {name: "a/../../evil", body: "x"}},
		"backslash":     {{name: "SKILL.md", body: "ok"}, {name: `..\evil`, body: "x"}},
		"symlink":       {{name: "SKILL.md", body: "ok"}, {name: "evil", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.stub.SetSkill("bad", makeZip(t, z...))
			r := h.run("", "config", "skills", "pull", "bad")
			r.wantFail(t, "dify-agent: pull skill bad: unsafe_archive: refused entry ")
			// Nothing anywhere: not beside the work dir, not at the absolute
			// path, not even the skill's own directory or a temp dir.
			_ = filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("file written: %s", p)
				}
				return nil
			})
			if _, err := os.Lstat(abs); !os.IsNotExist(err) {
				t.Errorf("absolute entry written: %v", err)
			}
		})
	}
}

func TestSkillsPullNotAZip(t *testing.T) {
	h := newHarness(t)
	h.stub.SetSkill("s", makeZip(t, zipEntry{name: "SKILL.md", body: "x"}))
	h.stub.Fail("download skill/s", fakestub.ModeMalformed)
	h.run("", "config", "skills", "pull", "s").wantFail(t, "dify-agent: pull skill s: bad_archive: not a zip archive")
}

// Names from the backend's manifest are checked like names typed by hand.
func TestPullRefusesNamesThatArePaths(t *testing.T) {
	h := newHarness(t)
	h.stub.SetFile("../escape", []byte("x"))
	h.stub.SetFile("ok", []byte("fine"))
	h.run("", "config", "files", "pull").want(t, 1, h.path(".dify_conf/files/ok")+"\n",
		`dify-agent: pull file ../escape: invalid_name: "../escape" is not a valid name (one path element)`+"\n")
	if _, err := os.Stat(filepath.Join(h.dir, ".dify_conf", "escape")); !os.IsNotExist(err) {
		t.Fatal("escaped")
	}
}

func TestFilesPullConcurrencyAndOrder(t *testing.T) {
	h := newHarness(t)
	h.stub.SetTransferDelay(200 * time.Millisecond)
	names := []string{"f5", "f2", "f7", "f0", "f3", "f6", "f1", "f4"}
	var want strings.Builder
	for _, n := range names {
		h.stub.SetFile(n, []byte("content of "+n))
		want.WriteString(h.path(".dify_conf/files/"+n) + "\n")
	}
	h.run("", append([]string{"config", "files", "pull"}, names...)...).want(t, 0, want.String(), "")
	for _, n := range names {
		if got := string(h.read(".dify_conf/files/" + n)); got != "content of "+n {
			t.Errorf("%s = %q", n, got)
		}
	}
	if m := h.stub.MaxConcurrentTransfers(); m > 4 || m < 2 {
		t.Fatalf("max concurrent transfers = %d, want 2..4", m)
	}
}

func TestPullReportsEveryFailureInInputOrder(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"a", "b", "c"} {
		h.stub.SetFile(n, []byte(n))
	}
	h.stub.Fail("download file/c", fakestub.ModeServerError)
	h.run("", "config", "files", "pull", "a", "missing1", "b", "missing2", "c").want(t, 1,
		h.path(".dify_conf/files/a")+"\n"+h.path(".dify_conf/files/b")+"\n",
		`dify-agent: pull file missing1: not_found: no file named "missing1"`+"\n"+
			`dify-agent: pull file missing2: not_found: no file named "missing2"`+"\n"+
			`dify-agent: pull file c: internal_error: the fake stub was told to fail`+"\n")
}

func TestPullJSON(t *testing.T) {
	h := newHarness(t)
	h.stub.SetFile("a", []byte("a"))
	h.run("", "config", "files", "pull", "--json", "a", "zz").want(t, 1,
		`{"items":[{"name":"a","path":`+jsonString(t, h.path(".dify_conf/files/a"))+`},`+
			`{"name":"zz","error":{"code":"not_found","message":"no file named \"zz\""}}]}`+"\n",
		`dify-agent: pull file zz: not_found: no file named "zz"`+"\n")
	// Nothing to pull is an empty list, not null.
	h2 := newHarness(t)
	h2.run("", "config", "skills", "pull", "--json").want(t, 0, `{"items":[]}`+"\n", "")
}

func TestFilesPush(t *testing.T) {
	h := newHarness(t)
	h.write("docs/a.txt", []byte("hello\r\n"))
	h.write("b.bin", []byte{0, 1, 2, 0xff})
	h.run("", "config", "files", "push", "docs/a.txt", "b.bin").want(t, 0, "pushed file a.txt\npushed file b.bin\n", "")
	if got, _ := h.stub.File("a.txt"); string(got) != "hello\r\n" {
		t.Fatalf("a.txt = %q", got)
	}
	if got, _ := h.stub.File("b.bin"); !bytes.Equal(got, []byte{0, 1, 2, 0xff}) {
		t.Fatalf("b.bin = %q", got)
	}
	if ids := h.stub.UploadIDs(); len(ids) != 2 {
		t.Fatalf("uploads = %q", ids)
	} else if fn, mt, _ := h.stub.UploadedFile(ids[0]); fn != "a.txt" && fn != "b.bin" || mt == "" {
		t.Fatalf("upload %s: %q %q", ids[0], fn, mt)
	}
	var ups []fakestub.Request
	for _, r := range h.requests("/agent-stub/files/upload-request") {
		ups = append(ups, r)
	}
	if len(ups) != 2 {
		t.Fatalf("%d upload requests", len(ups))
	}
	pushes := h.requests("/agent-stub/config/push")
	if len(pushes) != 1 {
		t.Fatalf("%d config pushes, want 1", len(pushes))
	}
	var body map[string][]map[string]any
	if err := json.Unmarshal(pushes[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["skills"]; ok || len(body["files"]) != 2 || body["files"][0]["name"] != "a.txt" ||
		body["files"][1]["name"] != "b.bin" {
		t.Fatalf("push body = %s", pushes[0].Body)
	}
	ref := body["files"][0]["file_ref"].(map[string]any)
	if ref["kind"] != "tool_file" || ref["id"] == "" {
		t.Fatalf("file_ref = %v", ref)
	}
}

func TestSkillsPushRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.write("src/myskill/SKILL.md", []byte("# my skill\n"))
	h.write("src/myskill/lib/helper.py", []byte("print('hi')\n"))
	h.write("src/noskill/README.md", []byte("not a skill"))
	h.run("", "config", "skills", "push", "src/myskill", "src/noskill", "src/missing").want(t, 1,
		"pushed skill myskill\n",
		"dify-agent: push skill noskill: invalid_skill: src/noskill has no SKILL.md\n"+
			"dify-agent: push skill missing: file_not_found: stat src/missing: no such file or directory\n")
	ids := h.stub.UploadIDs()
	if len(ids) != 1 {
		t.Fatalf("uploads = %q", ids)
	}
	if fn, mt, ok := h.stub.UploadedFile(ids[0]); !ok || fn != "myskill.zip" || mt != "application/zip" {
		t.Fatalf("upload = %q %q %v", fn, mt, ok)
	}
	// Pull it back: the same files.
	h.run("", "config", "skills", "pull", "myskill").want(t, 0, h.path(".dify_conf/skills/myskill")+"\n", "")
	if got := string(h.read(".dify_conf/skills/myskill/lib/helper.py")); got != "print('hi')\n" {
		t.Fatalf("helper.py = %q", got)
	}
}

func TestPushConcurrency(t *testing.T) {
	h := newHarness(t)
	h.stub.SetTransferDelay(200 * time.Millisecond)
	var args []string
	var want strings.Builder
	for i := range 8 {
		n := fmt.Sprintf("f%d.txt", i)
		h.write(n, []byte(n))
		args = append(args, n)
		want.WriteString("pushed file " + n + "\n")
	}
	h.run("", append([]string{"config", "files", "push"}, args...)...).want(t, 0, want.String(), "")
	if m := h.stub.MaxConcurrentTransfers(); m > 4 || m < 2 {
		t.Fatalf("max concurrent transfers = %d, want 2..4", m)
	}
}

func TestPushReadOnly(t *testing.T) {
	h := newHarness(t)
	h.stub.SetReadOnly(true)
	h.write("a.txt", []byte("a"))
	h.write("b.txt", []byte("b"))
	const ro = "config_read_only: the configuration is read-only: only your own build draft can be changed, not a snapshot or a shared draft\n"
	h.run("", "config", "files", "push", "a.txt", "b.txt").want(t, 1, "",
		"dify-agent: push file a.txt: "+ro+"dify-agent: push file b.txt: "+ro)
	if len(h.requests("/agent-stub/config/push")) != 1 {
		t.Fatal("want exactly one config push")
	}
}

func TestDelete(t *testing.T) {
	h := newHarness(t)
	h.stub.SetFile("a", []byte("a"))
	h.stub.SetFile("b", []byte("b"))
	h.run("", "config", "files", "delete", "a", "../x").want(t, 1, "deleted file a\n",
		`dify-agent: delete file ../x: invalid_name: "../x" is not a valid name (one path element)`+"\n")
	if _, ok := h.stub.File("a"); ok {
		t.Fatal("a not deleted")
	}
	if _, ok := h.stub.File("b"); !ok {
		t.Fatal("b deleted")
	}
	pushes := h.requests("/agent-stub/config/push")
	if len(pushes) != 1 || string(pushes[0].Body) != `{"files":[{"name":"a","file_ref":null}]}` {
		t.Fatalf("pushes = %+v", pushes)
	}
	h.run("", "config", "skills", "delete", "--json", "s").want(t, 0, `{"items":[{"name":"s"}]}`+"\n", "")
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
