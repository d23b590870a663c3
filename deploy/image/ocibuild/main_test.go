package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	gzip "github.com/klauspost/compress/gzip"
)

// fakeRoot makes a small root filesystem: files with varied times and
// modes, a setuid program, a hard link, a symlink, a directory to empty
// and files to drop.
func fakeRoot(t *testing.T, stamp time.Time) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/passwd":              "root:x:0:0:root:/root:/bin/bash\n",
		"etc/passwd-":             "old\n",
		"usr/bin/su":              "setuid program\n",
		"usr/bin/tool":            "tool\n",
		"var/log/dpkg.log":        "a log with the build's time\n",
		"var/cache/apt/pkg.bin":   "cache\n",
		"var/lib/dpkg/status-old": "old\n",
		"zz/last":                 "last\n",
		"a/first":                 "first\n",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "usr/bin/su"), os.FileMode(0o755)|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tool", filepath.Join(root, "usr/bin/t")); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error {
		os.Chtimes(p, stamp, stamp)
		return nil
	})
	return root
}

func build(t *testing.T, root string) (string, string) {
	t.Helper()
	out := t.TempDir()
	o := options{root: root, epoch: 1700000000, ref: "shellctl:test",
		layoutDir: filepath.Join(out, "oci"), tarPath: filepath.Join(out, "img.tar"), layerPath: filepath.Join(out, "layer.tar.gz"),
		drop: list{"etc/*-", "var/lib/dpkg/*-old"}, empty: list{"var/log", "var/cache/apt"},
		user: "10001:10001", entrypoint: list{"/usr/local/bin/shellctl"}, ports: list{"5004/tcp"}}
	dig, err := run(o)
	if err != nil {
		t.Fatal(err)
	}
	return dig, o.layerPath
}

// Two roots with the same contents but other times, made at other moments,
// give the same digest.
func TestSameInputsSameDigest(t *testing.T) {
	a, _ := build(t, fakeRoot(t, time.Unix(1000, 0)))
	b, _ := build(t, fakeRoot(t, time.Now()))
	if a != b {
		t.Fatalf("same contents, other times: digests %s and %s", a, b)
	}
	// A changed byte changes it.
	root := fakeRoot(t, time.Unix(1000, 0))
	os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("toil\n"), 0o644)
	if c, _ := build(t, root); c == a {
		t.Fatal("a changed file left the digest as it was")
	}
}

func TestLayerEntries(t *testing.T) {
	_, layer := build(t, fakeRoot(t, time.Now()))
	f, err := os.Open(layer)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	got := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		got[h.Name] = h
		if !h.ModTime.Equal(time.Unix(1700000000, 0)) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: mtime %v atime %v ctime %v; want the epoch and no others", h.Name, h.ModTime, h.AccessTime, h.ChangeTime)
		}
		if h.Uname != "" || h.Gname != "" || len(h.PAXRecords) != 0 {
			t.Errorf("%s: names %q %q, PAX %v; want numeric owners only", h.Name, h.Uname, h.Gname, h.PAXRecords)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}
	for _, gone := range []string{"etc/passwd-", "var/log/dpkg.log", "var/cache/apt/pkg.bin", "var/lib/dpkg/status-old"} {
		if got[gone] != nil {
			t.Errorf("%s is in the layer, should be left out", gone)
		}
	}
	for _, kept := range []string{"var/log/", "var/cache/apt/", "etc/passwd"} {
		if got[kept] == nil {
			t.Errorf("%s is missing", kept)
		}
	}
	if h := got["usr/bin/su"]; h == nil || h.Mode&0o6000 != 0 || h.Mode&0o777 != 0o755 {
		t.Errorf("usr/bin/su: %+v; want 0755 without setuid", h)
	}
	if h := got["usr/bin/tool2"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/tool" {
		t.Errorf("usr/bin/tool2: %+v; want a hard link to usr/bin/tool", h)
	}
	if h := got["usr/bin/t"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "tool" {
		t.Errorf("usr/bin/t: %+v; want a symlink to tool", h)
	}
}

func TestBadFlags(t *testing.T) {
	for _, o := range []options{
		{epoch: 1, layoutDir: "x", layerPath: "l"},
		{root: "r", epoch: -1, layoutDir: "x", layerPath: "l"},
		{root: "r", epoch: 1, layerPath: "l"},
		{root: "r", epoch: 1, layoutDir: "x", layerPath: "l", drop: list{"[a"}},
	} {
		if _, err := run(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
