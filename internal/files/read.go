package files

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/httperr"
)

// Stat is the answer of stat, and an entry of list (without path).
type Stat struct {
	Path       string `json:"path,omitempty"`
	Name       string `json:"name,omitempty"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	Mtime      string `json:"mtime"`
	LinkTarget string `json:"link_target,omitempty"`
}

func statOf(st *unix.Stat_t) Stat {
	return Stat{
		Type:  kindName(st.Mode),
		Size:  st.Size,
		Mode:  fmt.Sprintf("%04o", st.Mode&0o7777),
		Mtime: mtime(st).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	}
}

func mtime(st *unix.Stat_t) time.Time { return time.Unix(st.Mtim.Sec, st.Mtim.Nsec) }

// etag names one version of a file: inode, size and mtime.
func etag(st *unix.Stat_t) string {
	return fmt.Sprintf(`"%x-%x-%x"`, st.Ino, st.Size, mtime(st).UnixNano())
}

func (s *Service) stat(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	follow, err := boolParam(r, "follow", true)
	if err != nil {
		return err
	}
	p, err := s.resolve(path, resolveOpts{followLast: follow})
	if err != nil {
		return err
	}
	defer p.close()
	st, err := p.lstat()
	if err != nil {
		return s.statErr(p, err)
	}
	if s.isState(&st) {
		return s.stateErr(path)
	}
	out := statOf(&st)
	out.Path, _ = s.absPath(path)
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if out.LinkTarget, err = readlinkAt(p.pfd(), p.name); err != nil {
			return s.statErr(p, err)
		}
	}
	httperr.WriteJSON(w, http.StatusOK, out)
	return nil
}

// List bounds: the entries answered (limit) and the names read to sort
// them, so a directory of millions of entries cannot hold the server.
const (
	defaultListLimit = 1000
	maxListLimit     = 10000
	maxListNames     = 200000
)

// ListAnswer is the answer of list.
type ListAnswer struct {
	Path      string `json:"path"`
	Entries   []Stat `json:"entries"`
	Truncated bool   `json:"truncated"`
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", defaultListLimit, 1, maxListLimit)
	if err != nil {
		return err
	}
	hidden, err := boolParam(r, "hidden", true)
	if err != nil {
		return err
	}
	p, err := s.resolve(path, resolveOpts{followLast: true})
	if err != nil {
		return err
	}
	defer p.close()
	d, _, err := s.openRead(p, true)
	if err != nil {
		return err
	}
	defer d.Close()
	out := ListAnswer{Entries: []Stat{}}
	out.Path, _ = s.absPath(path)
	var names []string
	for len(names) < maxListNames {
		batch, err := d.Readdirnames(1024)
		for _, n := range batch {
			if hidden || !strings.HasPrefix(n, ".") {
				names = append(names, n)
			}
		}
		if err != nil || len(batch) == 0 {
			break
		}
	}
	if len(names) >= maxListNames {
		out.Truncated = true
	}
	sort.Strings(names)
	if int64(len(names)) > limit {
		names, out.Truncated = names[:limit], true
	}
	dfd := int(d.Fd())
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed meanwhile
		}
		e := statOf(&st)
		e.Name = n
		out.Entries = append(out.Entries, e)
	}
	httperr.WriteJSON(w, http.StatusOK, out)
	return nil
}

// get answers a regular file's bytes, with Range and ETag.
func (s *Service) get(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	if strings.Contains(r.Header.Get("Range"), ",") {
		return errf(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", "Range %q asks for several ranges: ask for one (bytes=START-END)", r.Header.Get("Range"))
	}
	p, f, st, err := s.openFollowed(path, false)
	if err != nil {
		return err
	}
	defer p.close()
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("ETag", etag(&st))
	// ServeContent answers Range (one range: 206, or 416), If-Match,
	// If-None-Match and If-Range from the ETag, and sends at most the
	// size it found.
	http.ServeContent(w, r, "", mtime(&st), f)
	return nil
}
