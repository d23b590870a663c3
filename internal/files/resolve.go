// Package files serves the file routes (/v1/files/...): stat, list,
// content, edit, mkdir, move, delete, archive. The server is unconfined
// and a hostile job may be changing the tree while a request is served, so
// every route goes through one resolver (this file): a path is matched to
// a file root by name, then resolved beneath the root's directory handle
// (internal/beneath: openat2 RESOLVE_BENEATH, links followed only while
// they stay within), the state dir refused by device and inode, and the
// route works on the descriptors it got, never on the name again.
package files

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/beneath"
	"github.com/shellctl/shellctl/internal/treewalk"
)

// Error is a route's refusal: its status, code and message (what, the
// wrong value, what to do). Count is set for edit_ambiguous.
type Error struct {
	Status int
	Code   string
	Msg    string
	Count  int
}

func (e *Error) Error() string { return e.Msg }

func errf(status int, code, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, a...)}
}

// place is one resolved path: the root it lies under, the handle of the
// directory that holds it and its name there ("." for the root itself).
// The caller closes it.
type place struct {
	asked  string // the path as the client gave it
	root   beneath.Root
	parent *os.File // O_PATH directory handle
	name   string
	rel    string // the path relative to the root, as resolved (for messages)
}

func (p *place) close() {
	if p.parent != nil {
		p.parent.Close()
	}
	p.root.Close()
}

func (p *place) pfd() int { return int(p.parent.Fd()) }

// lstat is the last component as it is now, not followed.
func (p *place) lstat() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(p.pfd(), p.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// maxLinks bounds the links followed at the last component, as the kernel
// bounds a path's (MAXSYMLINKS).
const maxLinks = 40

// rootFor opens the innermost file root whose name abs (clean, absolute)
// starts with, and abs relative to it.
func (s *Service) rootFor(asked, abs string) (beneath.Root, string, error) {
	best, bestRel, bestNames := -1, "", []string(nil)
	for _, names := range s.roots {
		r := beneath.Root{Names: names}
		if rel, depth, ok := r.Rel(abs); ok && depth > best {
			best, bestRel, bestNames = depth, rel, names
		}
	}
	if best < 0 {
		return beneath.Root{FD: -1}, "", errf(http.StatusForbidden, "path_not_allowed", "path %q lies under no file root (%s): give a path beneath one, or start the server with --file-root DIR", asked, strings.Join(s.rootList(), ", "))
	}
	r, err := beneath.OpenRoot(bestNames[0], bestNames)
	if err != nil {
		return beneath.Root{FD: -1}, "", errf(http.StatusNotFound, "not_found", "file root %s cannot be opened: %v", bestNames[0], err)
	}
	return r, bestRel, nil
}

func (s *Service) rootList() []string {
	out := make([]string, 0, len(s.roots))
	for _, n := range s.roots {
		out = append(out, n[0])
	}
	return out
}

// absPath is path made absolute against Home and cleaned lexically: ".."
// is folded by name, so it can only shorten the path, never reach past a
// root another way than by naming a place outside it (refused).
func (s *Service) absPath(path string) (string, error) {
	if path == "" {
		return "", errf(http.StatusBadRequest, "invalid_path", "the path is empty: give an absolute path or one relative to Home (%s)", s.cfg.Home)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return "", errf(http.StatusBadRequest, "invalid_path", "path %q holds a NUL byte", path)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.cfg.Home, path)
	}
	return filepath.Clean(path), nil
}

// resolveOpts say how resolve treats the path.
type resolveOpts struct {
	// followLast follows a link at the last component while it stays
	// beneath the root (reads, and the target of PUT and edit); without
	// it the last component is the name itself (delete, move, stat with
	// follow=false).
	followLast bool
	// mkdirs makes missing directories above the last component.
	mkdirs bool
}

// resolve resolves path into a place. Every route calls it.
func (s *Service) resolve(path string, o resolveOpts) (*place, error) {
	abs, err := s.absPath(path)
	if err != nil {
		return nil, err
	}
	root, rel, err := s.rootFor(path, abs)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			root.Close()
		}
	}()
	for range maxLinks + 1 {
		dirRel, name := filepath.Split(rel)
		if name == "" {
			name = "."
		}
		bo := beneath.Options{}
		if o.mkdirs {
			bo = beneath.Options{Create: true, Perm: 0o755, BeforeCreate: s.refuseStateParent(path)}
		}
		parent, err := beneath.Open(root, path, strings.TrimSuffix(dirRel, "/"), bo)
		if err != nil {
			return nil, s.openErr(path, err)
		}
		if err := s.checkParent(path, parent); err != nil {
			parent.Close()
			return nil, err
		}
		p := &place{asked: path, root: root, parent: parent, name: name, rel: rel}
		if !o.followLast || name == "." {
			ok = true
			return p, nil
		}
		st, err := p.lstat()
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			ok = true
			return p, nil
		}
		// A link at the last component: where it leads, as a path from
		// the root, resolved again beneath it.
		target, err := readlinkAt(p.pfd(), name)
		if err != nil {
			parent.Close()
			return nil, errf(http.StatusNotFound, "not_found", "%s: read the link %s: %v", path, name, err)
		}
		next, err := s.linkRel(root, path, p, target)
		parent.Close()
		if err != nil {
			return nil, err
		}
		rel = next
	}
	return nil, errf(http.StatusConflict, "too_many_links", "%s: more than %d symbolic links in a row: give the file's real path", path, maxLinks)
}

// linkRel is where target (a link found at p) leads, relative to root;
// a link that leads out of it is refused (nothing read or written there).
func (s *Service) linkRel(root beneath.Root, asked string, p *place, target string) (string, error) {
	out := errf(http.StatusForbidden, "path_not_allowed", "%s is a symbolic link to %s, which leads out of the file root %s: nothing is read or written outside a root (a job could have planted the link); give a path beneath it", asked, target, root.Name())
	var abs string
	if filepath.IsAbs(target) {
		abs = filepath.Clean(target)
	} else {
		dir, err := handlePath(p.parent)
		if err != nil {
			return "", errf(http.StatusNotFound, "not_found", "%s: where is the directory of the link: %v", asked, err)
		}
		abs = filepath.Join(dir, target)
	}
	rel, _, ok := root.Rel(abs)
	if !ok {
		return "", out
	}
	return rel, nil
}

// handlePath is where a handle really is, as the kernel names it.
func handlePath(f *os.File) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
}

// openErr turns a resolution failure into the route's error.
func (s *Service) openErr(path string, err error) error {
	var fe *Error
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, beneath.ErrEscape) || errors.Is(err, beneath.ErrLink):
		return errf(http.StatusForbidden, "path_not_allowed", "%v", err)
	case errors.Is(err, unix.ENOENT):
		return errf(http.StatusNotFound, "not_found", "%s: a directory on the way does not exist (%v): make it first (mkdir, or PUT with mkdirs=true)", path, err)
	case errors.Is(err, unix.ENOTDIR):
		return errf(http.StatusConflict, "not_a_directory", "%v", err)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return errf(http.StatusForbidden, "permission_denied", "%v", err)
	}
	return errf(http.StatusInternalServerError, "internal_error", "%s: %v", path, err)
}

// stateErr is the refusal of the state dir, whatever name reached it.
func (s *Service) stateErr(path string) *Error {
	return errf(http.StatusForbidden, "path_not_allowed", "%s is the server's state dir, lies inside it or contains it, which no file route reaches (the jobs' records and the database live there): give a path elsewhere", path)
}

// checkParent refuses a directory that is the state dir or lies inside
// it, by device and inode of it and every directory above it.
func (s *Service) checkParent(path string, dir *os.File) error {
	if len(s.state) == 0 {
		return nil
	}
	chain, err := beneath.Chain(int(dir.Fd()))
	if err != nil {
		return errf(http.StatusForbidden, "path_not_allowed", "%s: cannot tell whether it lies in the server's state dir (%v): give another path", path, err)
	}
	if beneath.Contains(chain, s.state[0]) {
		return s.stateErr(path)
	}
	return nil
}

// refuseStateParent is beneath's BeforeCreate: no directory is made
// inside the state dir.
func (s *Service) refuseStateParent(path string) func(int) error {
	return func(parent int) error {
		if len(s.state) == 0 {
			return nil
		}
		chain, err := beneath.Chain(parent)
		if err != nil || beneath.Contains(chain, s.state[0]) {
			return s.stateErr(path)
		}
		return nil
	}
}

// isState reports whether st is the state dir (inside: checkParent).
func (s *Service) isState(st *unix.Stat_t) bool {
	return len(s.state) > 0 && beneath.ID{Dev: st.Dev, Ino: st.Ino} == s.state[0]
}

// containsState reports whether st is the state dir or a directory above
// it.
func (s *Service) containsState(st *unix.Stat_t) bool {
	return beneath.Contains(s.state, beneath.ID{Dev: st.Dev, Ino: st.Ino})
}

// readlinkAt reads the link name in dir.
func readlinkAt(dir int, name string) (string, error) { return treewalk.ReadlinkAt(dir, name) }

// openRead opens p's last component for reading: not followed (resolve
// followed the links that stay within), non-blocking (a FIFO never
// holds the server), checked before and after the open to be the same
// regular file. A link swapped in meanwhile is an error, never followed.
func (s *Service) openRead(p *place, wantDir bool) (*os.File, unix.Stat_t, error) {
	st, err := p.lstat()
	if err != nil {
		return nil, st, s.statErr(p, err)
	}
	if err := s.checkKind(p, &st, wantDir); err != nil {
		return nil, st, err
	}
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	if wantDir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(p.pfd(), p.name, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, st, errf(http.StatusConflict, "changed", "%s became a symbolic link while it was opened (a job is changing it): try again", p.asked)
		}
		return nil, st, s.statErr(p, err)
	}
	var st2 unix.Stat_t
	if err := unix.Fstat(fd, &st2); err != nil {
		unix.Close(fd)
		return nil, st, s.statErr(p, err)
	}
	if st2.Dev != st.Dev || st2.Ino != st.Ino {
		unix.Close(fd)
		if err := s.checkKind(p, &st2, wantDir); err != nil {
			return nil, st, err
		}
		return nil, st, errf(http.StatusConflict, "changed", "%s was replaced while it was opened (a job is changing it): try again", p.asked)
	}
	if !wantDir {
		// Back to blocking reads: a regular file never blocks, and the
		// Go runtime must not treat it as pollable.
		_ = unix.SetNonblock(fd, false)
	}
	return os.NewFile(uintptr(fd), p.asked), st2, nil
}

// openFollowed resolves path, following a link at its end while it stays
// beneath the root, and opens what it names as openRead does: the read
// routes' way in. The caller closes both.
func (s *Service) openFollowed(path string, wantDir bool) (*place, *os.File, unix.Stat_t, error) {
	p, err := s.resolve(path, resolveOpts{followLast: true})
	if err != nil {
		return nil, nil, unix.Stat_t{}, err
	}
	f, st, err := s.openRead(p, wantDir)
	if err != nil {
		p.close()
		return nil, nil, st, err
	}
	return p, f, st, nil
}

// checkKind answers a wrong kind of file at once (a FIFO, socket or
// device is never opened for its contents) and refuses the state dir.
func (s *Service) checkKind(p *place, st *unix.Stat_t, wantDir bool) error {
	if s.isState(st) {
		return s.stateErr(p.asked)
	}
	k := st.Mode & unix.S_IFMT
	switch {
	case wantDir && k == unix.S_IFDIR, !wantDir && k == unix.S_IFREG:
		return nil
	case wantDir:
		return errf(http.StatusConflict, "not_a_directory", "%s is a %s, not a directory: list a directory", p.asked, kindName(st.Mode))
	case k == unix.S_IFDIR:
		return errf(http.StatusConflict, "not_a_regular_file", "%s is a directory, not a regular file: use list, or archive to collect it", p.asked)
	case k == unix.S_IFLNK:
		return errf(http.StatusConflict, "changed", "%s became a symbolic link while it was resolved (a job is changing it): try again", p.asked)
	}
	return errf(http.StatusConflict, "not_a_regular_file", "%s is a %s, not a regular file: only regular files are read or written as contents (a FIFO, socket or device could block or never end)", p.asked, kindName(st.Mode))
}

func (s *Service) statErr(p *place, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return errf(http.StatusNotFound, "not_found", "%s does not exist", p.asked)
	case errors.Is(err, unix.ENXIO):
		return errf(http.StatusConflict, "not_a_regular_file", "%s is a socket or a device with nothing behind it, not a regular file", p.asked)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return errf(http.StatusForbidden, "permission_denied", "%s: %v", p.asked, err)
	case errors.Is(err, unix.ENOTDIR):
		return errf(http.StatusConflict, "not_a_directory", "%s: %v", p.asked, err)
	case errors.Is(err, unix.EISDIR):
		return errf(http.StatusConflict, "not_a_regular_file", "%s is a directory", p.asked)
	}
	return errf(http.StatusInternalServerError, "internal_error", "%s: %v", p.asked, err)
}

// kindName is the spec's name of a file's type.
func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	}
	return "device"
}
