package files

import (
	"errors"
	"net/http"
	"os"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/httperr"
)

// MkdirRequest is the body of POST /v1/files/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents *bool  `json:"parents"`
	Mode    string `json:"mode"`
}

func (s *Service) mkdir(w http.ResponseWriter, r *http.Request) error {
	var req MkdirRequest
	if err := decode(s.body(w, r), &req); err != nil {
		return err
	}
	parents := req.Parents == nil || *req.Parents
	mode, err := modeParam("mode", req.Mode, 0o755)
	if err != nil {
		return err
	}
	p, err := s.resolve(req.Path, resolveOpts{mkdirs: parents})
	if err != nil {
		return err
	}
	defer p.close()
	abs, _ := s.absPath(req.Path)
	err = unix.Mkdirat(p.pfd(), p.name, mode)
	if p.name == "." {
		err = unix.EEXIST
	}
	if errors.Is(err, unix.EEXIST) {
		st, lerr := p.lstat()
		if lerr == nil && s.isState(&st) {
			return s.stateErr(req.Path)
		}
		if lerr == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && parents {
			httperr.WriteJSON(w, http.StatusOK, map[string]any{"path": abs, "created": false})
			return nil
		}
		return errf(http.StatusConflict, "already_exists", "%s already exists: give parents=true to accept an existing directory, or another path", req.Path)
	}
	if err != nil {
		return s.statErr(p, err)
	}
	// The umask took bits away: put them back, on the directory just
	// made, never through a link put in its place.
	if fd, err := unix.Openat(p.pfd(), p.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Fchmod(fd, mode)
		var owner unix.Stat_t
		if unix.Fstat(p.pfd(), &owner) == nil {
			_ = unix.Fchown(fd, int(owner.Uid), int(owner.Gid))
		}
		unix.Close(fd)
	}
	httperr.WriteJSON(w, http.StatusCreated, map[string]any{"path": abs, "created": true})
	return nil
}

// MoveRequest is the body of POST /v1/files/move.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite"`
}

func (s *Service) move(w http.ResponseWriter, r *http.Request) error {
	var req MoveRequest
	if err := decode(s.body(w, r), &req); err != nil {
		return err
	}
	from, err := s.resolve(req.From, resolveOpts{})
	if err != nil {
		return err
	}
	defer from.close()
	to, err := s.resolve(req.To, resolveOpts{})
	if err != nil {
		return err
	}
	defer to.close()
	if from.name == "." || to.name == "." {
		return errf(http.StatusBadRequest, "invalid_path", "a file root itself cannot be moved, nor replaced: give paths beneath it")
	}
	st, err := from.lstat()
	if err != nil {
		return s.statErr(from, err)
	}
	if s.containsState(&st) {
		return s.stateErr(req.From)
	}
	flags := uint(unix.RENAME_NOREPLACE)
	if req.Overwrite {
		flags = 0
	}
	if err := unix.Renameat2(from.pfd(), from.name, to.pfd(), to.name, flags); err != nil {
		switch {
		case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
			return errf(http.StatusConflict, "already_exists", "%s already exists: give overwrite=true to replace it (a directory only when empty)", req.To)
		case errors.Is(err, unix.EXDEV):
			return errf(http.StatusConflict, "cross_device", "%s and %s are on different filesystems: copy (content GET and PUT) then delete instead", req.From, req.To)
		case errors.Is(err, unix.EINVAL):
			return errf(http.StatusBadRequest, "invalid_path", "%s cannot be moved into itself (%s)", req.From, req.To)
		case errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENOTDIR):
			return errf(http.StatusConflict, "not_a_directory", "%s and %s are not of the same kind (a directory and a file): %v", req.From, req.To, err)
		}
		return s.statErr(from, err)
	}
	fa, _ := s.absPath(req.From)
	ta, _ := s.absPath(req.To)
	httperr.WriteJSON(w, http.StatusOK, map[string]string{"from": fa, "to": ta})
	return nil
}

// Bounds of a recursive delete: how deep (each level holds a
// descriptor) and how many entries, so a job that keeps making entries
// cannot keep the server deleting.
const (
	maxDeleteDepth   = 512
	maxDeleteEntries = 10_000_000
)

func (s *Service) delete(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	recursive, err := boolParam(r, "recursive", false)
	if err != nil {
		return err
	}
	p, err := s.resolve(path, resolveOpts{})
	if err != nil {
		return err
	}
	defer p.close()
	if p.name == "." {
		return errf(http.StatusBadRequest, "invalid_path", "%s is a file root, which is never removed: give a path beneath it", path)
	}
	st, err := p.lstat()
	if err != nil {
		return s.statErr(p, err)
	}
	if s.containsState(&st) {
		return s.stateErr(path)
	}
	n := 0
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err = unix.Unlinkat(p.pfd(), p.name, 0)
		n = 1
	} else if !recursive {
		err = unix.Unlinkat(p.pfd(), p.name, unix.AT_REMOVEDIR)
		n = 1
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return errf(http.StatusConflict, "dir_not_empty", "%s is a directory that is not empty: give recursive=true to remove it and everything in it", path)
		}
	} else {
		n, err = s.removeTree(p.pfd(), p.name, 0, new(int))
	}
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return fe
		}
		return s.statErr(p, err)
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]int{"removed": n})
	return nil
}

// removeTree removes name in parent and everything beneath it, each
// directory opened beneath its parent's descriptor with O_NOFOLLOW: a
// directory swapped for a link meanwhile is removed as the link, never
// followed.
func (s *Service) removeTree(parent int, name string, depth int, seen *int) (int, error) {
	if depth > maxDeleteDepth {
		return 0, errf(http.StatusConflict, "too_deep", "more than %d nested directories: remove the deepest part first", maxDeleteDepth)
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		// No longer a directory (a link put in its place): the name goes.
		if err := unix.Unlinkat(parent, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return 0, err
		}
		return 1, nil
	}
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if s.containsState(&st) {
		return 0, s.stateErr(name)
	}
	n := 0
	for {
		names, rerr := d.Readdirnames(256)
		for _, c := range names {
			if *seen++; *seen > maxDeleteEntries {
				return n, errf(http.StatusConflict, "too_many_entries", "more than %d entries: something keeps making them", maxDeleteEntries)
			}
			var cst unix.Stat_t
			if err := unix.Fstatat(fd, c, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue
			}
			if cst.Mode&unix.S_IFMT == unix.S_IFDIR {
				m, err := s.removeTree(fd, c, depth+1, seen)
				n += m
				if err != nil {
					return n, err
				}
				continue
			}
			if err := unix.Unlinkat(fd, c, 0); err == nil {
				n++
			} else if errors.Is(err, unix.EISDIR) {
				m, err := s.removeTree(fd, c, depth+1, seen)
				n += m
				if err != nil {
					return n, err
				}
			}
		}
		if rerr != nil || len(names) == 0 {
			break
		}
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return n, err
	}
	return n + 1, nil
}
