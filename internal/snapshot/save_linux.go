//go:build linux

package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/treewalk"
)

// walk archives the entries of Home, walked by descriptors (each
// directory opened beneath its parent without following a link) within
// MaxDepth levels.
func (s *saver) walk() error {
	top, err := s.root.Open(".")
	if err != nil {
		return fmt.Errorf("open directory %q: %w", s.home, err)
	}
	defer top.Close()
	s.warnings = &treewalk.Warnings{Shorten: shortName}
	w := &treewalk.Walker{
		MaxDepth: MaxDepth,
		Sorted:   s.opts.Lexical,
		Warnings: s.warnings,
		Filter:   s.keep,
		Visit:    s.entry,
		Enter:    s.dir,
		Failed: func(e *treewalk.Entry, op string, err error) error {
			if replaced(err) {
				return nil
			}
			return fmt.Errorf("%s %q: %w", op, shortName(e.Path), err)
		},
	}
	return w.Walk(int(top.Fd()))
}

// keep reports whether the entry e is one a snapshot holds (when it lies
// within MaxDepth levels).
func (s *saver) keep(e *treewalk.Entry) bool {
	if e.Path == OriginalStateDir {
		return false // whatever it is, and whatever the patterns say
	}
	// s.path: the components of e's path, the walk being depth-first.
	s.path = append(s.path[:e.Depth-1], e.Name)
	t := e.Type
	if !t.IsDir() && !t.IsRegular() && t&fs.ModeSymlink == 0 {
		// Sockets, FIFOs and devices are skipped: they have no content to
		// save and cannot be recreated meaningfully elsewhere.
		return false
	}
	return !s.excl.excluded(s.path, t.IsDir())
}

// entry archives one directory entry; for a directory it asks the walk to
// open it (then dir archives it).
func (s *saver) entry(e *treewalk.Entry) (bool, error) {
	if err := s.ctx.Err(); err != nil {
		return false, err
	}
	switch t := e.Type; {
	case t.IsDir():
		return true, nil
	case t.IsRegular():
		return false, s.file(e.Dir, e.Name, e.Path)
	default:
		return false, s.symlink(e.Dir, e.Name, e.Path)
	}
}

// dir archives the directory e, open at fd (st is its fstat), and lets
// the walk read it, unless it is the server's state dir.
func (s *saver) dir(e *treewalk.Entry, _ int, st *unix.Stat_t) (bool, error) {
	if s.stateDir != nil && *s.stateDir == statID(st) {
		return false, nil // the server's own state: never archived
	}
	hdrName := e.Path + "/"
	if s.opts.BareDirNames {
		hdrName = e.Path
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeDir,
		Name:     hdrName,
		Mode:     statTarMode(st),
		ModTime:  statMtime(st).Truncate(time.Second), // as tar does; sub-second times would need a PAX header per entry
	}
	if err := s.header(hdr); err != nil {
		return false, err
	}
	return true, nil
}

func (s *saver) symlink(dir int, name, full string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if replaced(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %q: %w", shortName(full), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return nil // replaced during the walk
	}
	target, err := treewalk.ReadlinkAt(dir, name)
	if replaced(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read link %q: %w", shortName(full), err)
	}
	if s.opts.RelativeLinks {
		target = s.relativeTarget(full, target)
	}
	return s.header(&tar.Header{
		Typeflag: tar.TypeSymlink,
		Name:     full,
		Linkname: target,
		Mode:     0o777,
		ModTime:  statMtime(&st).Truncate(time.Second), // as tar does; sub-second times would need a PAX header per entry
	})
}

func (s *saver) file(dir int, name, full string) error {
	// O_NONBLOCK: if the entry was swapped for a FIFO since it was listed,
	// opening it must not block the whole save. O_NOFOLLOW: one swapped
	// for a link is not followed. Read by read(2) on the descriptor: no
	// poller registration or os.File per file.
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if replaced(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %q: %w", shortName(full), err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %q: %w", shortName(full), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // replaced during the walk
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     full,
		Mode:     statTarMode(&st),
		ModTime:  statMtime(&st).Truncate(time.Second), // as tar does; sub-second times would need a PAX header per entry
		Size:     st.Size,
	}
	if id, nlink := statID(&st), uint64(st.Nlink); nlink > 1 && !s.opts.NoHardLinks {
		if first, seen := s.links[id]; seen {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first.name, 0
			if first.left--; first.left == 0 {
				delete(s.links, id) // every name met: none will ask again
				s.linkBytes -= linkEntryCost + len(first.name)
			} else {
				s.links[id] = first
			}
			return s.header(hdr)
		}
		if cost := linkEntryCost + len(full); s.linkBytes+cost <= maxHardLinkBytes {
			s.links[id] = linkEntry{name: full, left: nlink - 1}
			s.linkBytes += cost
		}
	}
	if err := s.header(hdr); err != nil {
		return err
	}
	var r io.Reader = fdReader(fd)
	if testHookFileReader != nil {
		r = testHookFileReader(full, r)
	}
	return s.copyFile(r, full, st.Size)
}

// fdReader reads a descriptor by read(2).
type fdReader int

func (f fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// statID is the inode st describes.
func statID(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} }

// statMtime is st's modification time.
func statMtime(st *unix.Stat_t) time.Time { return time.Unix(st.Mtim.Sec, st.Mtim.Nsec) }

// statTarMode keeps the permission bits and setuid, setgid and sticky
// (the same bits in a stat mode as in a tar header).
func statTarMode(st *unix.Stat_t) int64 { return int64(st.Mode & 0o7777) }

// replaced reports an entry removed, or replaced by one of another type
// (a link, where O_NOFOLLOW says ELOOP; a file, where O_DIRECTORY says
// ENOTDIR), between listing and opening it: it is simply not part of the
// snapshot, as if the walk had come a moment earlier or later.
func replaced(err error) bool {
	return err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR))
}
