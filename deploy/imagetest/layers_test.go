//go:build imagetest

package imagetest

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ociImage is what these tests read of the image make image wrote: its
// manifest's layers and its config.
type ociImage struct {
	layers []ociDesc
	config struct {
		Config struct {
			Healthcheck *struct {
				Test        []string
				Interval    time.Duration
				Timeout     time.Duration
				StartPeriod time.Duration
				Retries     int
			}
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
		History []struct {
			Comment string `json:"comment"`
		} `json:"history"`
	}
}

type ociDesc struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func blobPath(dig string) string {
	alg, hex, _ := strings.Cut(dig, ":")
	return filepath.Join(*imageDir, "oci", "blobs", alg, hex)
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// readOCI reads the layout's one image.
func readOCI(t *testing.T) *ociImage {
	t.Helper()
	if _, err := os.Stat(filepath.Join(*imageDir, "oci", "index.json")); err != nil {
		t.Skipf("no image at %s (run make image): %v", *imageDir, err)
	}
	var idx struct{ Manifests []ociDesc }
	readJSON(t, filepath.Join(*imageDir, "oci", "index.json"), &idx)
	if len(idx.Manifests) != 1 {
		t.Fatalf("the layout's index has %d manifests, want 1", len(idx.Manifests))
	}
	var m struct {
		Config ociDesc
		Layers []ociDesc
	}
	readJSON(t, blobPath(idx.Manifests[0].Digest), &m)
	img := &ociImage{layers: m.Layers}
	readJSON(t, blobPath(m.Config.Digest), &img.config)
	return img
}

// buildInfo reads make image's OUT/build-info (key=value lines).
func buildInfo(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(*imageDir, "build-info"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out
}

// layerFiles lists a gzip-compressed tar layer's entries.
func layerFiles(t *testing.T, d ociDesc) []string {
	t.Helper()
	f, err := os.Open(blobPath(d.Digest))
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
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// The image has two layers: the Debian base (the digest build-info
// records, which make image-repro shows stays the same for a next
// release) and a small application layer with shellctl's files only.
func TestImageLayers(t *testing.T) {
	img := readOCI(t)
	info := buildInfo(t)
	if len(img.layers) != 2 || len(img.config.RootFS.DiffIDs) != 2 || len(img.config.History) != 2 {
		t.Fatalf("%d layers, %d diff_ids, %d history entries; want 2 (base, application)", len(img.layers), len(img.config.RootFS.DiffIDs), len(img.config.History))
	}
	base, app := img.layers[0], img.layers[1]
	if base.Digest != info["base_layer_digest"] || app.Digest != info["app_layer_digest"] {
		t.Errorf("layers %s, %s; build-info says %s, %s", base.Digest, app.Digest, info["base_layer_digest"], info["app_layer_digest"])
	}
	t.Logf("base layer %s: %.1f MB; application layer %s: %.1f MB", base.Digest, float64(base.Size)/1e6, app.Digest, float64(app.Size)/1e6)
	// Small: the static binaries, compressed (about 20 MB today); a
	// release ships that, not the base.
	if app.Size > 40<<20 || app.Size*3 > base.Size {
		t.Errorf("the application layer is %d bytes (base %d): want under 40 MiB and under a third of the base", app.Size, base.Size)
	}
	allowed := []string{"etc/", "etc/passwd", "etc/group", "etc/shadow", "etc/gshadow", "home/", "home/dify/", "usr/", "usr/local/", "usr/local/bin/",
		"var/", "var/lib/", "var/lib/shellctl/", "workspace/"}
	var bins []string
	for _, n := range layerFiles(t, app) {
		if strings.HasPrefix(n, "usr/local/bin/") && n != "usr/local/bin/" {
			bins = append(bins, strings.TrimPrefix(n, "usr/local/bin/"))
			continue
		}
		if !slices.Contains(allowed, n) {
			t.Errorf("the application layer holds %s: it should hold shellctl's files only", n)
		}
	}
	if want := []string{"dify-agent", "shellctl", "shellctl-runner", "shellctl-runner-exit", "shellctl-sanitize-pty", "shellctl-screen", "shellctl-stage"}; !slices.Equal(bins, want) {
		t.Errorf("binaries in the application layer %q, want %q", bins, want)
	}
	baseFiles := layerFiles(t, base)
	for _, n := range []string{"usr/bin/bash", "usr/bin/python3", "etc/hostname"} {
		if !slices.Contains(baseFiles, n) {
			t.Errorf("the base layer has no %s", n)
		}
	}
	if slices.Contains(baseFiles, "usr/local/bin/shellctl") {
		t.Error("shellctl is in the base layer: a release would re-ship it")
	}
}

// The config carries a HEALTHCHECK (Docker's Healthcheck) that runs
// shellctl itself (no curl, no shell): TestImageUnderRunc runs it.
func healthcheck(t *testing.T) []string {
	t.Helper()
	h := readOCI(t).config.Config.Healthcheck
	if h == nil || len(h.Test) < 2 || h.Test[0] != "CMD" {
		t.Fatalf("the image config's Healthcheck is %+v, want an exec-form (CMD) test", h)
	}
	if h.Interval <= 0 || h.Timeout <= 0 || h.Retries <= 0 {
		t.Errorf("Healthcheck timings %+v: interval, timeout and retries must be set", h)
	}
	return h.Test[1:]
}

// runcExec runs args in the running container as its process does (the
// same user, capabilities and no_new_privs: runc exec starts from the
// container's process spec) and returns the exit code and output.
func (b *bundle) runcExec(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command("runc", append([]string{"exec", b.id}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("runc exec %q: %v\n%s", args, err, out)
	return -1, ""
}
