package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

// ErrMalformed marks restore input that is not a valid, safe tar+zstd
// archive: the caller's fault, answered 400 archive_malformed. Every other
// restore error is environmental (disk, permission, I/O, deadline).
var ErrMalformed = errors.New("archive malformed")

// decoderConcurrency > 1 makes the zstd decoder work ahead in its own
// goroutine while the extractor writes files: the overlap of `zstd -d | tar -x`.
const decoderConcurrency = 2

// RestoreStats is the answer of a restore.
type RestoreStats struct {
	Entries      int64 `json:"entries"`       // archive entries applied
	BytesWritten int64 `json:"bytes_written"` // bytes of file contents written
}

// Restore extracts the tar+zstd archive read from r into home. Every path is
// resolved through an os.Root of home, so nothing outside it is ever
// written. Unsafe or invalid input (absolute names, "..", writes through
// symlinks that lead outside, hard links to outside, device nodes, FIFOs,
// sparse or unknown entries, input that is not zstd, a zstd window over
// MaxWindow) fails with an error wrapping ErrMalformed; other failures are
// environmental. Not transactional: on error, home may be partly restored.
func Restore(ctx context.Context, r io.Reader, home string) (RestoreStats, error) {
	return restore(ctx, r, home, "")
}

// restore is Restore that also leaves alone protectDir (the server's state
// dir) when it lies inside home: an archive must not overwrite the live
// database, nor hard-link its files into reach.
func restore(ctx context.Context, r io.Reader, home, protectDir string) (RestoreStats, error) {
	root, err := openHome(home)
	if err != nil {
		return RestoreStats{}, err
	}
	defer root.Close()

	src := &sourceReader{r: r}
	dec, err := zstd.NewReader(src,
		zstd.WithDecoderMaxWindow(MaxWindow),
		zstd.WithDecoderConcurrency(decoderConcurrency),
	)
	if err != nil {
		return RestoreStats{}, fmt.Errorf("start zstd decoder: %w", err)
	}
	defer dec.Close()

	x := &extractor{
		ctx:     ctx,
		root:    root,
		src:     src,
		buf:     make([]byte, copyBufferSize),
		protect: relativeInside(home, protectDir),
		umask:   processUmask(),
	}
	defer x.closeDirs()
	tr := tar.NewReader(dec)
	for {
		if err := ctx.Err(); err != nil {
			return x.stats, fmt.Errorf("restore: %w", err)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return x.stats, x.readErr("read archive", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.stats, err
		}
	}
	// Read the rest of the stream (the tar padding and the end of the zstd
	// frame) so its checksum is verified: a corrupt or truncated stream is
	// an error even when the tar end marker came through.
	if _, err := io.CopyBuffer(io.Discard, dec, x.buf); err != nil {
		return x.stats, x.readErr("read archive end", err)
	}
	if src.bytes() == 0 {
		return x.stats, fmt.Errorf("%w: empty body", ErrMalformed)
	}
	if err := x.leave(""); err != nil {
		return x.stats, err
	}
	return x.stats, nil
}

// relativeInside returns dir relative to home when it lies strictly inside
// it, else "".
func relativeInside(home, dir string) string {
	if dir == "" {
		return ""
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		if e, err := filepath.EvalSymlinks(p); err == nil {
			p = e
		}
		return p
	}
	rel, err := filepath.Rel(abs(home), abs(dir))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// sourceReader remembers the first error of the request body, so a decoder
// error can be told apart: caused by the transport (environmental) or by
// the bytes themselves (malformed). The zstd decoder reads from its own
// goroutine, hence the lock.
type sourceReader struct {
	r   io.Reader
	mu  sync.Mutex
	n   int64
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.mu.Lock()
	s.n += int64(n)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	return n, err
}

func (s *sourceReader) transportErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *sourceReader) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

type pendingDir struct {
	name  string
	perm  fs.FileMode
	mtime time.Time
	root  *os.Root // the directory itself, for one-step access to its children
}

type extractor struct {
	ctx     context.Context
	root    *os.Root
	src     *sourceReader
	buf     []byte
	protect string
	umask   fs.FileMode // bits the kernel takes from the mode of created files
	stats   RestoreStats
	// dirs is the chain of directories the archive is inside of, outermost
	// first. A directory's mode and time are applied when the archive
	// leaves it, so deepest first and after its children: a read-only
	// directory still receives them. Our archives (and tar's) list a
	// directory's subtree right after it, so this holds the current depth
	// only, not every directory of Home.
	dirs []pendingDir
}

// readErr classifies an error met while reading the archive.
func (x *extractor) readErr(what string, err error) error {
	if terr := x.src.transportErr(); terr != nil {
		return fmt.Errorf("%s: read request body: %w", what, terr)
	}
	if cerr := x.ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", what, cerr)
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
}

// fsErr classifies an error of an os.Root operation. Names were checked
// before (no absolute names, no ".."), so an error that is not an errno can
// only be os.Root refusing a path that escapes Home through a symlink: the
// archive's fault. ELOOP and ENOTDIR come from the archive's own symlinks
// and files standing where it then wants directories.
func fsErr(what string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) || errno == syscall.ELOOP || errno == syscall.ENOTDIR {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// cleanName checks an archive name and returns it relative to Home,
// without a trailing slash; "" means Home itself.
func cleanName(name string) (string, error) {
	if name == "" {
		return "", malformed("entry with an empty name")
	}
	if strings.HasPrefix(name, "/") {
		return "", malformed("entry %q: absolute name", name)
	}
	if strings.ContainsRune(name, 0) {
		return "", malformed("entry %q: NUL in name", name)
	}
	parts := strings.Split(name, "/")
	kept := parts[:0]
	for _, p := range parts {
		switch p {
		case "..":
			return "", malformed("entry %q: \"..\" in name", name)
		case "", ".":
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "/"), nil
}

func (x *extractor) protected(name string) bool {
	return x.protect != "" && (name == x.protect || strings.HasPrefix(name, x.protect+"/"))
}

func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func (x *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // metadata for the whole archive (git archive writes one)
	}
	if isSparse(hdr) {
		return malformed("entry %q: sparse files are not accepted", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		return malformed("entry %q: device node", hdr.Name)
	case tar.TypeFifo:
		return malformed("entry %q: FIFO", hdr.Name)
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	default:
		return malformed("entry %q: unsupported entry type %q", hdr.Name, string(hdr.Typeflag))
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil // "./": Home itself, which restore does not change
		}
		return malformed("entry %q: not a directory but names Home itself", hdr.Name)
	}
	if x.protected(name) {
		return nil
	}
	if hdr.Typeflag == tar.TypeLink {
		if target, err := cleanName(hdr.Linkname); err == nil && x.protected(target) {
			return nil // a name for the server's own files would escape its protection
		}
	}
	if err := x.leave(name); err != nil {
		return err
	}
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm // setuid, setgid, sticky dropped
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.mkdir(name, perm, hdr.ModTime)
	case tar.TypeReg, tar.TypeRegA:
		err = x.writeFile(name, perm, hdr.ModTime, hdr.Size, tr)
	case tar.TypeSymlink:
		err = x.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		err = x.link(name, hdr.Linkname)
	}
	if err != nil {
		return err
	}
	x.stats.Entries++
	return nil
}

// leave applies the mode and time of every pending directory that name is
// not inside of, deepest first ("" leaves them all).
func (x *extractor) leave(name string) error {
	for len(x.dirs) > 0 {
		top := x.dirs[len(x.dirs)-1]
		if name != "" && strings.HasPrefix(name, top.name+"/") {
			return nil
		}
		x.dirs = x.dirs[:len(x.dirs)-1]
		// Through the directory's own handle: no path is resolved again.
		// Should a later entry have replaced the directory (only possible
		// once it is empty), the handle names the removed one, and setting
		// its mode is harmless.
		err := top.root.Chmod(".", top.perm)
		if err == nil {
			err = top.root.Chtimes(".", top.mtime, top.mtime)
		}
		top.root.Close()
		if err != nil {
			return fsErr(fmt.Sprintf("set mode and time of %q", top.name), err)
		}
	}
	return nil
}

// mkParents creates the missing parents of name, for archives that do not
// list every directory.
func (x *extractor) mkParents(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(dir, 0o755); err != nil {
			return fsErr(fmt.Sprintf("create parents of %q", name), err)
		}
	}
	return nil
}

// replace removes what stands at name (a file, a symlink or an empty
// directory) so the entry can take its place. A symlink is removed, never
// followed.
func (x *extractor) replace(name string) error {
	fi, err := x.root.Lstat(name)
	if err != nil {
		return fsErr(fmt.Sprintf("stat %q", name), err)
	}
	if err := x.root.Remove(name); err != nil {
		if fi.IsDir() {
			return fmt.Errorf("replace directory %q: %w", name, err)
		}
		return fsErr(fmt.Sprintf("replace %q", name), err)
	}
	return nil
}

// create runs op, the creation of name; it makes room when something is in
// the way and creates missing parents, then tries once more.
func (x *extractor) create(name string, op func() error) error {
	err := op()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		if err := x.replace(name); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := x.mkParents(name); err != nil {
			return err
		}
	default:
		return fsErr(fmt.Sprintf("create %q", name), err)
	}
	if err := op(); err != nil {
		return fsErr(fmt.Sprintf("create %q", name), err)
	}
	return nil
}

// parent returns the handle through which name's last component is best
// reached, and that component. Opening "a/b/c/f" through the root of Home
// costs one openat per component; through the already open "a/b/c" it
// costs one, which keeps restore as fast as tar on trees of small files.
// The handle is an os.Root too, so the kernel-enforced confinement is the
// same (stricter, even: confined to that directory).
func (x *extractor) parent(name string) (*os.Root, string) {
	if n := len(x.dirs); n > 0 {
		if top := x.dirs[n-1]; len(name) > len(top.name) && name[len(top.name)] == '/' &&
			!strings.Contains(name[len(top.name)+1:], "/") {
			return top.root, name[len(top.name)+1:]
		}
	}
	return x.root, name
}

// closeDirs releases the handles of pending directories (on error; on
// success leave("") has done it).
func (x *extractor) closeDirs() {
	for _, d := range x.dirs {
		d.root.Close()
	}
	x.dirs = nil
}

func (x *extractor) mkdir(name string, perm fs.FileMode, mtime time.Time) error {
	// Through the parent's handle when it is open: one mkdirat instead of
	// one openat per component of name.
	pr, base := x.parent(name)
	err := pr.Mkdir(base, 0o700)
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := pr.Lstat(base)
		switch {
		case lerr != nil:
			err = lerr
		case fi.IsDir():
			// Existing directory: kept, with its other contents. Make sure
			// we can write into it until its mode is applied.
			err = nil
			if fi.Mode().Perm()&0o700 != 0o700 {
				err = pr.Chmod(base, fi.Mode().Perm()|0o700)
			}
		default:
			if err = x.replace(name); err != nil {
				return err
			}
			err = pr.Mkdir(base, 0o700)
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		if err = x.mkParents(name); err != nil {
			return err
		}
		err = pr.Mkdir(base, 0o700)
	}
	if err != nil {
		return fsErr(fmt.Sprintf("create directory %q", name), err)
	}
	dr, err := pr.OpenRoot(base)
	if err != nil {
		return fsErr(fmt.Sprintf("open directory %q", name), err)
	}
	x.dirs = append(x.dirs, pendingDir{name: name, perm: perm, mtime: mtime, root: dr})
	return nil
}

func (x *extractor) writeFile(name string, perm fs.FileMode, mtime time.Time, size int64, tr *tar.Reader) error {
	var f *os.File
	pr, base := x.parent(name)
	err := x.create(name, func() error {
		var err error
		// O_EXCL: an existing file is removed and recreated, never written
		// through (it may be a symlink, or a hard link to a file elsewhere).
		// Created with its final permission bits: writing through this
		// descriptor is allowed whatever they are, and no fchmod is needed
		// unless the umask took some away.
		f, err = pr.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		return err
	})
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		if err := x.ctx.Err(); err != nil {
			return fmt.Errorf("write %q: %w", name, err)
		}
		n, rerr := tr.Read(x.buf)
		if n > 0 {
			if _, err := f.Write(x.buf[:n]); err != nil {
				return fmt.Errorf("write %q: %w", name, err)
			}
			x.stats.BytesWritten += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return x.readErr(fmt.Sprintf("read contents of %q", name), rerr)
		}
	}
	if perm&x.umask != 0 {
		if err := f.Chmod(perm); err != nil {
			return fmt.Errorf("set mode of %q: %w", name, err)
		}
	}
	if err := setFileTimes(f, mtime); err != nil {
		return fmt.Errorf("set time of %q: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %q: %w", name, err)
	}
	return nil
}

func (x *extractor) symlink(name, target string) error {
	if target == "" {
		return malformed("symlink %q with an empty target", name)
	}
	if strings.ContainsRune(target, 0) {
		return malformed("symlink %q: NUL in target", name)
	}
	// The target is stored as is: a link may point anywhere, os.Root
	// refuses to write through it when it leads outside Home.
	pr, base := x.parent(name)
	return x.create(name, func() error { return pr.Symlink(target, base) })
}

func (x *extractor) link(name, linkname string) error {
	target, err := cleanName(linkname)
	if err != nil {
		return malformed("hard link %q: target %q is outside Home", name, linkname)
	}
	if target == "" {
		return malformed("hard link %q to Home itself", name)
	}
	if target == name {
		return nil
	}
	fi, err := x.root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return malformed("hard link %q: target %q not found", name, linkname)
	}
	if err != nil {
		return fsErr(fmt.Sprintf("hard link %q to %q", name, linkname), err)
	}
	if fi.IsDir() {
		return malformed("hard link %q: target %q is a directory", name, linkname)
	}
	return x.create(name, func() error { return x.root.Link(target, name) })
}
