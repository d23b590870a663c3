// Command ocibuild writes shellctl's container image without a daemon, as
// an OCI image layout and as a tarball `docker load` takes. Two layers:
//
//   - the base: a root filesystem (--root, Debian's from debootstrap) with
//     a few files of its own put in or replaced (--base-overlay), every
//     mtime --base-epoch. Nothing of a release is in it, so builds from the
//     same packages give the same base layer, byte for byte, and a
//     registry or a node that has it fetches only the layer above;
//   - the application: the files of --overlay (binaries, users, the
//     directories the server uses), every mtime --epoch
//     (SOURCE_DATE_EPOCH). A directory the root has too keeps the root's
//     owner and mode.
//
// Both are reproducible: entries in sorted order, numeric owners only, no
// access or change times, no extended attributes, setuid and setgid bits
// removed, and the same gzip settings every time; the image config's times
// are --epoch. The same inputs give the same manifest digest, which it
// prints.
package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	gzip "github.com/klauspost/compress/gzip"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

type options struct {
	root, baseOverlay, overlay string
	baseEpoch, epoch           int64
	ref                        string
	layoutDir, tarPath         string
	baseLayerPath, layerPath   string
	infoPath                   string
	drop, empty                list
	user, workdir              string
	env, entrypoint, cmd       list
	ports, labels              list
	health                     list
	healthInterval             time.Duration
	healthTimeout              time.Duration
	healthStart                time.Duration
	healthRetries              int
	keepSetuid                 bool
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", "", "root filesystem of the base layer (read only)")
	flag.StringVar(&o.baseOverlay, "base-overlay", "", "directory whose entries replace or add to the root's in the base layer")
	flag.StringVar(&o.overlay, "overlay", "", "directory whose entries make the application layer, above the base")
	flag.Int64Var(&o.baseEpoch, "base-epoch", -1, "every mtime of the base layer and its history's time (a fixed date: no release's)")
	flag.Int64Var(&o.epoch, "epoch", -1, "SOURCE_DATE_EPOCH: every mtime of the application layer and the image's creation time")
	flag.StringVar(&o.ref, "ref", "shellctl:latest", "image name the docker tarball and the layout's ref.name carry")
	flag.StringVar(&o.layoutDir, "layout", "", "write an OCI image layout here (made fresh)")
	flag.StringVar(&o.tarPath, "tarball", "", "write a tarball docker load takes here")
	flag.StringVar(&o.baseLayerPath, "base-layer", "", "the compressed base layer is written here (kept)")
	flag.StringVar(&o.layerPath, "layer", "", "the compressed application layer is written here (kept)")
	flag.StringVar(&o.infoPath, "info", "", "write each layer's digest and size here (key=value lines)")
	flag.Var(&o.drop, "drop", "path of the root (relative, glob) left out with everything under it; repeated")
	flag.Var(&o.empty, "empty", "directory of the root kept, its contents left out; repeated")
	flag.StringVar(&o.user, "user", "", "config User (uid:gid)")
	flag.StringVar(&o.workdir, "workdir", "", "config WorkingDir")
	flag.Var(&o.env, "env", "config Env entry; repeated")
	flag.Var(&o.entrypoint, "entrypoint", "config Entrypoint element; repeated")
	flag.Var(&o.cmd, "cmd", "config Cmd element; repeated")
	flag.Var(&o.ports, "port", "exposed port such as 5004/tcp; repeated")
	flag.Var(&o.labels, "label", "config label key=value; repeated")
	flag.Var(&o.health, "healthcheck", "config Healthcheck command (exec form, CMD), one element a flag; repeated")
	flag.DurationVar(&o.healthInterval, "health-interval", 30*time.Second, "Healthcheck interval")
	flag.DurationVar(&o.healthTimeout, "health-timeout", 5*time.Second, "Healthcheck timeout")
	flag.DurationVar(&o.healthStart, "health-start-period", 10*time.Second, "Healthcheck start period")
	flag.IntVar(&o.healthRetries, "health-retries", 3, "Healthcheck retries before unhealthy")
	flag.BoolVar(&o.keepSetuid, "keep-setuid", false, "keep setuid and setgid bits")
	flag.Parse()
	dig, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ocibuild:", err)
		os.Exit(1)
	}
	fmt.Println(dig)
}

// run writes what o asks for and returns the image's manifest digest.
func run(o options) (string, error) {
	switch {
	case o.root == "":
		return "", errors.New("--root is required: the root filesystem to make the layer from")
	case o.epoch < 0:
		return "", errors.New("--epoch is required: SOURCE_DATE_EPOCH, e.g. git log -1 --format=%ct")
	case o.baseEpoch < 0:
		return "", errors.New("--base-epoch is required: the base layer's fixed time, the same for every release")
	case o.layoutDir == "" && o.tarPath == "":
		return "", errors.New("give --layout, --tarball or both: nothing would be written")
	case o.layerPath == "" || o.baseLayerPath == "":
		return "", errors.New("--base-layer and --layer are required: where the compressed layers are written")
	case o.overlay == "":
		return "", errors.New("--overlay is required: the application layer's files")
	}
	for _, p := range append(append(list{}, o.drop...), o.empty...) {
		if _, err := path.Match(p, ""); err != nil {
			return "", fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	epoch := time.Unix(o.epoch, 0).UTC()
	baseEpoch := time.Unix(o.baseEpoch, 0).UTC()
	base, err := collect(o)
	if err != nil {
		return "", err
	}
	app, err := collectApp(o)
	if err != nil {
		return "", err
	}
	if err := writeLayer(o.baseLayerPath, base, baseEpoch, o.keepSetuid); err != nil {
		return "", err
	}
	if err := writeLayer(o.layerPath, app, epoch, o.keepSetuid); err != nil {
		return "", err
	}
	img, err := image(o, baseEpoch, epoch)
	if err != nil {
		return "", err
	}
	if o.infoPath != "" {
		if err := writeInfo(o.infoPath, img); err != nil {
			return "", err
		}
	}
	dig, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image digest: %w", err)
	}
	if o.layoutDir != "" {
		if err := os.RemoveAll(o.layoutDir); err != nil {
			return "", fmt.Errorf("clear %s: %w", o.layoutDir, err)
		}
		p, err := layout.Write(o.layoutDir, empty.Index)
		if err != nil {
			return "", fmt.Errorf("write OCI layout %s: %w", o.layoutDir, err)
		}
		tag := o.ref
		if i := strings.LastIndexByte(tag, ':'); i >= 0 {
			tag = tag[i+1:]
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
			return "", fmt.Errorf("write image to OCI layout %s: %w", o.layoutDir, err)
		}
	}
	if o.tarPath != "" {
		ref, err := name.NewTag(o.ref)
		if err != nil {
			return "", fmt.Errorf("--ref %q: %w", o.ref, err)
		}
		if err := tarball.WriteToFile(o.tarPath, ref, img); err != nil {
			return "", fmt.Errorf("write docker tarball %s: %w", o.tarPath, err)
		}
	}
	return dig.String(), nil
}

// entry is one path of the layer and where its content comes from.
type entry struct {
	rel string // relative, no leading slash; "" is never an entry
	src string // absolute path on disk
}

// collect lists the base layer's paths: the root's (less the dropped and
// emptied ones) and the base overlay's, the overlay's winning, sorted.
func collect(o options) ([]entry, error) {
	byRel := map[string]string{}
	walk := func(base string, filter bool) error {
		return filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("walk %s: %w", p, err)
			}
			rel, err := filepath.Rel(base, p)
			if err != nil {
				return err
			}
			if rel == "." {
				return nil
			}
			rel = filepath.ToSlash(rel)
			if filter {
				if matchAny(o.drop, rel) {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
				if d.Type()&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket) != 0 {
					return nil // a runtime makes /dev; sockets are no content
				}
			}
			if _, ok := byRel[rel]; ok && !filter && d.IsDir() {
				return nil // a directory of both: the root's owner and mode
			}
			byRel[rel] = p
			if filter && d.IsDir() && matchAny(o.empty, rel) {
				return filepath.SkipDir
			}
			return nil
		})
	}
	if err := walk(o.root, true); err != nil {
		return nil, err
	}
	if o.baseOverlay != "" {
		if err := walk(o.baseOverlay, false); err != nil {
			return nil, err
		}
	}
	return sorted(byRel), nil
}

// collectApp lists the application layer's paths: every entry of the
// overlay, sorted. A directory the base has too (usr, etc, var/lib, …) is
// written with the base's owner and mode, so the layer above changes
// nothing of it but its time.
func collectApp(o options) ([]entry, error) {
	byRel := map[string]string{}
	err := filepath.WalkDir(o.overlay, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		rel, err := filepath.Rel(o.overlay, p)
		if err != nil || rel == "." {
			return err
		}
		byRel[filepath.ToSlash(rel)] = p
		if d.IsDir() {
			for _, base := range []string{o.baseOverlay, o.root} {
				if base == "" {
					continue
				}
				if fi, err := os.Lstat(filepath.Join(base, rel)); err == nil && fi.IsDir() {
					byRel[filepath.ToSlash(rel)] = filepath.Join(base, rel)
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sorted(byRel), nil
}

func sorted(byRel map[string]string) []entry {
	out := make([]entry, 0, len(byRel))
	for rel, src := range byRel {
		out = append(out, entry{rel: rel, src: src})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out
}

func matchAny(pats []string, rel string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// writeLayer writes the entries as a gzip-compressed tar to layerPath,
// every mtime epoch.
func writeLayer(layerPath string, entries []entry, epoch time.Time, keepSetuid bool) error {
	f, err := os.Create(layerPath)
	if err != nil {
		return fmt.Errorf("create layer %s: %w", layerPath, err)
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	for _, e := range entries {
		fi, err := os.Lstat(e.src)
		if err != nil {
			return fmt.Errorf("stat %s: %w", e.src, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("stat %s: no owner information", e.src)
		}
		mode := int64(fi.Mode().Perm())
		if fi.Mode()&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		if keepSetuid {
			if fi.Mode()&fs.ModeSetuid != 0 {
				mode |= 0o4000
			}
			if fi.Mode()&fs.ModeSetgid != 0 {
				mode |= 0o2000
			}
		}
		h := &tar.Header{Name: e.rel, Mode: mode, Uid: int(st.Uid), Gid: int(st.Gid), ModTime: epoch}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, e.rel+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(e.src)
			if err != nil {
				return fmt.Errorf("read link %s: %w", e.src, err)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, t
		case fi.Mode().IsRegular():
			id := inode{uint64(st.Dev), st.Ino}
			if first, ok := seen[id]; ok && st.Nlink > 1 {
				h.Typeflag, h.Linkname = tar.TypeLink, first
			} else {
				h.Typeflag, h.Size = tar.TypeReg, fi.Size()
				if st.Nlink > 1 {
					seen[id] = e.rel
				}
			}
		case fi.Mode()&fs.ModeNamedPipe != 0:
			h.Typeflag = tar.TypeFifo
		default:
			return fmt.Errorf("%s: file type %v has no place in the image", e.src, fi.Mode().Type())
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar header of %s: %w", e.rel, err)
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyFile(tw, e.src, h.Size); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	if _, err := io.CopyN(w, f, size); err != nil {
		return fmt.Errorf("copy %s: %w", p, err)
	}
	return nil
}

// image is the two-layer image with its config.
func image(o options, baseEpoch, epoch time.Time) (v1.Image, error) {
	baseLayer, err := tarball.LayerFromFile(o.baseLayerPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", o.baseLayerPath, err)
	}
	appLayer, err := tarball.LayerFromFile(o.layerPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", o.layerPath, err)
	}
	cfg := v1.Config{
		User:       o.user,
		Env:        o.env,
		Entrypoint: o.entrypoint,
		Cmd:        o.cmd,
		WorkingDir: o.workdir,
	}
	// Healthcheck is Docker's field of the config (the OCI image spec has
	// none; Docker honours it, Kubernetes uses its own probes). Exec form:
	// the image needs no shell for it.
	if len(o.health) > 0 {
		cfg.Healthcheck = &v1.HealthConfig{
			Test:        append([]string{"CMD"}, o.health...),
			Interval:    o.healthInterval,
			Timeout:     o.healthTimeout,
			StartPeriod: o.healthStart,
			Retries:     o.healthRetries,
		}
	}
	if len(o.ports) > 0 {
		cfg.ExposedPorts = map[string]struct{}{}
		for _, p := range o.ports {
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	if len(o.labels) > 0 {
		cfg.Labels = map[string]string{}
		for _, l := range o.labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return nil, fmt.Errorf("--label %q is not key=value", l)
			}
			cfg.Labels[k] = v
		}
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     baseLayer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: baseEpoch},
			CreatedBy: "make image (deploy/image/build.sh): debootstrap --variant=minbase",
			Comment:   "the base: Debian minbase and the packages of deploy/image/packages.txt",
		},
	}, mutate.Addendum{
		Layer:     appLayer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: "make image (deploy/image/build.sh)",
			Comment:   "shellctl's static binaries, user dify, its directories",
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: epoch})
}

// writeInfo writes the layers' digests and compressed sizes, base first,
// for the build's record and the reproducibility check.
func writeInfo(p string, img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var b strings.Builder
	for i, l := range layers {
		name := [...]string{"base_layer", "app_layer"}[i]
		d, err := l.Digest()
		if err != nil {
			return err
		}
		n, err := l.Size()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s_digest=%s\n%s_bytes=%d\n", name, d, name, n)
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}
