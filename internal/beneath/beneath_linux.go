package beneath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Options change how Open resolves.
type Options struct {
	// NoLinks: follow no link at all (every link is an ErrLink).
	NoLinks bool
	// Create makes each missing directory on the way (Perm, whatever the
	// umask), beneath the root like everything else.
	Create bool
	Perm   uint32
	// BeforeCreate, when set, is asked before a directory is made in
	// parent (a handle); its error stops the resolution and nothing is
	// made. It lets the caller refuse to write where it must not (the
	// state dir) before anything is written.
	BeforeCreate func(parent int) error
}

// OpenRoot opens path as a root, following links in it: the root is the
// operator's choice (a Home that is a link to elsewhere stays usable),
// what lies beneath it is not. names are the root's names for matching
// (see Root); nil means path and where the handle really is, found now.
func OpenRoot(path string, names []string) (Root, error) {
	path = filepath.Clean(path)
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Root{FD: -1}, fmt.Errorf("open %s: %w", path, err)
	}
	if names == nil {
		names = []string{path}
		if real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && filepath.IsAbs(real) && real != path {
			names = append(names, filepath.Clean(real))
		}
	}
	return Root{FD: fd, Names: names}, nil
}

// RootNames are path's names as a root: path and, when it differs, where
// its links lead (for a caller that opens the same root often and names
// it once).
func RootNames(path string) []string {
	r, err := OpenRoot(path, nil)
	if err != nil {
		return []string{filepath.Clean(path)}
	}
	defer r.Close()
	return r.Names
}

// FSRoot is "/" as a root, for paths that lie under no other root: only
// useful with Options.NoLinks.
func FSRoot() (Root, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Root{FD: -1}, fmt.Errorf("open /: %w", err)
	}
	return Root{FD: fd, Names: []string{"/"}}, nil
}

// Close closes the root's handle.
func (r *Root) Close() {
	if r.FD >= 0 {
		unix.Close(r.FD)
		r.FD = -1
	}
}

func (r Root) isFS() bool { return r.Name() == "/" }

// Open resolves rel beneath r into a directory handle (O_PATH) named
// asked (the path as the caller gave it, for messages and the handle's
// name). Links are followed while they stay beneath r — an absolute one
// too, when it names a place beneath one of r's names — and never out of
// it; ".." never climbs above r. With o.NoLinks no link is followed.
//
// The kernel does it in one openat2 (RESOLVE_BENEATH) in the common case.
// RESOLVE_BENEATH refuses every absolute link, even one that stays within
// the root ("ln -s $HOME/src $HOME/proj", virtualenvs and package managers
// make them), so when openat2 refuses, the path is walked one component at
// a time instead, each opened O_NOFOLLOW beneath the handle of its parent,
// following links ourselves; the walk also names the link that was
// refused.
func Open(r Root, asked, rel string, o Options) (*os.File, error) {
	res := uint64(unix.RESOLVE_NO_MAGICLINKS)
	if !r.isFS() {
		res |= unix.RESOLVE_BENEATH
	}
	if o.NoLinks {
		res |= unix.RESOLVE_NO_SYMLINKS
	}
	p := rel
	if p == "" {
		p = "."
	}
	fd, err := unix.Openat2(r.FD, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: res})
	if err == nil {
		return os.NewFile(uintptr(fd), asked), nil
	}
	// Any refusal (a link out, an absolute link, "..", a concurrent
	// rename: EAGAIN), or a missing directory: walk, which says which.
	return walk(r, asked, rel, o)
}

// maxSteps bounds one walk: components of a path of PATH_MAX bytes plus
// those maxLinks links may add, with room to spare.
const maxSteps = 4 * 4096

type frame struct {
	fd   int
	name string
}

func walk(r Root, asked, rel string, o Options) (_ *os.File, err error) {
	top, err := unix.Openat(r.FD, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", asked, r.Name(), err)
	}
	stack := []frame{{fd: top}}
	defer func() {
		for _, f := range stack {
			unix.Close(f.fd)
		}
	}()
	names := func(extra string) string {
		comps := make([]string, 0, len(stack))
		for _, f := range stack[1:] {
			comps = append(comps, f.name)
		}
		if extra != "" {
			comps = append(comps, extra)
		}
		return join(r.Name(), comps)
	}
	todo := split(rel)
	links, steps := 0, 0
	for len(todo) > 0 {
		// Bounded: a directory made for Create and removed again before
		// it is opened (by a job racing us) must not keep us here.
		if steps++; steps > maxSteps {
			return nil, fmt.Errorf("%s: more than %d steps to resolve (a directory keeps vanishing?): %w", asked, maxSteps, unix.ELOOP)
		}
		c := todo[0]
		todo = todo[1:]
		cur := stack[len(stack)-1].fd
		if c == ".." {
			if len(stack) == 1 {
				if r.isFS() {
					continue // "/.." is "/"
				}
				return nil, &LinkError{Path: asked, Root: r.Name(), Kind: ErrEscape}
			}
			unix.Close(cur)
			stack = stack[:len(stack)-1]
			continue
		}
		fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && o.Create {
			if err := mkdir(cur, c, o); err != nil {
				return nil, fmt.Errorf("%s: make %s: %w", asked, names(c), err)
			}
			todo = append([]string{c}, todo...) // and open it
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", asked, names(c), err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: %s: %w", asked, names(c), err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			stack = append(stack, frame{fd: fd, name: c})
		case unix.S_IFLNK:
			target, err := readlink(fd)
			unix.Close(fd)
			if err != nil {
				return nil, fmt.Errorf("%s: read the link %s: %w", asked, names(c), err)
			}
			if links++; links > maxLinks {
				return nil, fmt.Errorf("%s: more than %d symbolic links: %w", asked, maxLinks, unix.ELOOP)
			}
			link := names(c)
			if o.NoLinks {
				return nil, &LinkError{Path: asked, Root: r.Name(), Link: link, Target: target, Kind: ErrLink}
			}
			if filepath.IsAbs(target) {
				trel, _, ok := r.Rel(target)
				if !ok {
					return nil, &LinkError{Path: asked, Root: r.Name(), Link: link, Target: target, Kind: ErrEscape}
				}
				for _, f := range stack[1:] {
					unix.Close(f.fd)
				}
				stack = stack[:1]
				todo = append(split(trel), todo...)
			} else {
				todo = append(split(target), todo...)
			}
		default:
			unix.Close(fd)
			return nil, fmt.Errorf("%s: %s is not a directory: %w", asked, names(c), unix.ENOTDIR)
		}
	}
	last := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	return os.NewFile(uintptr(last.fd), asked), nil
}

// mkdir makes name in parent with o.Perm whatever the umask; a directory
// made meanwhile by someone else is fine (it is opened next, like any).
func mkdir(parent int, name string, o Options) error {
	if o.BeforeCreate != nil {
		if err := o.BeforeCreate(parent); err != nil {
			return err
		}
	}
	if err := unix.Mkdirat(parent, name, o.Perm); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return err
	}
	// The umask took bits away: put them back, on the directory just made
	// and never through a link put in its place.
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, o.Perm)
}

// readlink reads the link an O_PATH|O_NOFOLLOW handle holds.
func readlink(fd int) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(fd, "", buf)
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

// ID is a directory's identity: device and inode.
type ID struct{ Dev, Ino uint64 }

// IDOf is the identity of the file fd is open on.
func IDOf(fd int) (ID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return ID{}, err
	}
	return ID{Dev: st.Dev, Ino: st.Ino}, nil
}

// maxDepth bounds Chain: "../" repeated this often still fits in PATH_MAX
// (4096), and no real directory is that deep; a deeper one is refused.
const maxDepth = 4096/3 - 1

// Chain is the identity of fd's directory and of every directory above it
// up to the root of the filesystem (innermost first), found from the
// handle by "..", "../..", … (one fstatat each, no descriptor made),
// never by name: a bind mount or a link gives the same answer as the real
// path. ".." of a mount's root is the directory it is mounted on, so the
// chain crosses mounts.
func Chain(fd int) ([]ID, error) {
	id, err := IDOf(fd)
	if err != nil {
		return nil, err
	}
	chain := []ID{id}
	var up [3 * maxDepth]byte
	n := 0
	for range maxDepth {
		copy(up[n:], "../")
		n += 3
		var st unix.Stat_t
		if err := unix.Fstatat(fd, string(up[:n-1]), &st, 0); err != nil {
			return nil, fmt.Errorf("look at the directory %d levels above: %w", n/3, err)
		}
		uid := ID{Dev: st.Dev, Ino: st.Ino}
		if uid == chain[len(chain)-1] {
			return chain, nil // "/.." is "/"
		}
		chain = append(chain, uid)
	}
	return nil, fmt.Errorf("more than %d directories above it", maxDepth)
}

// Contains reports whether id is in chain.
func Contains(chain []ID, id ID) bool {
	for _, c := range chain {
		if c == id {
			return true
		}
	}
	return false
}
