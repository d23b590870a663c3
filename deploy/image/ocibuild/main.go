// Command ocibuild writes shellctl's container image without a daemon: one
// layer made from a root filesystem and an overlay of files that replace or
// add to it, as an OCI image layout and as a tarball `docker load` takes.
//
// The layer is reproducible: entries in sorted order, numeric owners only,
// every mtime set to --epoch (SOURCE_DATE_EPOCH), no access or change
// times, no extended attributes, setuid and setgid bits removed, and the
// same gzip settings every time; the image config's times are --epoch too.
// The same inputs give the same manifest digest, which it prints.
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
	root, overlay           string
	epoch                   int64
	ref                     string
	layoutDir, tarPath      string
	layerPath               string
	drop, empty             list
	user, workdir           string
	env, entrypoint, cmd    list
	ports, labels           list
	keepSetuid, verboseList bool
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", "", "root filesystem to take (read only)")
	flag.StringVar(&o.overlay, "overlay", "", "directory whose entries replace or add to the root's")
	flag.Int64Var(&o.epoch, "epoch", -1, "SOURCE_DATE_EPOCH: every mtime and the image's creation time")
	flag.StringVar(&o.ref, "ref", "shellctl:latest", "image name the docker tarball and the layout's ref.name carry")
	flag.StringVar(&o.layoutDir, "layout", "", "write an OCI image layout here (made fresh)")
	flag.StringVar(&o.tarPath, "tarball", "", "write a tarball docker load takes here")
	flag.StringVar(&o.layerPath, "layer", "", "the compressed layer is written here (kept)")
	flag.Var(&o.drop, "drop", "path of the root (relative, glob) left out with everything under it; repeated")
	flag.Var(&o.empty, "empty", "directory of the root kept, its contents left out; repeated")
	flag.StringVar(&o.user, "user", "", "config User (uid:gid)")
	flag.StringVar(&o.workdir, "workdir", "", "config WorkingDir")
	flag.Var(&o.env, "env", "config Env entry; repeated")
	flag.Var(&o.entrypoint, "entrypoint", "config Entrypoint element; repeated")
	flag.Var(&o.cmd, "cmd", "config Cmd element; repeated")
	flag.Var(&o.ports, "port", "exposed port such as 5004/tcp; repeated")
	flag.Var(&o.labels, "label", "config label key=value; repeated")
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
	case o.layoutDir == "" && o.tarPath == "":
		return "", errors.New("give --layout, --tarball or both: nothing would be written")
	case o.layerPath == "":
		return "", errors.New("--layer is required: where the compressed layer is written")
	}
	for _, p := range append(append(list{}, o.drop...), o.empty...) {
		if _, err := path.Match(p, ""); err != nil {
			return "", fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	epoch := time.Unix(o.epoch, 0).UTC()
	entries, err := collect(o)
	if err != nil {
		return "", err
	}
	if err := writeLayer(o, entries, epoch); err != nil {
		return "", err
	}
	img, err := image(o, epoch)
	if err != nil {
		return "", err
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

// collect lists the root's paths (less the dropped and emptied ones) and
// the overlay's, the overlay's winning, sorted by path.
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
	if o.overlay != "" {
		if err := walk(o.overlay, false); err != nil {
			return nil, err
		}
	}
	out := make([]entry, 0, len(byRel))
	for rel, src := range byRel {
		out = append(out, entry{rel: rel, src: src})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

func matchAny(pats []string, rel string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// writeLayer writes the entries as a gzip-compressed tar to o.layerPath.
func writeLayer(o options, entries []entry, epoch time.Time) error {
	f, err := os.Create(o.layerPath)
	if err != nil {
		return fmt.Errorf("create layer %s: %w", o.layerPath, err)
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
		if o.keepSetuid {
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

// image is the one-layer image with its config.
func image(o options, epoch time.Time) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(o.layerPath, tarball.WithMediaType(types.OCILayer))
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
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: "make image (deploy/image/build.sh)",
			Comment:   "Debian minbase, the listed packages, shellctl's static binaries",
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: epoch})
}
