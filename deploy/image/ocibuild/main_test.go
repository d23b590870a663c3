package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
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

// fakeOverlay makes an application overlay: a binary and the directories
// above it (usr is 0755 here, 0750 in fakeRoot's tree after fixModes).
func fakeOverlay(t *testing.T, binary string) string {
	t.Helper()
	ov := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ov, "usr/local/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ov, "usr/local/bin/shellctl"), []byte(binary), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ov, "home/dify"), 0o750); err != nil {
		t.Fatal(err)
	}
	return ov
}

type built struct {
	digest, dir         string
	baseLayer, appLayer string
	info                map[string]string
}

func build(t *testing.T, root string) built {
	return buildWith(t, root, fakeOverlay(t, "binary v1\n"), 1700000000)
}

func buildWith(t *testing.T, root, overlay string, epoch int64) built {
	t.Helper()
	out := t.TempDir()
	o := options{root: root, overlay: overlay, epoch: epoch, baseEpoch: 946684800, ref: "shellctl:test",
		layoutDir: filepath.Join(out, "oci"), tarPath: filepath.Join(out, "img.tar"),
		baseLayerPath: filepath.Join(out, "base.tar.gz"), layerPath: filepath.Join(out, "app.tar.gz"), infoPath: filepath.Join(out, "info"),
		drop: list{"etc/*-", "var/lib/dpkg/*-old"}, empty: list{"var/log", "var/cache/apt"},
		user: "10001:10001", entrypoint: list{"/usr/local/bin/shellctl"}, ports: list{"5004/tcp"},
		health: list{"/usr/local/bin/shellctl", "healthcheck", "127.0.0.1:5004"}, healthInterval: 30 * time.Second,
		healthTimeout: 5 * time.Second, healthStart: 10 * time.Second, healthRetries: 3}
	dig, err := run(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(o.infoPath)
	if err != nil {
		t.Fatal(err)
	}
	info := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		info[k] = v
	}
	return built{digest: dig, dir: out, baseLayer: o.baseLayerPath, appLayer: o.layerPath, info: info}
}

// entries reads a gzip-compressed tar layer.
func entries(t *testing.T, layer string) ([]string, map[string]*tar.Header) {
	t.Helper()
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
	}
	return names, got
}

// Two roots with the same contents but other times, made at other moments,
// give the same digest.
func TestSameInputsSameDigest(t *testing.T) {
	a := build(t, fakeRoot(t, time.Unix(1000, 0)))
	b := build(t, fakeRoot(t, time.Now()))
	if a.digest != b.digest {
		t.Fatalf("same contents, other times: digests %s and %s", a.digest, b.digest)
	}
	// A changed byte changes it.
	root := fakeRoot(t, time.Unix(1000, 0))
	os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("toil\n"), 0o644)
	if c := build(t, root); c.digest == a.digest || c.info["base_layer_digest"] == a.info["base_layer_digest"] {
		t.Fatal("a changed file of the root left the digest or the base layer's as it was")
	}
}

// A release (other binaries, another SOURCE_DATE_EPOCH) on the same root
// re-ships only the application layer: the base layer is the same bytes.
func TestBaseLayerStaysAcrossReleases(t *testing.T) {
	v1 := buildWith(t, fakeRoot(t, time.Unix(1000, 0)), fakeOverlay(t, "binary v1\n"), 1700000000)
	v2 := buildWith(t, fakeRoot(t, time.Now()), fakeOverlay(t, "binary v2\n"), 1800000000)
	if v1.digest == v2.digest {
		t.Fatal("other binaries, same image digest")
	}
	if v1.info["base_layer_digest"] == "" || v1.info["base_layer_digest"] != v2.info["base_layer_digest"] {
		t.Errorf("base layer %q then %q: want the same digest for the same root", v1.info["base_layer_digest"], v2.info["base_layer_digest"])
	}
	if v1.info["app_layer_digest"] == v2.info["app_layer_digest"] {
		t.Errorf("application layer %s both times: the new binary is not in it", v1.info["app_layer_digest"])
	}
	a, _ := os.ReadFile(v1.baseLayer)
	b, _ := os.ReadFile(v2.baseLayer)
	if !bytes.Equal(a, b) {
		t.Error("the base layer files differ")
	}
	// The manifest lists both, base first, and the config's diff_ids.
	m, cfg := readImage(t, v2.dir)
	if len(m.Layers) != 2 || m.Layers[0].Digest.String() != v2.info["base_layer_digest"] || m.Layers[1].Digest.String() != v2.info["app_layer_digest"] {
		t.Fatalf("manifest layers %+v, want base %s then application %s", m.Layers, v2.info["base_layer_digest"], v2.info["app_layer_digest"])
	}
	if len(cfg.RootFS.DiffIDs) != 2 || len(cfg.History) != 2 {
		t.Errorf("config: %d diff_ids, %d history entries; want 2 and 2", len(cfg.RootFS.DiffIDs), len(cfg.History))
	}
}

// readImage reads the manifest and config of the layout's one image.
func readImage(t *testing.T, out string) (*v1.Manifest, *v1.ConfigFile) {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index: %+v %v", im, err)
	}
	img, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return m, cfg
}

// The config carries Docker's Healthcheck in exec form with its timings.
func TestHealthcheckInConfig(t *testing.T) {
	b := build(t, fakeRoot(t, time.Now()))
	_, cfg := readImage(t, b.dir)
	h := cfg.Config.Healthcheck
	if h == nil {
		t.Fatal("no Healthcheck in the image config")
	}
	if want := []string{"CMD", "/usr/local/bin/shellctl", "healthcheck", "127.0.0.1:5004"}; !slices.Equal(h.Test, want) {
		t.Errorf("Healthcheck.Test %q, want %q", h.Test, want)
	}
	if h.Interval != 30*time.Second || h.Timeout != 5*time.Second || h.StartPeriod != 10*time.Second || h.Retries != 3 {
		t.Errorf("Healthcheck timings %+v", h)
	}
	// In the JSON as Docker reads it: "Healthcheck" with "Test".
	raw, err := os.ReadFile(filepath.Join(b.dir, "img.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"Healthcheck":{"Test":["CMD","/usr/local/bin/shellctl","healthcheck","127.0.0.1:5004"]`)) {
		t.Error("the docker tarball's config has no Healthcheck as docker reads it")
	}
}

// The application layer holds the overlay's entries only; a directory
// the root has too keeps the root's mode.
func TestAppLayerEntries(t *testing.T) {
	root := fakeRoot(t, time.Now())
	if err := os.MkdirAll(filepath.Join(root, "usr/local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "usr"), 0o711); err != nil {
		t.Fatal(err)
	}
	b := buildWith(t, root, fakeOverlay(t, "binary\n"), 1700000000)
	names, got := entries(t, b.appLayer)
	want := []string{"home/", "home/dify/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/shellctl"}
	if !slices.Equal(names, want) {
		t.Errorf("application layer entries %q, want %q", names, want)
	}
	if h := got["usr/"]; h == nil || h.Mode&0o7777 != 0o711 {
		t.Errorf("usr/: %+v; want the root's mode 0711", h)
	}
	if h := got["home/dify/"]; h == nil || h.Mode&0o7777 != 0o750 {
		t.Errorf("home/dify/: %+v; want the overlay's mode 0750", h)
	}
	for _, n := range names {
		if !got[n].ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: mtime %v, want --epoch", n, got[n].ModTime)
		}
	}
	if _, base := entries(t, b.baseLayer); base["usr/local/bin/shellctl"] != nil {
		t.Error("the binary is in the base layer")
	}
}

func TestLayerEntries(t *testing.T) {
	names, got := entries(t, build(t, fakeRoot(t, time.Now())).baseLayer)
	for _, n := range names {
		h := got[n]
		if !h.ModTime.Equal(time.Unix(946684800, 0)) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: mtime %v atime %v ctime %v; want the base epoch and no others", h.Name, h.ModTime, h.AccessTime, h.ChangeTime)
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

// Each missing or wrong flag is an error that names it; the same options
// with it in place build.
func TestBadFlags(t *testing.T) {
	out := t.TempDir()
	ok := options{root: fakeRoot(t, time.Now()), overlay: fakeOverlay(t, "b\n"), epoch: 1, baseEpoch: 1,
		layoutDir: filepath.Join(out, "oci"), baseLayerPath: filepath.Join(out, "b"), layerPath: filepath.Join(out, "l")}
	if _, err := run(ok); err != nil {
		t.Fatalf("the good options: %v", err)
	}
	for _, c := range []struct {
		flag   string
		change func(o *options)
	}{
		{"--root", func(o *options) { o.root = "" }},
		{"--overlay", func(o *options) { o.overlay = "" }},
		{"--epoch", func(o *options) { o.epoch = -1 }},
		{"--base-epoch", func(o *options) { o.baseEpoch = -1 }},
		{"--layout", func(o *options) { o.layoutDir = "" }},
		{"--base-layer", func(o *options) { o.baseLayerPath = "" }},
		{"--layer", func(o *options) { o.layerPath = "" }},
		{"[a", func(o *options) { o.drop = list{"[a"} }},
	} {
		o := ok
		c.change(&o)
		if _, err := run(o); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("without a good %s: %v, want an error naming it", c.flag, err)
		}
	}
}
