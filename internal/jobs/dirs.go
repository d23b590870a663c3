package jobs

import (
	"os"
	"path/filepath"

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

// openJobDirs opens and checks req's cwd and HOME.
func (s *Service) openJobDirs(req RunRequest) (_ *jobDirs, err error) {
	d := &jobDirs{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	cwd := req.Cwd
	if cwd == "" {
		cwd = s.cfg.Home
	}
	if fi, err := os.Stat(cwd); err != nil {
		return nil, errorf(ErrInvalidCwd, "cwd %q does not exist", cwd)
	} else if !fi.IsDir() {
		return nil, errorf(ErrInvalidCwd, "cwd %q is not a directory", cwd)
	}
	if d.cwd, err = isolation.OpenDir(cwd); err != nil {
		return nil, errorf(ErrInvalidCwd, "cwd %q: %v", cwd, err)
	}
	if d.cwdReal, err = isolation.HandlePath(d.cwd); err != nil {
		return nil, errorf(ErrInvalidCwd, "cwd %q: %v", cwd, err)
	}
	root := s.cfg.WorkspaceRoot
	if root != "" && !Within(d.cwdReal, root) {
		return nil, errorf(ErrCwdNotAllowed, "cwd %q (really %q) is outside the workspace root %q", cwd, d.cwdReal, root)
	}
	if Within(s.stateReal, d.cwdReal) {
		return nil, errorf(ErrCwdNotAllowed, "cwd %q (really %q) contains the server's state dir, which no job may reach: pick a directory outside %s", cwd, d.cwdReal, s.stateReal)
	}

	home := isolation.JobHome(req.Env, s.cfg.Home)
	_, homeAsked := req.Env["HOME"]
	// The server's own $HOME is the operator's choice; a HOME the request
	// names must lie within the workspace root, as its cwd must.
	checkRoot := root != "" && homeAsked
	if checkRoot {
		// Before anything is made for it: a HOME that does not exist yet
		// is judged by its nearest existing ancestor.
		if err := homeWithin(home, root); err != nil {
			return nil, err
		}
	}
	if !filepath.IsAbs(home) {
		return nil, errorf(ErrInvalidCwd, "HOME %q is not an absolute path", home)
	}
	if home == cwd && filepath.IsAbs(home) {
		// The usual case (both the server's $HOME): the directory opened
		// and checked as the cwd is the HOME too, one handle for both.
		d.home, d.homeReal, d.homeName = d.cwd, d.cwdReal, home
		if checkRoot && !Within(d.homeReal, root) {
			return nil, errorf(ErrCwdNotAllowed, "HOME %q (really %q) is outside the workspace root %q", home, d.homeReal, root)
		}
		return d, nil
	}
	if err := isolation.EnsureHome(home); err != nil {
		return nil, errorf(ErrInvalidCwd, "HOME %q: %v", home, err)
	}
	if d.home, err = isolation.OpenDir(home); err != nil {
		return nil, errorf(ErrInvalidCwd, "HOME %q: %v", home, err)
	}
	if d.homeReal, err = isolation.HandlePath(d.home); err != nil {
		return nil, errorf(ErrInvalidCwd, "HOME %q: %v", home, err)
	}
	if checkRoot && !Within(d.homeReal, root) {
		return nil, errorf(ErrCwdNotAllowed, "HOME %q (really %q) is outside the workspace root %q", home, d.homeReal, root)
	}
	if Within(s.stateReal, d.homeReal) {
		return nil, errorf(ErrCwdNotAllowed, "HOME %q (really %q) contains the server's state dir, which no job may reach: pick a directory outside %s", home, d.homeReal, s.stateReal)
	}
	// The job's environment keeps HOME as the request named it.
	d.homeName = home
	return d, nil
}
