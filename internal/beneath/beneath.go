// Package beneath resolves directory paths for the server into open
// handles without ever being led somewhere a link planted by a job could
// take it: beneath a root's handle (links may move within the root, never
// out of it), or following no link at all. It also tells, by device and
// inode, whether one directory lies within another.
//
// The server is unconfined and runs a job in whatever directory a request
// names; a job can write its own Home (and its cwd), so any link there may
// be a job's. Resolving a name once into a handle, and using only that
// handle afterwards, also keeps a link swapped during the request from
// changing what was checked.
package beneath

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// maxLinks is how many links one resolution follows before it gives up:
// the kernel's own limit (MAXSYMLINKS), so a loop of links ends the same
// way here as in any open.
const maxLinks = 40

// Root is a directory handle that paths are resolved beneath, with the
// names by which absolute paths (and absolute link targets) may refer to
// it: the name it was opened by and where it really is.
type Root struct {
	FD    int
	Names []string // clean absolute names of the root, the first for messages
}

// Name is the root's name for messages.
func (r Root) Name() string {
	if len(r.Names) == 0 {
		return "/"
	}
	return r.Names[0]
}

// Rel returns p (absolute) relative to r when p names r or lies
// lexically beneath one of its names; the length of the matched name in
// components tells the innermost of several roots. ".." components are
// kept, not folded: they are resolved beneath the root, where they cannot
// climb out.
func (r Root) Rel(p string) (rel string, depth int, ok bool) {
	comps := split(p)
	best := -1
	for _, n := range r.Names {
		nc := split(n)
		if len(nc) > len(comps) || len(nc) <= best {
			continue
		}
		match := true
		for i := range nc {
			if comps[i] != nc[i] {
				match = false
				break
			}
		}
		if match {
			best = len(nc)
			rel = strings.Join(comps[len(nc):], "/")
		}
	}
	if best < 0 {
		return "", 0, false
	}
	return rel, best, true
}

// split is p's components without empty and "." ones; ".." is kept.
func split(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// ErrEscape marks a path that leads out of its root (through a link or
// through ".."), ErrLink one that passes through a link where none may be
// followed. Both are a refusal of the path, not a failure to find it.
var (
	ErrEscape = errors.New("leads out of its root")
	ErrLink   = errors.New("passes through a symbolic link")
)

// LinkError says which link (or "..") made a path unusable.
type LinkError struct {
	Path   string // the path asked for
	Root   string // the root it was resolved beneath ("/" with no links)
	Link   string // the link met, as a path from the root's name ("" for "..")
	Target string // what the link holds
	Kind   error  // ErrEscape or ErrLink
}

func (e *LinkError) Error() string {
	switch {
	case e.Kind == ErrLink:
		return fmt.Sprintf("%s passes through the symbolic link %s (-> %s), and no link is followed outside Home and the workspace root (a job could have planted it): give the directory's real path", e.Path, e.Link, e.Target)
	case e.Link == "":
		return fmt.Sprintf("%s leads out of %s through \"..\": give a path that stays within it", e.Path, e.Root)
	default:
		return fmt.Sprintf("%s passes through the symbolic link %s (-> %s), which leads out of %s; links beneath it are followed only while they stay within it (a job could have planted this one): give the directory's real path", e.Path, e.Link, e.Target, e.Root)
	}
}

func (e *LinkError) Unwrap() error { return e.Kind }

// join is root name + components, for messages.
func join(root string, comps []string) string {
	return filepath.Join(append([]string{root}, comps...)...)
}
