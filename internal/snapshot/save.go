// Package snapshot saves and restores the server's Home directory as one
// tar+zstd stream (see docs/snapshot.md and the shared spec snapshot.md).
//
// Save walks Home by descriptors (internal/treewalk, the walker the files
// archive uses too): each directory opened beneath its parent's descriptor
// without following a link, so a symlink swapped in during the walk can
// never make it read outside Home. Restore
// opens every path beneath Home one component at a time from the handle of
// the directory above, never following a symlink, so it writes nothing
// outside Home and cannot reach one directory of Home under another name;
// it recognises the server's state dir by device and inode and writes
// nothing there. Both stream with fixed buffers: memory does not grow with
// the size of Home (see the bounds below).
//
// The two calls are Save(ctx, w, home, SaveOptions) and Restore(ctx, r,
// home, RestoreOptions); the HTTP routes (Service) and every other user of
// snapshots (such as a command that moves an archive between Home and
// storage) go through them, so they share one format and one set of
// refusals.
package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

	"github.com/shellctl/shellctl/internal/streamsum"
	"github.com/shellctl/shellctl/internal/treewalk"
)

const (
	// EncoderLevel is the zstd level of saved archives. SpeedFastest
	// (about zstd level 1) keeps a save faster than `tar | zstd -1 -T1` on
	// a 2-core machine; the higher levels cost 2-4x the CPU for 10-20 %
	// smaller archives (figures in docs/snapshot.md).
	EncoderLevel = zstd.SpeedFastest

	// EncoderWindow is the zstd window of saved archives (256 KiB): far
	// under MaxWindow, so our own restore always accepts them. It also sets
	// the encoder's memory: with concurrent blocks the encoder cuts the
	// stream into sections of 4 windows (1 MiB) and holds up to 5 of them
	// and their compressed output in flight, plus one history per
	// goroutine. 2 MiB, the earlier choice, meant 8 MiB sections and a
	// 100-170 MiB heap peak; 256 KiB keeps a save under MemoryBound and
	// cost 0.5 % of archive size on the bench Home (0.4 % larger than with
	// a 2 MiB window, still 4 % smaller than `zstd -1`, whose window is
	// 512 KiB). It was no slower.
	EncoderWindow = 256 << 10

	// encoderConcurrency: two goroutines compress sections of the stream
	// at once (zstd.WithConcurrentBlocks), one per core. Compression is
	// most of a save's CPU and the Go compressor needs about 1.2x the CPU
	// of the C one per byte of text; with one compressing goroutine a save
	// cannot keep up with `tar | zstd -1 -T1`, where tar reads in parallel.
	// The compressed sections are written, counted and hashed (SHA-256) by
	// the encoder's own flushing goroutine, off the walker's path.
	encoderConcurrency = 2

	// MaxWindow is the largest zstd window Restore accepts (64 MiB): the
	// decoder's memory is bounded by it, whatever the archive claims.
	MaxWindow = 64 << 20

	// copyBufferSize is the one buffer file contents go through.
	copyBufferSize = 256 << 10

	// maxHardLinkBytes bounds the table of hard-linked files already
	// archived (one entry per inode whose link count is > 1 and whose
	// names have not all been met yet, linkEntryCost plus its name's
	// length each: about 20 000 entries). An entry leaves the table once
	// the walk has met as many names as the inode has links. Past the
	// bound, further hard-linked files are archived as separate copies:
	// the archive stays correct, only the link is lost.
	maxHardLinkBytes = 2 << 20

	// linkEntryCost is what an entry of the hard-link table costs beyond
	// its name: key, value and the map's own share.
	linkEntryCost = 64

	// MemoryBound is the most Go heap (live objects and garbage not yet
	// collected) one save or one restore takes above what the process
	// held before, whatever Home holds; TestMemoryBounded checks it. A
	// save holds about 12 MiB: the encoder's sections in flight (see
	// EncoderWindow), three histories (one per compressing goroutine and
	// one for the stream), the 256 KiB copy buffer, the directory batches
	// of the walk and the hard-link table (at most maxHardLinkBytes,
	// only for a Home of tens of thousands of hard-linked files).
	// The collector lets the heap grow to twice what is live before it
	// runs (GOGC=100), hence a peak of about 24 MiB; measured 23-29 MiB.
	// A restore of our archives peaks at 3-6 MiB (measured 3.5 MiB): the
	// decoder's window (256 KiB) and block, the restoreBatches batches
	// of contents handed from the reading to the writing stage (1 MiB)
	// and the prefetcher's chunks of the body (512 KiB). A foreign
	// archive needs its window more: 18 MiB with an 8 MiB window (zstd
	// -19 and every lower level), up to MaxWindow plus that for the
	// largest windows the spec admits. This holds for the options of
	// /v1/snapshot/save and /v1/snapshot/restore; SaveOptions.Lexical and
	// RestoreOptions.NoDuplicates add memory that grows with the largest
	// directory and with the number of entries.
	MemoryBound = 32 << 20

	// MaxDepth is how many levels below Home a snapshot keeps: an entry
	// whose name has more components is left out of a save (counted, and
	// the first named, in SaveStats) and refused by a restore. The walk
	// holds the descriptors of the chain of directories it is in (one per
	// level: the open directory being read, whose read position cannot be
	// given up and found again), so without a bound a job that makes a
	// 12 000-deep chain of directories (mkdir a; cd a in a loop) made
	// every save fail with "too many open files", and could starve the
	// server of descriptors while it tried. 256 levels is 2-3 times the
	// deepest trees of real Homes (nested node_modules, Java packages,
	// caches: 20-100) and keeps a save and a restore under about 260
	// descriptors each, inside the common limit of 1024 even where the
	// runtime cannot raise it. Deeper paths are
	// also past what path-based tools handle (a 256-level path of 16-byte
	// names already exceeds PATH_MAX, 4096 bytes).
	MaxDepth = 256

	// maxNameInMessage bounds a path quoted in an error or a log line
	// (shortName): a path can be a MaxDepth-level chain of 255-byte
	// names, 64 KiB.
	maxNameInMessage = 200
)

// encoderOptions: WithLowerEncoderMem makes the histories
// window+block (384 KiB) instead of at least 1 MiB each; it measured no
// slower on the bench Home.
var encoderOptions = []zstd.EOption{
	zstd.WithEncoderLevel(EncoderLevel),
	zstd.WithWindowSize(EncoderWindow),
	zstd.WithEncoderConcurrency(encoderConcurrency),
	zstd.WithConcurrentBlocks(true),
	zstd.WithLowerEncoderMem(true),
}

// ErrHomeUnavailable marks a Home that is missing or not a directory.
var ErrHomeUnavailable = errors.New("home unavailable")

// SaveStats describes a saved archive.
type SaveStats struct {
	Entries   int64  // tar entries written (Save only; 0 on the client side)
	FileBytes int64  // bytes of file contents archived, before compression (Save only)
	Bytes     int64  // bytes of the compressed archive
	SHA256    string // hex SHA-256 of those bytes

	// TooDeep counts the entries left out for lying more than MaxDepth
	// levels below Home (Save only): the entries of the directories at
	// the bound, not what lies below them, which is not walked.
	// FirstTooDeep is the first of them, shortened for a log line
	// (shortName); "" when none.
	TooDeep      int64
	FirstTooDeep string
}

// testHookFileReader, when set (tests only), wraps the reader of each file
// being archived, to simulate a file that fails mid-read.
var testHookFileReader func(name string, r io.Reader) io.Reader

// OriginalStateDir is the default state dir of the original server,
// relative to Home. Save always leaves it out, wherever this server's state
// dir is (as the original does), and no pattern re-includes it.
const OriginalStateDir = ".local/share/shellctl"

// SaveOptions are the choices of a save; the zero value archives all of
// Home but OriginalStateDir.
type SaveOptions struct {
	// Excludes are gitignore patterns (see compileExcludes).
	Excludes []string
	// StateDir is the server's state dir: when it lies inside Home it is
	// always left out, whatever the patterns say. It is recognised by its
	// inode, so any spelling of its path works.
	StateDir string

	// The fields below make the archive the one of the original's
	// `dify-agent home-snapshot upload` (agent-cli-backend.md); the zero
	// values are the format of /v1/snapshot/save (docs/snapshot.md).

	// Lexical archives the entries of each directory sorted by name
	// (byte order, as filepath.WalkDir visits them) instead of in the
	// directory's own order. Each directory is then read whole before
	// its first entry is archived, so memory grows with the largest
	// directory of Home (measured 98 bytes per entry with 16-byte names).
	Lexical bool
	// BareDirNames writes directory names without the trailing "/".
	BareDirNames bool
	// NoHardLinks stores every name of a hard-linked file as a regular
	// file of its own, as if the links were separate files.
	NoHardLinks bool
	// RelativeLinks rewrites a symlink whose target is absolute and,
	// once cleaned, is Home itself or lies inside it as a target relative
	// to the link's own directory, so the link still works in a Home
	// restored under another path. Home is the path given to Save,
	// cleaned (symlinks in it are not resolved). A target that leaves
	// Home (".." included) or lies in what the archive leaves out (the
	// exclude patterns, OriginalStateDir) is kept as it is, as is every
	// relative target.
	RelativeLinks bool
}

// Save writes a tar+zstd archive of home to w, streaming: files are read
// and compressed as w takes the bytes, with bounded memory. The returned
// stats count the bytes written to w and their SHA-256. On error, w may
// have received part of an archive: it must not be taken for a complete
// one.
func Save(ctx context.Context, w io.Writer, home string, opts SaveOptions) (SaveStats, error) {
	m, err := compileExcludes(opts.Excludes)
	if err != nil {
		return SaveStats{}, err
	}
	root, err := openHome(home)
	if err != nil {
		return SaveStats{}, err
	}
	defer root.Close()

	s := &saver{
		ctx:      ctx,
		excl:     m,
		buf:      make([]byte, copyBufferSize),
		links:    make(map[fileID]linkEntry),
		path:     make([]string, 0, 32),
		stateDir: stateIdentity(opts.StateDir),
		opts:     opts,
		root:     root,
		home:     filepath.Clean(home),
	}
	// Counted and hashed (for the trailers) by the encoder's flushing
	// goroutine, off the walk's path.
	s.out = streamsum.New(w)
	enc, err := zstd.NewWriter(s.out, encoderOptions...)
	if err != nil {
		return SaveStats{}, fmt.Errorf("start zstd encoder: %w", err)
	}
	s.tw = tar.NewWriter(enc)

	err = s.walk()
	if err == nil {
		err = s.tw.Close()
	}
	if err == nil {
		err = enc.Close()
	} else {
		// Stop the encoder's goroutines without writing the end of the
		// frame: the caller must see a cut archive, never a complete one.
		enc.Reset(io.Discard)
	}
	st := SaveStats{Entries: s.entries, FileBytes: s.fileBytes, Bytes: s.out.Len(), SHA256: s.out.Sum(),
		TooDeep: int64(s.warnings.Count(treewalk.KindTooDeep)), FirstTooDeep: s.warnings.First(treewalk.KindTooDeep)}
	if err != nil {
		return st, err
	}
	return st, nil
}

// openHome opens Home as an os.Root, or says why it is unavailable.
func openHome(home string) (*os.Root, error) {
	fi, err := os.Stat(home)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHomeUnavailable, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrHomeUnavailable, home)
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHomeUnavailable, err)
	}
	return root, nil
}

// stateIdentity returns the inode of the state dir, or nil when it does
// not exist (then there is nothing to leave out).
func stateIdentity(stateDir string) *fileID {
	if stateDir == "" {
		return nil
	}
	fi, err := os.Stat(stateDir)
	if err != nil {
		return nil
	}
	id, _, ok := identity(fi)
	if !ok {
		return nil
	}
	return &id
}

// linkEntry is the first archived name of a hard-linked inode and how
// many of its other names the walk has yet to meet.
type linkEntry struct {
	name string
	left uint64
}

type saver struct {
	ctx       context.Context
	excl      *matcher
	tw        *tar.Writer
	out       *streamsum.Writer
	buf       []byte
	links     map[fileID]linkEntry
	linkBytes int      // what links costs, counted as in maxHardLinkBytes
	path      []string // components of the directory being walked
	stateDir  *fileID
	opts      SaveOptions
	root      *os.Root // Home
	home      string   // Home's path, cleaned
	entries   int64
	fileBytes int64
	// warnings counts the entries left out past MaxDepth and keeps the
	// first one's name, shortened.
	warnings *treewalk.Warnings
}

// shortName is name cut to at most maxNameInMessage bytes for an error or
// a log line: its beginning and its end, which say where it is and what
// it is, around "…". The cuts fall between UTF-8 sequences. Messages
// quote it (%q), so control characters in it are escaped.
func shortName(name string) string {
	if len(name) <= maxNameInMessage {
		return name
	}
	const keep = (maxNameInMessage - len("…")) / 2
	head, tail := keep, len(name)-keep
	for head > 0 && !utf8.RuneStart(name[head]) {
		head--
	}
	for tail < len(name) && !utf8.RuneStart(name[tail]) {
		tail++
	}
	return name[:head] + "…" + name[tail:]
}

// relativeTarget is the target written for the symlink full (relative to
// Home) whose target is target, under RelativeLinks.
func (s *saver) relativeTarget(full, target string) string {
	if !filepath.IsAbs(target) {
		return target
	}
	clean := filepath.Clean(target)
	rel, err := filepath.Rel(s.home, clean)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return target // outside Home
	}
	if rel != "." && s.leftOut(filepath.ToSlash(rel)) {
		return target
	}
	linkDir := filepath.Join(s.home, filepath.Dir(filepath.FromSlash(full)))
	out, err := filepath.Rel(linkDir, clean)
	if err != nil {
		return target
	}
	return filepath.ToSlash(out)
}

// leftOut reports whether the path rel (relative to Home, slash-separated,
// clean) is one the archive leaves out: OriginalStateDir, or it or a
// directory above it matches the exclude patterns. Whether the path
// itself is a directory is asked of Home (a dangling target is taken for
// a file).
func (s *saver) leftOut(rel string) bool {
	if rel == OriginalStateDir || strings.HasPrefix(rel, OriginalStateDir+"/") {
		return true
	}
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		if s.excl.excluded(parts[:i], true) {
			return true
		}
	}
	isDir := false
	if fi, err := s.root.Stat(rel); err == nil {
		isDir = fi.IsDir()
	}
	return s.excl.excluded(parts, isDir)
}

// copyFile copies exactly size bytes of r into the archive. A file that
// grew since it was stat'ed is cut at its old size; a file that shrank
// cannot be archived faithfully and fails the save.
func (s *saver) copyFile(r io.Reader, full string, size int64) error {
	left := size
	for left > 0 {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		b := s.buf
		if int64(len(b)) > left {
			b = b[:left]
		}
		n, err := r.Read(b)
		if n > 0 {
			if _, werr := s.tw.Write(b[:n]); werr != nil {
				return fmt.Errorf("archive %q: %w", shortName(full), werr)
			}
			left -= int64(n)
			s.fileBytes += int64(n)
		}
		if err == io.EOF && left > 0 {
			return fmt.Errorf("read %q: file shrank by %d bytes while being saved", shortName(full), left)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read %q: %w", shortName(full), err)
		}
	}
	return nil
}

func (s *saver) header(hdr *tar.Header) error {
	// Ownership is not part of a snapshot: uid/gid 0 and no names, so the
	// archive is the same whoever runs the server.
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := s.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %q: %w", shortName(hdr.Name), err)
	}
	s.entries++
	return nil
}
