package snapshot

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// ErrMalformed marks restore input that is not a valid, safe tar+zstd
// archive: the caller's fault, answered 400 archive_malformed. Every other
// restore error is environmental (disk, permission, I/O, deadline).
var ErrMalformed = errors.New("archive malformed")

// decoderConcurrency 1 decodes in the goroutine that reads the archive:
// the writer stage (pipeline.go) is what overlaps with decoding. The
// decoder's own goroutines (2) measured 10-40 % more CPU for no shorter
// restore.
const decoderConcurrency = 1

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

	// The fields below add the refusals of the original's `dify-agent
	// home-snapshot download` (agent-cli-backend.md); /v1/snapshot/restore
	// uses none of them. Each refusal wraps ErrMalformed.

	// CleanNames refuses a name that is not already clean: it must be
	// relative, with no backslash, no empty, "." or ".." component and no
	// trailing "/" but on a directory ("a//b", "./a", "./" and "a/" for
	// a file are refused).
	CleanNames bool
	// NoHardLinks refuses every hard link entry, wherever it points.
	NoHardLinks bool
	// NoDuplicates refuses an entry whose name (cleaned) an earlier entry
	// of the archive already had. The names met are remembered as 16-byte
	// digests, so memory grows with the number of entries (measured 23
	// bytes each at 200 000 entries, up to twice that while the table
	// grows).
	NoDuplicates bool
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
// device nodes, FIFOs, sparse or unknown entries, entries more than
// MaxDepth levels below Home, input that is not zstd, a zstd window over
// MaxWindow) fails with an error wrapping ErrMalformed; other failures are
// environmental. Existing files are replaced (removed and created again,
// never written through); other files are kept. Files, directories and
// symlinks get the archive's mtimes, and a file's blocks of zeros become
// holes (see holeBlock). Not transactional: on error, home may be partly
// restored.
//
// r is read ahead in a goroutine of its own. A failure before the end of
// r (a refusal, a failed write, ctx) is returned at once, without waiting
// for a read of r under way (a peer that stalls may send its next bytes
// only at its connection's deadline): that read's bytes are dropped and
// the goroutine doing it ends as soon as it returns. So r may still be in
// one Read call when Restore has returned, and is not read after that
// call; a caller that must know when it has returned (an HTTP handler,
// which must not read its body once it has returned) wraps r.
func Restore(ctx context.Context, r io.Reader, home string, opts RestoreOptions) (RestoreStats, error) {
	src := &sourceReader{r: r}
	x, err := newExtractor(ctx, home, opts.StateDir)
	if err != nil {
		return RestoreStats{}, err
	}
	defer x.close()

	pre := newPrefetcher(src)
	defer pre.stop() // at r's end already, unless Restore failed early
	// An end of ctx (the server stopping, the request gone) frees a
	// restore waiting on a body that stalls, as a failure does.
	defer context.AfterFunc(ctx, pre.stop)()
	dec, err := zstd.NewReader(pre,
		zstd.WithDecoderMaxWindow(MaxWindow),
		zstd.WithDecoderConcurrency(decoderConcurrency),
	)
	if err != nil {
		return RestoreStats{}, fmt.Errorf("start zstd decoder: %w", err)
	}
	defer dec.Close()

	p := newPipeline(func(b *batch) error {
		err := x.apply(b)
		if err != nil {
			// The reading stage may be waiting for the body of a peer
			// that stalls: free it now, so the failure is answered.
			pre.stop()
		}
		return err
	})
	perr := parse(ctx, src, dec, p, opts)
	if werr := p.close(); werr != nil {
		return x.stats, werr // the first error in archive order
	}
	if perr != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(perr, errPrefetchStopped) {
			return x.stats, fmt.Errorf("restore stopped: %w", cerr)
		}
		return x.stats, perr
	}
	if src.bytes() == 0 {
		return x.stats, fmt.Errorf("%w: empty body", ErrMalformed)
	}
	if err := x.finish(); err != nil {
		return x.stats, err
	}
	return x.stats, nil
}

// parse reads the archive from dec, checks each entry and hands it to the
// writer stage. It returns errWriterStopped when the writer has stopped.
func parse(ctx context.Context, src *sourceReader, dec io.Reader, p *pipeline, opts RestoreOptions) error {
	tr := tar.NewReader(dec)
	var seen nameSet
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return readErr(ctx, src, "read archive", err)
		}
		if opts.CleanNames {
			if err := checkCleanName(hdr); err != nil {
				return err
			}
		}
		if opts.NoHardLinks && hdr.Typeflag == tar.TypeLink {
			return malformed("entry %q: hard link entries are not accepted", hdr.Name)
		}
		name, skip, err := checkEntry(hdr)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		if opts.NoDuplicates {
			if err := seen.add(hdr.Name, name); err != nil {
				return err
			}
		}
		pc := pieceOf(hdr, name)
		if pc.kind != tar.TypeReg {
			if err := p.add(pc); err != nil {
				return err
			}
			continue
		}
		rerr, err := p.addFile(pc, tr)
		if err != nil {
			return err
		}
		if rerr != nil {
			return readErr(ctx, src, fmt.Sprintf("read contents of %q", name), rerr)
		}
	}
	// The entries are all handed over; the writer works on them while the
	// rest of the stream (the tar padding and the end of the zstd frame) is
	// read, so its checksum is verified: a corrupt or truncated stream is
	// an error even when the tar end marker came through.
	if err := p.flush(); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(io.Discard, dec, make([]byte, 32<<10)); err != nil {
		return readErr(ctx, src, "read archive end", err)
	}
	return nil
}

// errStateDir says an entry lies in the server's state dir (or is a hard
// link to a file there): it is skipped, not an error.
var errStateDir = errors.New("inside the server's state dir")

// sourceReader remembers the first error of the request body, so a decoder
// error can be told apart: caused by the transport (environmental) or by
// the bytes themselves (malformed). The lock is there because two
// goroutines use it: the body's prefetcher reads src while the reading
// stage asks for its count and first error.
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

// malformed makes an error of the archive's fault. Its string arguments
// are names from the archive, which can be a megabyte long: each is
// shortened (shortName) so the answer and the log line stay short.
func malformed(format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = shortName(s)
		}
	}
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

// checkCleanName refuses a name that is not already clean (CleanNames).
func checkCleanName(hdr *tar.Header) error {
	name := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, '\\') ||
		path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return malformed("entry %q: not a clean relative name (no backslash, no empty, \".\" or \"..\" component)", hdr.Name)
	}
	return nil
}

// nameSet remembers the names of the entries met (NoDuplicates), as
// digests: a collision of 128-bit SHA-256 prefixes cannot be found, and
// would only refuse an archive, never write anything.
type nameSet map[[16]byte]struct{}

func (s *nameSet) add(raw, name string) error {
	if *s == nil {
		*s = make(nameSet)
	}
	sum := sha256.Sum256([]byte(name))
	var k [16]byte
	copy(k[:], sum[:])
	if _, dup := (*s)[k]; dup {
		return malformed("entry %q: duplicate entry: an earlier entry has the same name", raw)
	}
	(*s)[k] = struct{}{}
	return nil
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
	if depth := strings.Count(name, "/") + 1; depth > MaxDepth {
		// Our saves keep MaxDepth levels; deeper, the restore would hold
		// a directory handle per level (see MaxDepth).
		return "", false, malformed("entry %q: %d levels below Home, deeper than the %d a snapshot keeps; "+
			"move the tree up, or archive it separately", hdr.Name, depth, MaxDepth)
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
