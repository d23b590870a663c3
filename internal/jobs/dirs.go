package jobs

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/shellctl/shellctl/internal/beneath"
	"github.com/shellctl/shellctl/internal/isolation"
)

// jobDirs are a job's cwd and HOME, each resolved once into an open
// directory handle. The --workspace-root check, the state dir check, the
// Landlock rules (made by the stage from these very handles), the job's
// working directory (fchdir) and what the record shows all come from them:
// a symlink swapped while the request is served changes nothing.
type jobDirs struct {
	cwd, home         *os.File
	cwdReal, homeReal string // where the handles really are
	homeName          string // the job's $HOME as its environment names it
}

func (d *jobDirs) close() {
	if d.cwd != nil {
		d.cwd.Close()
	}
	if d.home != nil && d.home != d.cwd {
		d.home.Close()
	}
}

// homePerm is the mode of a job's HOME made for it (0755, whatever the
// umask), as isolation.EnsureHome makes it.
const homePerm = 0o755

// dirRoots are the directories a job's cwd and HOME are resolved beneath,
// opened for one request: the server's Home, the workspace root and, for
// the cwd, the job's HOME. A job may write each of them, so a link in one
// may be a job's: it is followed only while it stays within.
type dirRoots struct {
	list  []beneath.Root
	ws    *beneath.Root // the workspace root, if any (also in list)
	state []beneath.ID  // the state dir and every directory above it
}

func (r *dirRoots) close() {
	for i := range r.list {
		r.list[i].Close()
	}
}

// openRoots opens the server's Home and the workspace root (by their
// configured names, following links: where they lead is the operator's
// choice), at each request: a Home made again after the server started is
// the one used.
func (s *Service) openRoots() (_ *dirRoots, err error) {
	r := &dirRoots{}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	r.state = s.stateChain
	if s.cfg.Home != "" && filepath.IsAbs(s.cfg.Home) {
		// A Home that cannot be opened is no root; a cwd under it then is
		// resolved with no link followed, and a run with no cwd fails
		// to open it below.
		if h, err := beneath.OpenRoot(s.cfg.Home, s.homeNames); err == nil {
			r.list = append(r.list, h)
		}
	}
	if ws := s.cfg.WorkspaceRoot; ws != "" {
		w, err := beneath.OpenRoot(ws, s.wsNames)
		if err != nil {
			return nil, errorf(ErrCwdNotAllowed, "workspace root %s: %v", ws, err)
		}
		r.list = append(r.list, w)
		r.ws = &r.list[len(r.list)-1]
	}
	return r, nil
}

// open resolves path (absolute) into a directory handle: beneath the
// innermost of roots whose name it starts with, following links only
// while they stay within it and never climbing out by ".."; a path under
// no root is opened following no link at all. what ("cwd", "HOME") names
// it in errors: a link or ".." that leads out, or any link outside the
// roots, is ErrCwdNotAllowed (403), a path that is missing or not a
// directory ErrInvalidCwd.
func openDir(what, path string, roots []beneath.Root, o beneath.Options) (*os.File, error) {
	var root *beneath.Root
	rel, best := "", -1
	for i := range roots {
		if r, depth, ok := roots[i].Rel(path); ok && depth > best {
			root, rel, best = &roots[i], r, depth
		}
	}
	if root == nil {
		fs, err := beneath.FSRoot()
		if err != nil {
			return nil, errorf(ErrInvalidCwd, "%s %q: %v", what, path, err)
		}
		defer fs.Close()
		root, rel = &fs, path
		o.NoLinks = true
	}
	f, err := beneath.Open(*root, path, rel, o)
	if err != nil {
		if errors.Is(err, beneath.ErrEscape) || errors.Is(err, beneath.ErrLink) {
			return nil, errorf(ErrCwdNotAllowed, "%s %v", what, err)
		}
		var ke *kindError
		if errors.As(err, &ke) {
			return nil, ke // refused by BeforeCreate
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, errorf(ErrInvalidCwd, "%s %q does not exist (%v)", what, path, err)
		}
		return nil, errorf(ErrInvalidCwd, "%s %v", what, err)
	}
	return f, nil
}

// checkPlace refuses a handle that is the state dir, lies inside it or
// contains it, and, when ws is set, one outside the workspace root; all by
// device and inode from the handle and the directories above it, never by
// name (a bind mount or another name of the state dir is seen as well).
func checkPlace(what, asked, real string, h *os.File, roots *dirRoots, ws bool, stateReal string) error {
	chain, err := beneath.Chain(int(h.Fd()))
	if err != nil {
		return errorf(ErrCwdNotAllowed, "%s %q (really %q): cannot tell whether it lies in the server's state dir (%v): pick another directory", what, asked, real, err)
	}
	if beneath.Contains(chain, roots.state[0]) {
		return errorf(ErrCwdNotAllowed, "%s %q (really %q) is the server's state dir or lies inside it, which no job may reach: pick a directory outside %s", what, asked, real, stateReal)
	}
	if beneath.Contains(roots.state, chain[0]) {
		return errorf(ErrCwdNotAllowed, "%s %q (really %q) contains the server's state dir, which no job may reach: pick a directory outside %s", what, asked, real, stateReal)
	}
	if ws && roots.ws != nil {
		wid, err := beneath.IDOf(roots.ws.FD)
		if err != nil || !beneath.Contains(chain, wid) {
			return errorf(ErrCwdNotAllowed, "%s %q (really %q) is outside the workspace root %q", what, asked, real, roots.ws.Name())
		}
	}
	return nil
}

// openJobDirs opens and checks req's cwd and HOME. HOME comes first: a cwd
// beneath the job's HOME is resolved beneath its handle (a job writes its
// HOME, so a link there may be the job's).
func (s *Service) openJobDirs(req RunRequest) (_ *jobDirs, err error) {
	d := &jobDirs{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	roots, err := s.openRoots()
	if err != nil {
		return nil, err
	}
	defer roots.close()

	home := isolation.JobHome(req.Env, s.cfg.Home)
	_, homeAsked := req.Env["HOME"]
	// The server's own $HOME is the operator's choice; a HOME the request
	// names must lie within the workspace root, as its cwd must: by name
	// first, before anything is made for it, then by the handle.
	checkWS := roots.ws != nil && homeAsked
	if checkWS {
		if _, _, ok := roots.ws.Rel(home); !ok {
			return nil, errorf(ErrCwdNotAllowed, "HOME %q is outside the workspace root %q", home, roots.ws.Name())
		}
	}
	if !filepath.IsAbs(home) {
		return nil, errorf(ErrInvalidCwd, "HOME %q is not an absolute path", home)
	}
	d.homeName = home
	// A missing HOME is made (0755), beneath its root like the rest, and
	// never inside the state dir: each directory it is made in is checked
	// first.
	refuseState := func(parent int) error {
		chain, err := beneath.Chain(parent)
		if err != nil || beneath.Contains(chain, roots.state[0]) {
			return errorf(ErrCwdNotAllowed, "HOME %q would be made inside the server's state dir, which no job may reach: pick a directory outside %s", home, s.stateReal)
		}
		return nil
	}
	if d.home, err = openDir("HOME", home, roots.list, beneath.Options{Create: true, Perm: homePerm, BeforeCreate: refuseState}); err != nil {
		return nil, err
	}
	if d.homeReal, err = isolation.HandlePath(d.home); err != nil {
		return nil, errorf(ErrInvalidCwd, "HOME %q: %v", home, err)
	}
	if err := checkPlace("HOME", home, d.homeReal, d.home, roots, checkWS, s.stateReal); err != nil {
		return nil, err
	}

	cwd := req.Cwd
	if cwd == "" {
		cwd = s.cfg.Home
	}
	if cwd == home {
		// The usual case (both the server's $HOME): the directory opened
		// and checked as the HOME is the cwd too, one handle for both;
		// only the workspace root is still to check, which binds a cwd
		// always.
		d.cwd, d.cwdReal = d.home, d.homeReal
		if roots.ws != nil && !checkWS {
			return d, checkPlace("cwd", cwd, d.cwdReal, d.cwd, roots, true, s.stateReal)
		}
		return d, nil
	}
	if !filepath.IsAbs(cwd) {
		return nil, errorf(ErrInvalidCwd, "cwd %q is not an absolute path", cwd)
	}
	// The job's HOME is a root for the cwd: by the name it was asked
	// with and where its handle really is.
	homeRoot := beneath.Root{FD: int(d.home.Fd()), Names: []string{filepath.Clean(home)}}
	if d.homeReal != homeRoot.Names[0] {
		homeRoot.Names = append(homeRoot.Names, d.homeReal)
	}
	if d.cwd, err = openDir("cwd", cwd, append(roots.list[:len(roots.list):len(roots.list)], homeRoot), beneath.Options{}); err != nil {
		return nil, err
	}
	if d.cwdReal, err = isolation.HandlePath(d.cwd); err != nil {
		return nil, errorf(ErrInvalidCwd, "cwd %q: %v", cwd, err)
	}
	if err := checkPlace("cwd", cwd, d.cwdReal, d.cwd, roots, true, s.stateReal); err != nil {
		return nil, err
	}
	return d, nil
}
