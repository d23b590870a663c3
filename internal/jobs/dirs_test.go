package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// openJobDirs decides every cwd and HOME by the handle it opens: beneath
// Home (links within followed, out refused), no link outside Home, never
// in, at or above the state dir, and a missing HOME made only where it may.
func TestOpenJobDirs(t *testing.T) {
	s := newTestService(t)
	home, state := s.cfg.Home, s.cfg.StateDir
	base := filepath.Dir(home)
	outside := filepath.Join(base, "outside")
	for _, d := range []string{outside, home + "/real/sub"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		home + "/project": outside,
		home + "/inner":   home + "/real",
		home + "/rel":     "real/sub",
		outside + "/link": home,
	} {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		cwd, home string
		want      string // the cwd reached, or "" for an error of kind
		kind      error
	}{
		{"default", "", "", home, nil},
		{"link within Home", home + "/inner", "", home + "/real", nil},
		{"relative link within Home", home + "/rel", "", home + "/real/sub", nil},
		{"plain elsewhere", outside, "", outside, nil},
		{"link out of Home", home + "/project", "", "", ErrCwdNotAllowed},
		{"below a link out of Home", home + "/project/x", "", "", ErrCwdNotAllowed},
		{"dotdot out of Home", home + "/../outside", "", "", ErrCwdNotAllowed},
		{"a link elsewhere", outside + "/link", "", "", ErrCwdNotAllowed},
		{"HOME through a link out", "", home + "/project", "", ErrCwdNotAllowed},
		{"cwd beneath the job's HOME, a link out of it", home + "/real/../project", home + "/real", "", ErrCwdNotAllowed},
		{"state", state, "", "", ErrCwdNotAllowed},
		{"inside state", state + "/jobs", "", "", ErrCwdNotAllowed},
		{"above state", filepath.Dir(state), "", "", ErrCwdNotAllowed},
		{"HOME inside state", "", state + "/jobs", "", ErrCwdNotAllowed},
		{"HOME to be made inside state", "", state + "/jobs/new", "", ErrCwdNotAllowed},
		{"missing", home + "/missing", "", "", ErrInvalidCwd},
		{"relative HOME", "", "rel/home", "", ErrInvalidCwd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := RunRequest{Cwd: tc.cwd}
			if tc.home != "" {
				req.Env = map[string]string{"HOME": tc.home}
			}
			d, err := s.openJobDirs(req)
			if tc.kind != nil {
				if !errors.Is(err, tc.kind) {
					t.Fatalf("openJobDirs(cwd %q, HOME %q) = %v, want %v", tc.cwd, tc.home, err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatalf("openJobDirs(cwd %q, HOME %q) = %v", tc.cwd, tc.home, err)
			}
			defer d.close()
			want, _ := filepath.EvalSymlinks(tc.want)
			if d.cwdReal != want {
				t.Fatalf("cwd %q really is %q, want %q", tc.cwd, d.cwdReal, want)
			}
		})
	}
	if _, err := os.Lstat(state + "/jobs/new"); err == nil {
		t.Error("a refused HOME was made in the state dir")
	}
}

// The cost of resolving and checking a run's cwd and HOME (the usual
// case: both the server's Home), on the path of every job.
func BenchmarkOpenJobDirs(b *testing.B) {
	s := newTestService(b)
	for b.Loop() {
		d, err := s.openJobDirs(RunRequest{})
		if err != nil {
			b.Fatal(err)
		}
		d.close()
	}
}
