package files

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
	"golang.org/x/text/unicode/norm"

	"github.com/shellctl/shellctl/internal/streamsum"
	"github.com/shellctl/shellctl/internal/treewalk"
)

// Archive bounds (query parameters of the same names) and their defaults.
const (
	defaultMaxFiles          = 10_000
	defaultMaxArchFileBytes  = 100 << 20
	defaultMaxArchBytes      = 1 << 30
	defaultMaxEntriesVisited = 100_000
	// maxArchives stream at once: each holds a spool of up to
	// spoolInMemory bytes and a descriptor per level.
	maxArchives = 8
	// maxArchiveDepth bounds nesting: each level holds a descriptor. An
	// entry more than this many levels below the archived directory is
	// left out with a too_deep warning, as a snapshot leaves it out.
	maxArchiveDepth = 256
	// maxWarnings are the warnings listed one by one; the rest are
	// counted by kind.
	maxWarnings = 100
	// spoolInMemory: files up to this size are read into memory before
	// they are written; larger ones into an unnamed temporary file, so a
	// file that changes under the read is left out, never half-written.
	spoolInMemory = 4 << 20
)

// Trailer names of an archive.
const (
	TrailerStatus   = "X-Archive-Status"
	TrailerFiles    = "X-Archive-Files"
	TrailerBytes    = "X-Archive-Bytes"
	TrailerSHA256   = "X-Archive-Sha256"
	TrailerWarnings = "X-Archive-Warnings"
)

// Warning is one entry of X-Archive-Warnings: what was left out or odd,
// the path (relative to the archived directory), and how many warnings of
// that kind there were in all.
type Warning = treewalk.Warning

type archiveLimits struct {
	maxFiles, maxFileBytes, maxBytes, maxVisited int64
}

type archiver struct {
	s       *Service
	tw      *tar.Writer
	lim     archiveLimits
	files   int64
	bytes   int64
	stopped bool // a bound ended the walk
	// warnings: the walker's (too_deep, max_entries_visited) and the
	// archive's own.
	warnings *treewalk.Warnings
	dirStat  unix.Stat_t // the lstat of the directory being entered
	buf      []byte
	tmp      *os.File // the spool for large files (unnamed, reused)
	mem      []byte   // the spool for the others (reused)
}

func (a *archiver) warn(kind, p string) { a.warnings.Add(kind, p) }

// newWarnings holds an archive's warnings: maxWarnings listed, the rest
// counted by kind.
func newWarnings() *treewalk.Warnings {
	return &treewalk.Warnings{Max: maxWarnings, Shorten: shortWarningPath}
}

// shortWarningPath cuts a path quoted in a warning to 512 bytes.
func shortWarningPath(p string) string {
	if len(p) > 512 {
		return p[:512] + "…"
	}
	return p
}

func (s *Service) archive(w http.ResponseWriter, r *http.Request) error {
	p0, err := pathParam(r)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "tar"
	}
	if format != "tar" && format != "tar.zst" {
		return errf(http.StatusBadRequest, "invalid_request", "format=%q is not tar or tar.zst", format)
	}
	var lim archiveLimits
	for _, b := range []struct {
		name string
		v    *int64
		def  int64
	}{{"max_files", &lim.maxFiles, defaultMaxFiles}, {"max_file_bytes", &lim.maxFileBytes, defaultMaxArchFileBytes}, {"max_bytes", &lim.maxBytes, defaultMaxArchBytes}, {"max_entries_visited", &lim.maxVisited, defaultMaxEntriesVisited}} {
		if *b.v, err = intParam(r, b.name, b.def, 0, 1<<50); err != nil {
			return err
		}
	}
	if !s.archives.TryAcquire(1) {
		return errf(http.StatusTooManyRequests, "too_many_archives", "%d archives are streaming, the most at once: try again when one has ended", maxArchives)
	}
	defer s.archives.Release(1)
	p, d, _, err := s.openFollowed(p0, true)
	if err != nil {
		return err
	}
	defer p.close()
	defer d.Close()

	h := w.Header()
	ctype := "application/x-tar"
	if format == "tar.zst" {
		ctype = "application/zstd"
	}
	h.Set("Content-Type", ctype)
	streamsum.Declare(h, TrailerStatus, TrailerFiles, TrailerBytes, TrailerSHA256, TrailerWarnings)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	// The stream as sent, counted and hashed for the trailers; hashing
	// on a goroutine of its own overlaps it with sending.
	sum := streamsum.NewAsync(w)
	defer sum.Close()
	// Tar writes each header on its own: buffered, the stream goes out
	// in large chunks.
	bw := bufio.NewWriterSize(sum, 256<<10)
	var out io.Writer = bw
	var enc *zstd.Encoder
	if format == "tar.zst" {
		if enc, err = zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1)); err != nil {
			panic(http.ErrAbortHandler)
		}
		out = enc
	}
	a := &archiver{s: s, tw: tar.NewWriter(out), lim: lim, buf: make([]byte, 256<<10),
		warnings: newWarnings()}
	defer func() {
		if a.tmp != nil {
			a.tmp.Close()
		}
	}()
	werr := a.walk(int(d.Fd()))
	if werr == nil {
		werr = a.tw.Close()
	}
	if werr == nil && enc != nil {
		werr = enc.Close()
	}
	if werr == nil {
		werr = bw.Flush()
	}
	if werr != nil {
		// The client sees a cut stream without the ok trailer: a failure.
		s.cfg.Logger.Warn("archive cut", "path", p0, "err", werr)
		panic(http.ErrAbortHandler)
	}
	status := "ok"
	if a.stopped || a.warnings.Count(treewalk.KindBudget) > 0 {
		status = "truncated"
	}
	wl, _ := json.Marshal(a.warnings.List())
	h.Set(TrailerStatus, status)
	h.Set(TrailerFiles, strconv.FormatInt(a.files, 10))
	h.Set(TrailerBytes, strconv.FormatInt(sum.Len(), 10))
	h.Set(TrailerSHA256, sum.Sum())
	h.Set(TrailerWarnings, string(wl))
	return nil
}

// walk archives the directory open at top: sorted, each subdirectory
// opened beneath its parent with O_NOFOLLOW|O_DIRECTORY (a link swapped
// in is never followed), within the traversal budget and maxArchiveDepth.
func (a *archiver) walk(top int) error {
	w := &treewalk.Walker{
		MaxDepth:   maxArchiveDepth,
		MaxVisited: a.lim.maxVisited,
		Sorted:     true,
		Warnings:   a.warnings,
		Listed:     a.listed,
		Visit:      a.entry,
		Enter:      a.enter,
		Failed: func(e *treewalk.Entry, _ string, _ error) error {
			a.warn("unreadable", e.Path)
			return nil
		},
	}
	return w.Walk(top)
}

// listed warns of the names of one directory that clash or confuse: two
// equal after NFC, control characters.
func (a *archiver) listed(rel string, names []string) {
	nfc := make(map[string]string, len(names)) // NFC form -> the name
	for _, n := range names {
		key := norm.NFC.String(n)
		if other, ok := nfc[key]; ok {
			a.warn("nfc_duplicate", path.Join(rel, other)+" | "+path.Join(rel, n))
		}
		nfc[key] = n
		if hasControl(n) {
			a.warn("control_character", strconv.Quote(path.Join(rel, n)))
		}
	}
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

func (a *archiver) header(hdr *tar.Header) error {
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	// Whole seconds, as tar keeps them: sub-second times would need a
	// PAX record for every entry.
	hdr.ModTime = hdr.ModTime.Truncate(time.Second)
	return a.tw.WriteHeader(hdr)
}

func (a *archiver) entry(e *treewalk.Entry) (enter bool, err error) {
	if a.stopped {
		return false, treewalk.SkipAll
	}
	var st unix.Stat_t
	if err := unix.Fstatat(e.Dir, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, nil // gone meanwhile
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if a.s.containsState(&st) {
			a.warn("state_dir", e.Path)
			return false, nil
		}
		a.dirStat = st
		return true, nil
	case unix.S_IFLNK:
		target, err := treewalk.ReadlinkAt(e.Dir, e.Name)
		if err != nil {
			return false, nil
		}
		return false, a.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: e.Path, Linkname: target, Mode: 0o777, ModTime: mtime(&st)})
	case unix.S_IFREG:
		return false, a.file(e.Dir, e.Path, e.Name, &st)
	default:
		a.warn("not_a_regular_file", e.Path)
		return false, nil
	}
}

// enter archives a directory the walk opened (st is its fstat), if it is
// still the one entry stat'ed.
func (a *archiver) enter(e *treewalk.Entry, _ int, st *unix.Stat_t) (bool, error) {
	if st.Ino != a.dirStat.Ino || st.Dev != a.dirStat.Dev {
		a.warn("changed", e.Path)
		return false, nil
	}
	err := a.header(&tar.Header{Typeflag: tar.TypeDir, Name: e.Path + "/", Mode: int64(a.dirStat.Mode & 0o7777), ModTime: mtime(&a.dirStat)})
	return err == nil, err
}

// file archives one regular file: opened without following links and
// non-blocking, checked to be the file stat'ed, read to at most its size
// into a spool, checked again; a file that changed is left out.
func (a *archiver) file(dir int, full, name string, st *unix.Stat_t) error {
	if a.files >= a.lim.maxFiles {
		a.warn("max_files", full)
		a.stopped = true
		return nil
	}
	if st.Size > a.lim.maxFileBytes {
		a.warn("max_file_bytes", full)
		return nil
	}
	if a.bytes+st.Size > a.lim.maxBytes {
		a.warn("max_bytes", full)
		a.stopped = true
		return nil
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		a.warn("unreadable", full)
		return nil
	}
	defer unix.Close(fd)
	var before unix.Stat_t
	if unix.Fstat(fd, &before) != nil || before.Mode&unix.S_IFMT != unix.S_IFREG || before.Ino != st.Ino || before.Dev != st.Dev {
		a.warn("changed", full)
		return nil
	}
	// O_NONBLOCK stays: a regular file's reads ignore it.
	size := before.Size
	var body io.Reader
	if size <= spoolInMemory {
		if int64(cap(a.mem)) < size+1 {
			a.mem = make([]byte, max(size+1, 64<<10))
		}
		b := a.mem[:size+1]
		n, err := readFull(fd, b)
		if err != nil {
			a.warn("unreadable", full)
			return nil
		}
		if int64(n) != size {
			a.warn("changed", full)
			return nil
		}
		body = bytes.NewReader(b[:n])
	} else {
		sp, err := a.spool()
		if err != nil {
			return err
		}
		var n int64
		for n <= size {
			m, rerr := readFull(fd, a.buf[:min(int64(len(a.buf)), size+1-n)])
			if m > 0 {
				if _, werr := sp.Write(a.buf[:m]); werr != nil {
					return werr
				}
				n += int64(m)
			}
			if err = rerr; err != nil || m == 0 {
				break
			}
		}
		if err != nil {
			a.warn("unreadable", full)
			return nil
		}
		if n != size {
			a.warn("changed", full)
			return nil
		}
		if _, err := sp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		body = io.LimitReader(sp, size)
	}
	var after unix.Stat_t
	if unix.Fstat(fd, &after) != nil || after.Size != before.Size || after.Mtim != before.Mtim || after.Ino != before.Ino {
		a.warn("changed", full)
		return nil
	}
	if err := a.header(&tar.Header{Typeflag: tar.TypeReg, Name: full, Size: size, Mode: int64(before.Mode & 0o7777), ModTime: mtime(&before)}); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(a.tw, body, a.buf); err != nil {
		return err
	}
	a.files++
	a.bytes += size
	return nil
}

// spool is the unnamed temporary file large files are read into, emptied.
func (a *archiver) spool() (*os.File, error) {
	if a.tmp == nil {
		fd, err := unix.Open(os.TempDir(), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("make a spool file in %s: %w", os.TempDir(), err)
		}
		a.tmp = os.NewFile(uintptr(fd), "archive-spool")
	}
	if err := a.tmp.Truncate(0); err != nil {
		return nil, err
	}
	if _, err := a.tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return a.tmp, nil
}

// readFull reads fd until b is full or the file ends, straight by read(2):
// no poller, no wrapper, one call for most files.
func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
