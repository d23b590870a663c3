package skillzip

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/shellctl/shellctl/internal/agentstub"
)

func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"SKILL.md": "# s\r\n", "lib/a.py": "a", "lib/deep/b.txt": "b"}
	for rel, body := range files {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "lib/a.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	z, err := Pack(src)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if err := Unpack(bytes.NewReader(z), int64(len(z)), dest); err != nil {
		t.Fatal(err)
	}
	for rel, body := range files {
		if got, err := os.ReadFile(filepath.Join(dest, rel)); err != nil || string(got) != body {
			t.Errorf("%s = %q, %v", rel, got, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dest, "lib/a.py")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("a.py mode = %v, %v", st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(dest, "empty")); err != nil || !st.IsDir() {
		t.Errorf("empty dir lost: %v", err)
	}
}

func TestPackRefuses(t *testing.T) {
	noSkill := t.TempDir()
	if _, err := Pack(noSkill); agentstub.CodeOf(err) != CodeInvalidSkill {
		t.Fatalf("no SKILL.md: %v", err)
	}
	withLink := t.TempDir()
	if err := os.WriteFile(filepath.Join(withLink, SkillFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(withLink, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(withLink); agentstub.CodeOf(err) != CodeInvalidSkill {
		t.Fatalf("symlink: %v", err)
	}
}

func zipOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		if _, err := zw.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUnpackRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../evil", "/abs/evil", "a/../../evil", "a/../b", `..\evil`, `a\b`, ""} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dest := filepath.Join(root, "skill")
			z := zipOf(t, "SKILL.md", name)
			err := Unpack(bytes.NewReader(z), int64(len(z)), dest)
			if c := agentstub.CodeOf(err); c != CodeUnsafeArchive {
				t.Fatalf("Unpack with %q: %v", name, err)
			}
			entries, _ := os.ReadDir(root)
			if len(entries) != 0 {
				t.Fatalf("something was written: %v", entries)
			}
		})
	}
}

func TestUnpackStripsOneTopDirectory(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string // a file that must exist
	}{
		{[]string{"s/", "s/SKILL.md", "s/x"}, "SKILL.md"},
		{[]string{"s/SKILL.md", "t/x"}, "s/SKILL.md"},    // two tops: kept
		{[]string{"SKILL.md", "s/SKILL.md"}, "SKILL.md"}, // already on top
		{[]string{"s/x"}, "s/x"},                         // no SKILL.md: kept
	} {
		dest := filepath.Join(t.TempDir(), "d")
		z := zipOf(t, c.names...)
		if err := Unpack(bytes.NewReader(z), int64(len(z)), dest); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dest, c.want)); err != nil {
			t.Errorf("%v: %v", c.names, err)
		}
	}
}

func TestUnpackRefusesLinksAndGarbage(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	hdr := &zip.FileHeader{Name: "link"}
	hdr.SetMode(fs.ModeSymlink | 0o777)
	w, _ := zw.CreateHeader(hdr)
	w.Write([]byte("/etc/passwd"))
	zw.Close()
	dest := filepath.Join(t.TempDir(), "d")
	if err := Unpack(bytes.NewReader(buf.Bytes()), int64(buf.Len()), dest); agentstub.CodeOf(err) != CodeUnsafeArchive {
		t.Fatalf("symlink: %v", err)
	}
	if err := Unpack(bytes.NewReader([]byte("nope")), 4, dest); agentstub.CodeOf(err) != CodeBadArchive {
		t.Fatalf("garbage: %v", err)
	}
}
