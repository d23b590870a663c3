package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Dir is an open handle on a state dir. Every file the server or a runner
// makes or opens in the state dir goes through it: resolved beneath the
// handle, with no symlink followed anywhere on the way
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and made with O_EXCL where
// it is new. A link planted in the state dir — were anything ever to
// reach it — redirects no read and no write.
type Dir struct {
	fd   int
	Path string
}

// OpenDir opens the state dir at path (which must not itself be a link).
func OpenDir(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open state dir %s: %w", path, err)
	}
	return &Dir{fd: fd, Path: path}, nil
}

// Close closes the handle.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// FD is the handle's descriptor (for identity checks: its device and
// inode, and those of the directories above it).
func (d *Dir) FD() int { return d.fd }

// ErrLink is returned (wrapped) when a path in the state dir is a symlink.
var ErrLink = errors.New("a symlink in the state dir")

func (d *Dir) how(flags int, mode uint32) *unix.OpenHow {
	return &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
}

func (d *Dir) wrap(what, rel string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%s %s: %w (%v)", what, filepath.Join(d.Path, rel), ErrLink, err)
	}
	return fmt.Errorf("%s %s: %w", what, filepath.Join(d.Path, rel), err)
}

// Open opens rel (relative to the state dir) with flags; O_CREAT implies
// O_EXCL: nothing that is already there is ever written through.
func (d *Dir) Open(rel string, flags int, mode uint32) (*os.File, error) {
	if flags&unix.O_CREAT != 0 {
		flags |= unix.O_EXCL
	}
	fd, err := unix.Openat2(d.fd, rel, d.how(flags, mode))
	if err != nil {
		return nil, d.wrap("open", rel, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Path, rel)), nil
}

// OpenFresh opens rel for writing when it is a file made ahead for this
// purpose — a regular file of ours, empty, with no other link — and makes
// it (as Open with O_CREAT) when it is missing. Anything else already
// there is refused, never written through: what is checked (on the open
// descriptor) is what is written.
func (d *Dir) OpenFresh(rel string, mode uint32) (*os.File, error) {
	// Non-blocking and no controlling terminal: a FIFO or a device would
	// otherwise block or act on the open before it is refused below.
	fd, err := unix.Openat2(d.fd, rel, d.how(unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0))
	if errors.Is(err, unix.ENOENT) {
		return d.Open(rel, unix.O_WRONLY|unix.O_CREAT, mode)
	}
	if err != nil {
		return nil, d.wrap("open", rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, d.wrap("stat", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || st.Size != 0 || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: %w (mode %o, %d links, %d bytes, owner %d): not the empty file made for it; refusing to write through it",
			filepath.Join(d.Path, rel), ErrNotFresh, st.Mode, st.Nlink, st.Size, st.Uid)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, d.wrap("open", rel, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Path, rel)), nil
}

// ErrNotFresh is returned (wrapped) by OpenFresh for a file that is not
// one made ahead and untouched.
var ErrNotFresh = errors.New("a file already there")

// OpenAppend opens rel for appending, making it when missing (a log that
// several processes add to over time): never through a link.
func (d *Dir) OpenAppend(rel string, mode uint32) (*os.File, error) {
	fd, err := unix.Openat2(d.fd, rel, d.how(unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, mode))
	if err != nil {
		return nil, d.wrap("open", rel, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Path, rel)), nil
}

// Sub opens the directory rel beneath the state dir as a Dir of its own.
func (d *Dir) Sub(rel string) (*Dir, error) {
	fd, err := unix.Openat2(d.fd, rel, d.how(unix.O_PATH|unix.O_DIRECTORY, 0))
	if err != nil {
		return nil, d.wrap("open directory", rel, err)
	}
	return &Dir{fd: fd, Path: filepath.Join(d.Path, rel)}, nil
}

// Mkdir makes the directory rel (its parent resolved beneath the handle).
func (d *Dir) Mkdir(rel string, mode uint32) error {
	parent, name, err := d.parent(rel)
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := unix.Mkdirat(parent.fd, name, mode); err != nil {
		return d.wrap("make directory", rel, err)
	}
	return nil
}

// Rename renames from to to, both beneath the handle, never replacing
// what is already at to.
func (d *Dir) Rename(from, to string) error {
	pf, nf, err := d.parent(from)
	if err != nil {
		return err
	}
	defer pf.Close()
	pt, nt, err := d.parent(to)
	if err != nil {
		return err
	}
	defer pt.Close()
	if err := unix.Renameat2(pf.fd, nf, pt.fd, nt, unix.RENAME_NOREPLACE); err != nil {
		return d.wrap("rename to "+to+":", from, err)
	}
	return nil
}

// Fd is the handle's descriptor (valid until Close), for *at calls and for
// handing it to a runner.
func (d *Dir) Fd() int { return d.fd }

// parent opens the directory holding rel.
func (d *Dir) parent(rel string) (*Dir, string, error) {
	dir, name := filepath.Split(filepath.Clean(rel))
	if name == "" || name == "." || name == ".." {
		return nil, "", fmt.Errorf("bad state dir path %q", rel)
	}
	if dir == "" {
		dir = "."
	}
	p, err := d.Sub(dir)
	return p, name, err
}

// FromFD makes a Dir of a directory descriptor received from the server
// (which opened it through its own handle); path is for messages.
func FromFD(fd int, path string) *Dir { return &Dir{fd: fd, Path: path} }

// Removed reports whether the directory d holds has been deleted (no name
// leads to it any more): whatever is written beneath it can never be read.
func (d *Dir) Removed() bool {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return false
	}
	return st.Nlink == 0
}
