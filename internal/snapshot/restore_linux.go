package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The extractor opens every path beneath Home one component at a time,
// relative to the handle of the directory above, with O_NOFOLLOW: a
// symlink is never traversed, wherever it points, so no directory can be
// reached under a second name. (openat2 with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS would do the same in one call per path; with the
// handles of the current directory chain kept open, a path costs one call
// per new component either way, and per-component openat needs no
// particular kernel.) Names were cleaned first: no "..", no absolute
// names, so a walk can only go down.
const (
	// dirFlags opens a directory to work in: its handle creates children,
	// and sets the directory's own mode and time when the archive leaves it.
	dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// lookFlags opens a directory only to look at a child (the target of
	// a hard link): O_PATH needs no read permission.
	lookFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// fileFlags creates a file: exclusively, so an existing file (maybe a
	// symlink, or a hard link to a file elsewhere) is replaced, never
	// written through.
	fileFlags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// implicitDirMode is the mode of the parents an archive does not list.
	implicitDirMode = 0o755

	// holeBlock is the unit of the holes a restore leaves: a block of a
	// file's contents, aligned on its offset in the file, that is all
	// zeros is not written but skipped (the next write lands past it, and
	// the file is extended to its size at its end), so the file system
	// allocates nothing for it. The archive format has no holes (restore
	// refuses tar's sparse entries, and the original's restore does not
	// read them), so a sparse file is saved as its zeros and its holes
	// come back here. 4 KiB is the block of ext4, xfs and tmpfs on
	// x86-64: a smaller zero run would be allocated anyway with the data
	// beside it.
	holeBlock = 4 << 10
)

// zeroBlock is what a block is compared with to tell a hole.
var zeroBlock [holeBlock]byte

// dirHandle is one open directory of the chain the archive is in.
type dirHandle struct {
	name  string // relative to Home; "" is Home itself
	fd    int
	state bool // the server's state dir: nothing is done in it
	// pending: a directory entry of the archive, whose mode and time are
	// applied when the archive leaves it (deepest first, after its
	// children, so a read-only directory still receives them).
	pending bool
	perm    uint32
	mtime   time.Time
}

type extractor struct {
	ctx      context.Context
	file     int    // the regular file being written, or -1
	off      int64  // the size of that file's contents so far
	dataEnd  int64  // the end of its last data written: past it, a hole
	skipFile bool   // the pieces of the current file are skipped (state dir)
	umask    uint32 // bits the kernel takes from the mode of created files
	stateID  fileID
	hasState bool
	stats    RestoreStats
	// stack is the chain of open directories from Home (stack[0]) down to
	// the directory of the last entry. Our archives (and tar's) list a
	// directory's subtree right after it, so consecutive entries find
	// their parent open: one openat per file, whatever its depth. It
	// holds the current depth only, not every directory of Home.
	stack []dirHandle
}

func newExtractor(ctx context.Context, home, stateDir string) (*extractor, error) {
	if err := checkHome(home); err != nil {
		return nil, err
	}
	fd, err := openRetry(unix.AT_FDCWD, home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrHomeUnavailable, home, err)
	}
	x := &extractor{
		ctx:   ctx,
		file:  -1,
		umask: uint32(processUmask()),
		stack: []dirHandle{{name: "", fd: fd}},
	}
	if id := stateIdentity(stateDir); id != nil {
		x.stateID, x.hasState = *id, true
		if x.isState(fd) {
			x.close()
			return nil, fmt.Errorf("restore into %s: it is the server's state dir (%s); choose a state dir outside Home", home, stateDir)
		}
	}
	return x, nil
}

// close releases every handle (on error; on success finish has applied
// the pending modes first).
func (x *extractor) close() {
	if x.file >= 0 {
		unix.Close(x.file)
		x.file = -1
	}
	for _, d := range x.stack {
		unix.Close(d.fd)
	}
	x.stack = nil
}

// finish leaves every directory, applying the pending modes and times.
func (x *extractor) finish() error {
	for len(x.stack) > 1 {
		if err := x.pop(); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) top() *dirHandle { return &x.stack[len(x.stack)-1] }

// pop leaves the innermost directory of the chain.
func (x *extractor) pop() error {
	d := x.stack[len(x.stack)-1]
	x.stack = x.stack[:len(x.stack)-1]
	var err error
	if d.pending {
		// Through the directory's own handle: no path is resolved again.
		err = fchmodRetry(d.fd, d.perm)
		if err == nil {
			err = setTimes(d.fd, d.mtime)
		}
	}
	unix.Close(d.fd)
	if err != nil {
		return fmt.Errorf("set mode and time of %q: %w", shortName(d.name), err)
	}
	return nil
}

// isState reports whether fd is the server's state dir.
func (x *extractor) isState(fd int) bool {
	if !x.hasState {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	return x.sameAsState(&st)
}

func (x *extractor) sameAsState(st *unix.Stat_t) bool {
	return x.hasState && uint64(st.Dev) == x.stateID.dev && uint64(st.Ino) == x.stateID.ino
}

// enter makes dir (a cleaned name, "" for Home) the innermost directory of
// the chain, leaving the directories it is not inside of and opening (and
// creating when missing) the components below the deepest one it is.
func (x *extractor) enter(dir, entry string) (*dirHandle, error) {
	for t := x.top(); t.name != dir && !within(dir, t.name); t = x.top() {
		if err := x.pop(); err != nil {
			return nil, err
		}
	}
	for {
		t := x.top()
		if t.state {
			return nil, errStateDir
		}
		if t.name == dir {
			return t, nil
		}
		rest := dir
		if t.name != "" {
			rest = dir[len(t.name)+1:]
		}
		comp, _, _ := strings.Cut(rest, "/")
		child := joinName(t.name, comp)
		fd, err := openRetry(t.fd, comp, dirFlags, 0)
		if err == unix.ENOENT {
			// A parent the archive does not list.
			if err = mkdirRetry(t.fd, comp, implicitDirMode); err == nil || err == unix.EEXIST {
				fd, err = openRetry(t.fd, comp, dirFlags, 0)
			}
		}
		if err != nil {
			return nil, x.pathErr(t.fd, comp, child, entry, err)
		}
		x.stack = append(x.stack, dirHandle{name: child, fd: fd, state: x.isState(fd)})
	}
}

// lookup opens dir only to look at its children, without changing the
// chain or creating anything. release closes what lookup opened.
func (x *extractor) lookup(dir, entry string) (fd int, release func(), err error) {
	i := len(x.stack) - 1
	for x.stack[i].name != dir && !within(dir, x.stack[i].name) {
		i--
	}
	d := x.stack[i]
	if d.state {
		return -1, nil, errStateDir
	}
	fd, cur, owned := d.fd, d.name, false
	for cur != dir {
		rest := dir
		if cur != "" {
			rest = dir[len(cur)+1:]
		}
		comp, _, _ := strings.Cut(rest, "/")
		cur = joinName(cur, comp)
		nfd, err := openRetry(fd, comp, lookFlags, 0)
		if err != nil {
			err = x.pathErr(fd, comp, cur, entry, err)
		}
		if owned {
			unix.Close(fd)
		}
		if err != nil {
			return -1, nil, err
		}
		fd, owned = nfd, true
		if x.isState(fd) {
			unix.Close(fd)
			return -1, nil, errStateDir
		}
	}
	if !owned {
		return fd, func() {}, nil
	}
	return fd, func() { unix.Close(fd) }, nil
}

// pathErr explains why the directory comp (named full) of entry's path
// could not be opened: a symlink or a non-directory in the way is the
// archive's fault (it made it, or asks to write beneath what stands in
// Home); anything else is environmental.
func (x *extractor) pathErr(parent int, comp, full, entry string, err error) error {
	if err == unix.ELOOP || err == unix.ENOTDIR || err == unix.ENOENT {
		var st unix.Stat_t
		switch serr := fstatatRetry(parent, comp, &st); {
		case serr == unix.ENOENT:
			return malformed("entry %q: %q does not exist", entry, full)
		case serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return malformed("entry %q: %q is a symbolic link; restore never writes through a link, "+
				"wherever it points (a directory entry for %q replaces the link)", entry, full, full)
		case serr == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return malformed("entry %q: %q is not a directory", entry, full)
		}
	}
	return fmt.Errorf("open directory %q: %w", shortName(full), err)
}

func joinName(dir, base string) string {
	if dir == "" {
		return base
	}
	return dir + "/" + base
}

// replace removes what stands at base in parent (a file, a symlink or an
// empty directory) so the entry can take its place. A symlink is removed,
// never followed; the state dir is never removed.
func (x *extractor) replace(parent int, base, name string) error {
	var st unix.Stat_t
	if err := fstatatRetry(parent, base, &st); err != nil {
		if err == unix.ENOENT {
			return nil // gone meanwhile: the creation is tried again
		}
		return fmt.Errorf("stat %q: %w", shortName(name), err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if x.sameAsState(&st) {
			return errStateDir
		}
		if err := unlinkRetry(parent, base, unix.AT_REMOVEDIR); err != nil {
			return fmt.Errorf("replace directory %q: %w", shortName(name), err)
		}
		return nil
	}
	if err := unlinkRetry(parent, base, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("replace %q: %w", shortName(name), err)
	}
	return nil
}

// create runs op, the creation of base in parent; when something is in the
// way it is replaced and op is tried once more.
func (x *extractor) create(parent int, base, name string, op func() error) error {
	err := op()
	if err == unix.EEXIST {
		if err = x.replace(parent, base, name); err != nil {
			return err
		}
		err = op()
	}
	if err != nil {
		return fmt.Errorf("create %q: %w", shortName(name), err)
	}
	return nil
}

// apply applies the entries of a batch, in the writer stage.
func (x *extractor) apply(b *batch) error {
	for i := range b.pieces {
		pc := &b.pieces[i]
		if err := x.ctx.Err(); err != nil {
			return fmt.Errorf("restore %q: %w", shortName(pc.name), err)
		}
		if pc.more {
			if x.skipFile {
				x.skipFile = !pc.end
				continue
			}
		} else if err := x.begin(pc); err != nil {
			if errors.Is(err, errStateDir) {
				// The server's own state: left alone, and so are the
				// contents of a file there in the pieces that follow.
				x.skipFile = pc.kind == tar.TypeReg && !pc.end
				continue
			}
			return err
		}
		if pc.kind != tar.TypeReg {
			x.stats.Entries++
			continue
		}
		if err := x.writeContents(pc); err != nil {
			return err
		}
		if pc.end {
			if err := x.endFile(pc); err != nil {
				return err
			}
			x.stats.Entries++
		}
	}
	return nil
}

// begin applies an entry, or for a regular file creates it (its contents
// follow).
func (x *extractor) begin(pc *piece) error {
	switch pc.kind {
	case tar.TypeDir:
		return x.mkdir(pc.name, pc.perm, pc.mtime)
	case tar.TypeReg:
		return x.createFile(pc.name, pc.perm)
	case tar.TypeSymlink:
		return x.symlink(pc.name, pc.link, pc.mtime)
	case tar.TypeLink:
		return x.link(pc.name, pc.link)
	}
	return malformed("entry %q: unsupported entry type %q", pc.raw, string(pc.kind))
}

func (x *extractor) mkdir(name string, perm uint32, mtime time.Time) error {
	dir, base := splitName(name)
	p, err := x.enter(dir, name)
	if err != nil {
		return err
	}
	pfd := p.fd
	created := true
	err = mkdirRetry(pfd, base, 0o700)
	if err == unix.EEXIST {
		created = false
		var st unix.Stat_t
		if err = fstatatRetry(pfd, base, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			// A file or a symlink where the archive has a directory: the
			// link is replaced, never followed.
			if err = x.replace(pfd, base, name); err == nil {
				created = true
				err = mkdirRetry(pfd, base, 0o700)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create directory %q: %w", shortName(name), err)
	}
	fd, err := openRetry(pfd, base, dirFlags, 0)
	if err == unix.EACCES && !created {
		fd, err = x.openUnreadable(pfd, base)
	}
	if err != nil {
		return x.pathErr(pfd, base, name, name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("stat directory %q: %w", shortName(name), err)
	}
	if x.sameAsState(&st) {
		// Kept open, marked: the entries inside it that follow are
		// skipped without another look.
		x.stack = append(x.stack, dirHandle{name: name, fd: fd, state: true})
		return errStateDir
	}
	if !created && st.Mode&0o700 != 0o700 {
		// An existing directory we could not write into: writable until
		// its own mode is applied.
		if err := fchmodRetry(fd, st.Mode&0o7777|0o700); err != nil {
			unix.Close(fd)
			return fmt.Errorf("make directory %q writable: %w", shortName(name), err)
		}
	}
	x.stack = append(x.stack, dirHandle{name: name, fd: fd, pending: true, perm: perm, mtime: mtime})
	return nil
}

// openUnreadable opens an existing directory we may not read (its mode
// lacks u+r or u+x): through an O_PATH handle of it, its mode gains u+rwx
// (until the archive's mode is applied), then it is opened again through
// that same handle, so no name is resolved twice.
func (x *extractor) openUnreadable(parent int, base string) (int, error) {
	pfd, err := openRetry(parent, base, lookFlags, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, err
	}
	if x.sameAsState(&st) {
		return -1, unix.EACCES // the state dir is not ours to change
	}
	// An O_PATH handle cannot fchmod; its /proc/self/fd name reaches the
	// very inode it holds, whatever happens to names meanwhile.
	if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(pfd), st.Mode&0o7777|0o700, 0); err != nil {
		return -1, err
	}
	return openRetry(pfd, ".", dirFlags, 0)
}

// createFile creates the regular file name, to be written by
// writeContents and closed by endFile.
func (x *extractor) createFile(name string, perm uint32) error {
	dir, base := splitName(name)
	p, err := x.enter(dir, name)
	if err != nil {
		return err
	}
	pfd := p.fd
	// Created with its final permission bits: writing through this
	// descriptor is allowed whatever they are, and no fchmod is needed
	// unless the umask took some away.
	return x.create(pfd, base, name, func() error {
		fd, err := openRetry(pfd, base, fileFlags, perm)
		if err == nil {
			x.file, x.off, x.dataEnd = fd, 0, 0
		}
		return err
	})
}

// writeContents writes a piece of the current file's contents, leaving a
// hole for every block of zeros (see holeBlock). The file was created
// empty (O_EXCL), so what is not written reads as zeros. Runs of data
// between holes go in one pwrite each, so a file without zero blocks
// costs the writes it always did.
func (x *extractor) writeContents(pc *piece) error {
	data, off := pc.data, x.off
	runStart := 0 // the data not yet written: data[runStart:i]
	for i := 0; i < len(data); {
		n := holeBlock - int((off+int64(i))%holeBlock) // to the next block boundary of the file
		n = min(n, len(data)-i)
		if !bytes.Equal(data[i:i+n], zeroBlock[:n]) {
			i += n
			continue
		}
		if runStart < i {
			if err := pwriteAll(x.file, data[runStart:i], off+int64(runStart)); err != nil {
				return fmt.Errorf("write %q: %w", shortName(pc.name), err)
			}
			x.dataEnd = off + int64(i)
		}
		i += n
		runStart = i
	}
	if runStart < len(data) {
		if err := pwriteAll(x.file, data[runStart:], off+int64(runStart)); err != nil {
			return fmt.Errorf("write %q: %w", shortName(pc.name), err)
		}
		x.dataEnd = off + int64(len(data))
	}
	x.off += int64(len(data))
	x.stats.BytesWritten += int64(len(data))
	return nil
}

// endFile sets the mode (when the umask took bits away) and time of the
// file being written and closes it.
func (x *extractor) endFile(pc *piece) error {
	fd := x.file
	x.file = -1
	if x.off > x.dataEnd {
		// The file ends in a hole: nothing was written there, so its
		// size is set.
		if err := ftruncateRetry(fd, x.off); err != nil {
			unix.Close(fd)
			return fmt.Errorf("set size of %q to %d bytes: %w", shortName(pc.name), x.off, err)
		}
	}
	if pc.perm&x.umask != 0 {
		if err := fchmodRetry(fd, pc.perm); err != nil {
			unix.Close(fd)
			return fmt.Errorf("set mode of %q: %w", shortName(pc.name), err)
		}
	}
	if err := setTimes(fd, pc.mtime); err != nil {
		unix.Close(fd)
		return fmt.Errorf("set time of %q: %w", shortName(pc.name), err)
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close %q: %w", shortName(pc.name), err)
	}
	return nil
}

func (x *extractor) symlink(name, target string, mtime time.Time) error {
	dir, base := splitName(name)
	p, err := x.enter(dir, name)
	if err != nil {
		return err
	}
	pfd := p.fd
	// The target is stored as is: a link may point anywhere, restore never
	// follows one.
	if err := x.create(pfd, base, name, func() error { return symlinkRetry(target, pfd, base) }); err != nil {
		return err
	}
	// The archive keeps a link's own mtime, as tar does; it is set on the
	// link (AT_SYMLINK_NOFOLLOW), never on what it points at.
	if err := setLinkTimes(pfd, base, mtime); err != nil {
		return fmt.Errorf("set time of %q: %w", shortName(name), err)
	}
	return nil
}

func (x *extractor) link(name, linkname string) error {
	target, _ := cleanName(linkname) // checked by checkEntry
	if target == name {
		return nil
	}
	dir, base := splitName(name)
	p, err := x.enter(dir, name)
	if err != nil {
		return err
	}
	pfd := p.fd
	tdir, tbase := splitName(target)
	tfd, release, err := x.lookup(tdir, name)
	if err != nil {
		return err
	}
	defer release()
	var st unix.Stat_t
	switch err := fstatatRetry(tfd, tbase, &st); {
	case err == unix.ENOENT:
		return malformed("hard link %q: target %q not found", name, linkname)
	case err != nil:
		return fmt.Errorf("hard link %q to %q: %w", shortName(name), shortName(linkname), err)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return malformed("hard link %q: target %q is a directory", name, linkname)
	}
	// Flags 0: a target that is a symlink is linked itself, not followed.
	return x.create(pfd, base, name, func() error { return linkRetry(tfd, tbase, pfd, base) })
}

// The system calls, retried on EINTR (the Go runtime's preemption signals
// can interrupt them on file systems that honour signals).

func openRetry(dir int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func mkdirRetry(dir int, name string, mode uint32) error {
	for {
		if err := unix.Mkdirat(dir, name, mode); err != unix.EINTR {
			return err
		}
	}
}

func fstatatRetry(dir int, name string, st *unix.Stat_t) error {
	for {
		if err := unix.Fstatat(dir, name, st, unix.AT_SYMLINK_NOFOLLOW); err != unix.EINTR {
			return err
		}
	}
}

func unlinkRetry(dir int, name string, flags int) error {
	for {
		if err := unix.Unlinkat(dir, name, flags); err != unix.EINTR {
			return err
		}
	}
}

func symlinkRetry(target string, dir int, name string) error {
	for {
		if err := unix.Symlinkat(target, dir, name); err != unix.EINTR {
			return err
		}
	}
}

func linkRetry(odir int, oname string, ndir int, nname string) error {
	for {
		if err := unix.Linkat(odir, oname, ndir, nname, 0); err != unix.EINTR {
			return err
		}
	}
}

func fchmodRetry(fd int, mode uint32) error {
	for {
		if err := unix.Fchmod(fd, mode); err != unix.EINTR {
			return err
		}
	}
}

func ftruncateRetry(fd int, size int64) error {
	for {
		if err := unix.Ftruncate(fd, size); err != unix.EINTR {
			return err
		}
	}
}

func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
