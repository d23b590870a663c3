package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

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

// RestoreOptions are the choices of a restore; the zero value suits a
// restore into a Home that holds no state of a server.
type RestoreOptions struct {
	// StateDir is the server's state directory. When it lies inside Home
	// (under any name: it is recognised by device and inode), nothing is
	// written into it, linked into it or linked to it: entries of the
	// archive there are skipped.
	StateDir string
}

// Restore extracts the tar+zstd archive read from r into home.
//
// Every path is opened one component at a time from a handle of home,
// never following a symlink: a symlink entry is created as a link and
// never traversed, and an entry whose path goes through a symlink (the
// archive's own or one already in Home, wherever it points) is refused.
// So nothing outside home is ever written, and no directory of home can be
// reached under another name. Unsafe or invalid input (absolute names,
// "..", paths through symlinks, hard links to outside or to a directory,
// device nodes, FIFOs, sparse or unknown entries, input that is not zstd, a
// zstd window over MaxWindow) fails with an error wrapping ErrMalformed;
// other failures are environmental. Existing files are replaced (removed
// and created again, never written through); other files are kept. Not
// transactional: on error, home may be partly restored.
func Restore(ctx context.Context, r io.Reader, home string, opts RestoreOptions) (RestoreStats, error) {
	src := &sourceReader{r: r}
	x, err := newExtractor(ctx, src, home, opts.StateDir)
	if err != nil {
		return RestoreStats{}, err
	}
	defer x.close()

	dec, err := zstd.NewReader(src,
		zstd.WithDecoderMaxWindow(MaxWindow),
		zstd.WithDecoderConcurrency(decoderConcurrency),
	)
	if err != nil {
		return RestoreStats{}, fmt.Errorf("start zstd decoder: %w", err)
	}
	defer dec.Close()

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
			return x.stats, readErr(ctx, src, "read archive", err)
		}
		name, skip, err := checkEntry(hdr)
		if err != nil {
			return x.stats, err
		}
		if skip {
			continue
		}
		err = x.entry(hdr, name, tr)
		if errors.Is(err, errStateDir) {
			continue // the server's own state: left alone
		}
		if err != nil {
			return x.stats, err
		}
		x.stats.Entries++
	}
	// Read the rest of the stream (the tar padding and the end of the zstd
	// frame) so its checksum is verified: a corrupt or truncated stream is
	// an error even when the tar end marker came through.
	if _, err := io.CopyBuffer(io.Discard, dec, x.buf); err != nil {
		return x.stats, readErr(ctx, src, "read archive end", err)
	}
	if src.bytes() == 0 {
		return x.stats, fmt.Errorf("%w: empty body", ErrMalformed)
	}
	if err := x.finish(); err != nil {
		return x.stats, err
	}
	return x.stats, nil
}

// errStateDir says an entry lies in the server's state dir (or is a hard
// link to a file there): it is skipped, not an error.
var errStateDir = errors.New("inside the server's state dir")

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

// readErr classifies an error met while reading the archive.
func readErr(ctx context.Context, src *sourceReader, what string, err error) error {
	if terr := src.transportErr(); terr != nil {
		return fmt.Errorf("%s: read request body: %w", what, terr)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", what, cerr)
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
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

// checkEntry refuses the entry types restore does not accept and returns
// the entry's name relative to Home; skip is true for entries that change
// nothing (a global header, Home's own directory entry).
func checkEntry(hdr *tar.Header) (name string, skip bool, err error) {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return "", true, nil // metadata for the whole archive (git archive writes one)
	}
	if isSparse(hdr) {
		return "", false, malformed("entry %q: sparse files are not accepted", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		return "", false, malformed("entry %q: device node", hdr.Name)
	case tar.TypeFifo:
		return "", false, malformed("entry %q: FIFO", hdr.Name)
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	default:
		return "", false, malformed("entry %q: unsupported entry type %q", hdr.Name, string(hdr.Typeflag))
	}
	name, err = cleanName(hdr.Name)
	if err != nil {
		return "", false, err
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return "", true, nil // "./": Home itself, which restore does not change
		}
		return "", false, malformed("entry %q: not a directory but names Home itself", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return "", false, malformed("symlink %q with an empty target", hdr.Name)
		}
		if strings.ContainsRune(hdr.Linkname, 0) {
			return "", false, malformed("symlink %q: NUL in target", hdr.Name)
		}
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil {
			return "", false, malformed("hard link %q: target %q is outside Home", hdr.Name, hdr.Linkname)
		}
		if target == "" {
			return "", false, malformed("hard link %q to Home itself", hdr.Name)
		}
	}
	return name, false, nil
}

// entryPerm is the permission bits of an entry: setuid, setgid and sticky
// are dropped.
func entryPerm(hdr *tar.Header) uint32 {
	return uint32(fs.FileMode(hdr.Mode) & fs.ModePerm)
}

// splitName splits a cleaned name into its directory ("" for Home) and its
// last component.
func splitName(name string) (dir, base string) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// within reports whether name lies strictly inside dir ("" is Home, which
// holds every name).
func within(name, dir string) bool {
	return dir == "" || (len(name) > len(dir) && name[len(dir)] == '/' && name[:len(dir)] == dir)
}
