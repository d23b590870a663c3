//go:build linux

// Package treewalk walks a directory tree by descriptors only, for the
// server's readers of trees a job can change under them: the snapshot save
// of Home and the files API's archive. Each directory is opened beneath its
// parent's descriptor with O_NOFOLLOW|O_DIRECTORY, so a directory swapped
// for a symlink during the walk is never followed out of the tree; a
// symlink is reported as an entry, never followed. The walk holds one
// descriptor per level it is in and stops opening directories at a depth
// bound, so a job's 12 000-deep chain of directories cannot exhaust the
// server's descriptors; an optional budget bounds the entries read; what
// is left out is counted in bounded Warnings.
package treewalk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// direntBuf is the buffer getdents(2) fills: one for the whole walk,
// since each batch is parsed before anything else is read. A directory
// that is not sorted is visited one buffer's worth of entries (about 200
// of short names) at a time, so a directory of millions of entries costs
// no more memory than a small one.
const direntBuf = 8 << 10

// SkipAll, returned by a callback, ends the walk at once; Walk then
// returns nil.
var SkipAll = errors.New("treewalk: skip all")

// Entry is one directory entry as the walk meets it.
type Entry struct {
	// Dir is the descriptor of the directory holding the entry, valid
	// for the duration of the call: open the entry beneath it (openat,
	// fstatat with AT_SYMLINK_NOFOLLOW), never by its path.
	Dir int
	// Name is the entry's name in Dir.
	Name string
	// Path is the entry's path relative to the top, slash-separated.
	Path string
	// Depth is how many levels below the top the entry is (1 for the
	// top's own entries).
	Depth int
	// Type is the entry's type as the directory listed it (only the type
	// bits of fs.FileMode): it may be stale by the time it is opened.
	Type fs.FileMode
}

// Walker walks one tree. Set its fields, then call Walk once.
type Walker struct {
	// MaxDepth is the deepest level whose entries are visited: an entry
	// more than MaxDepth levels below the top is left out and counted as
	// KindTooDeep, and no directory is opened past that level. The walk
	// then holds at most MaxDepth+1 descriptors of its own, whatever the
	// depth of the tree: one per directory it is in, from its own
	// descriptor of the top to a directory at level MaxDepth (read to
	// count what lies past the bound). Must be > 0.
	MaxDepth int
	// MaxVisited, when > 0, bounds the entries read from directories:
	// once spent, no more are read (KindBudget is reported once), but the
	// entries read before are still visited, and directories among them
	// still entered (with nothing read from them).
	MaxVisited int64
	// Sorted reads each directory whole and visits its entries sorted by
	// name (byte order): memory then grows with the largest directory.
	// Otherwise entries are visited in the directory's own order, one
	// getdents buffer (direntBuf) at a time.
	Sorted bool
	// Warnings receives the walker's own warnings; nil drops them.
	Warnings *Warnings

	// Listed, when set, is called with the names of each batch of
	// entries read from the directory at path dir ("" for the top) before
	// any of them is visited: the whole directory when Sorted.
	Listed func(dir string, names []string)
	// Filter, when set, is asked first about each entry: false leaves it
	// out, unvisited and uncounted in KindTooDeep.
	Filter func(e *Entry) bool
	// Visit is called for each entry kept (the filter's and the depth
	// bound's). It returns true to enter a directory: the walk opens it
	// beneath e.Dir without following a link and calls Enter.
	Visit func(e *Entry) (enter bool, err error)
	// Enter is called with a directory Visit chose, once opened: fd is
	// its descriptor and st its fstat (it is a directory, the one now
	// under that name or none: whatever was swapped in, no link was
	// followed). It returns true to walk the directory's entries.
	Enter func(e *Entry, fd int, st *unix.Stat_t) (walk bool, err error)
	// Failed is called when a directory cannot be opened (op "open
	// directory"; e is the entry) or read (op "read directory"; e is the
	// directory's entry, with Path "" for the top). It
	// returns nil to carry on without that directory (or its unread
	// entries), or the error to end the walk with.
	Failed func(e *Entry, op string, err error) error

	visited    int64
	overBudget bool
	buf        []byte
}

// dirent is one entry of a batch read from a directory.
type dirent struct {
	name string
	typ  fs.FileMode
}

// Walk walks the directory open at top (the caller keeps it open and
// closes it). It returns the first error of a callback (SkipAll ends the
// walk with nil), of Failed, or nil.
func (w *Walker) Walk(top int) error {
	if w.MaxDepth <= 0 {
		return errors.New("treewalk: MaxDepth must be > 0")
	}
	if w.Visit == nil {
		return errors.New("treewalk: Visit must be set")
	}
	w.buf = make([]byte, direntBuf)
	self := &Entry{Dir: top, Name: "."}
	// The top is read through a descriptor of its own, so the caller's
	// read position is not moved.
	fd, err := unix.Openat(top, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = w.walk(fd, self)
	} else {
		err = w.failed(self, "read directory", err)
	}
	if err == SkipAll {
		return nil
	}
	return err
}

func (w *Walker) failed(e *Entry, op string, err error) error {
	if w.Failed == nil {
		return nil
	}
	return w.Failed(e, op, err)
}

// walk visits the entries of the directory open at fd (whose entry is
// self) and closes fd.
func (w *Walker) walk(fd int, self *Entry) error {
	defer unix.Close(fd)
	prefix := ""
	if self.Path != "" {
		prefix = self.Path + "/"
	}
	var batch []dirent
	var names []string
	for {
		batch = batch[:0]
		done, rerr := w.read(fd, &batch, prefix)
		if w.Sorted {
			for !done && rerr == nil {
				done, rerr = w.read(fd, &batch, prefix)
			}
			slices.SortFunc(batch, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
		}
		if w.Listed != nil && len(batch) > 0 {
			names = names[:0]
			for _, d := range batch {
				names = append(names, d.name)
			}
			w.Listed(self.Path, names)
		}
		for _, d := range batch {
			e := Entry{Dir: fd, Name: d.name, Path: prefix + d.name, Depth: self.Depth + 1, Type: d.typ}
			if err := w.entry(&e); err != nil {
				return err
			}
		}
		if rerr != nil {
			return w.failed(self, "read directory", rerr)
		}
		if done {
			return nil
		}
	}
}

// read appends to batch the entries of one getdents(2) call on fd, within
// the budget; done is true once the directory is read or the budget is
// spent.
func (w *Walker) read(fd int, batch *[]dirent, prefix string) (done bool, err error) {
	if w.overBudget {
		return true, nil
	}
	var n int
	for {
		n, err = unix.Getdents(fd, w.buf)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return true, err
	}
	if n == 0 {
		return true, nil
	}
	// struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2),
	// d_type (1), d_name (NUL-terminated).
	for b := w.buf[:n]; len(b) >= 19; {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			return true, errors.New("getdents returned a malformed record")
		}
		rec := b[:reclen]
		b = b[reclen:]
		name := rec[19:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		if w.MaxVisited > 0 {
			if w.visited >= w.MaxVisited {
				w.overBudget = true
				w.Warnings.Add(KindBudget, prefix+string(name))
				return true, nil
			}
			w.visited++
		}
		d := dirent{name: string(name)}
		switch rec[18] {
		case unix.DT_REG:
		case unix.DT_DIR:
			d.typ = fs.ModeDir
		case unix.DT_LNK:
			d.typ = fs.ModeSymlink
		case unix.DT_FIFO:
			d.typ = fs.ModeNamedPipe
		case unix.DT_SOCK:
			d.typ = fs.ModeSocket
		case unix.DT_CHR:
			d.typ = fs.ModeDevice | fs.ModeCharDevice
		case unix.DT_BLK:
			d.typ = fs.ModeDevice
		default:
			// The file system does not say (DT_UNKNOWN): ask the inode,
			// beneath fd, without following a link.
			var st unix.Stat_t
			if err := unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if err == unix.ENOENT {
					continue // gone meanwhile
				}
				d.typ = fs.ModeIrregular
			} else {
				d.typ = TypeOf(st.Mode)
			}
		}
		*batch = append(*batch, d)
	}
	return false, nil
}

// TypeOf is the type bits of fs.FileMode for a stat mode.
func TypeOf(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// entry filters and visits one entry and, for a directory chosen, walks
// it.
func (w *Walker) entry(e *Entry) error {
	if w.Filter != nil && !w.Filter(e) {
		return nil
	}
	if e.Depth > w.MaxDepth {
		// Not opened: the walk holds no more descriptors than MaxDepth
		// levels need.
		w.Warnings.Add(KindTooDeep, e.Path)
		return nil
	}
	enter, err := w.Visit(e)
	if err != nil || !enter {
		return err
	}
	sub, err := unix.Openat(e.Dir, e.Name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return w.failed(e, "open directory", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(sub, &st); err != nil {
		unix.Close(sub)
		return w.failed(e, "open directory", err)
	}
	if w.Enter != nil {
		walk, err := w.Enter(e, sub, &st)
		if err != nil || !walk {
			unix.Close(sub)
			return err
		}
	}
	return w.walk(sub, e)
}

// ReadlinkAt reads the target of the link name in dir, whatever its
// length (up to 64 KiB).
func ReadlinkAt(dir int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(buf[:m]), nil
		}
		if n >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}
