package files

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Watch bounds: the directories one watcher watches (each holds an
// inotify watch and a descriptor) and the watchers at once.
const (
	maxWatchDirs = 4096
	maxWatchers  = 64
)

// watchMask: what is reported. IN_ONLYDIR: a watch is only ever put on a
// directory.
const watchMask = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// ChangeEvent is the data of one change event.
type ChangeEvent struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Type string `json:"type"`
}

type watchSet struct {
	s      *Service
	ino    int
	root   string // the watched path, absolute
	dirs   map[int]*watchDir
	byID   map[uint64]bool // dev<<32^ino of directories watched, against loops
	rec    bool
	warned bool
}

type watchDir struct {
	fd  int // O_PATH handle: new subdirectories are opened beneath it
	rel string
}

func (ws *watchSet) close() {
	for _, d := range ws.dirs {
		unix.Close(d.fd)
	}
}

// add watches dir (an open descriptor, kept) at rel and, when recursive,
// every directory beneath it, each opened beneath its parent with
// O_NOFOLLOW: a link swapped in is never followed. The watch is put on
// the descriptor's inode (/proc/self/fd), never on a name.
func (ws *watchSet) add(fd int, rel string, depth int) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || ws.s.isState(&st) || len(ws.dirs) >= maxWatchDirs || depth > maxArchiveDepth {
		unix.Close(fd)
		return
	}
	id := st.Dev<<32 ^ st.Ino
	if ws.byID[id] {
		unix.Close(fd)
		return
	}
	wd, err := unix.InotifyAddWatch(ws.ino, fmt.Sprintf("/proc/self/fd/%d", fd), watchMask)
	if err != nil {
		unix.Close(fd)
		return
	}
	ws.byID[id] = true
	if old, ok := ws.dirs[wd]; ok {
		unix.Close(old.fd)
	}
	ws.dirs[wd] = &watchDir{fd: fd, rel: rel}
	if !ws.rec {
		return
	}
	rd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(rd), rel)
	names, _ := f.Readdirnames(maxWatchDirs)
	f.Close()
	for _, n := range names {
		ws.addChild(fd, rel, n, depth)
	}
}

func (ws *watchSet) addChild(parent int, rel, name string, depth int) {
	sub, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	ws.add(sub, path.Join(rel, name), depth+1)
}

func (s *Service) watch(w http.ResponseWriter, r *http.Request) error {
	p0, err := pathParam(r)
	if err != nil {
		return err
	}
	rec, err := boolParam(r, "recursive", true)
	if err != nil {
		return err
	}
	if !s.watchers.TryAcquire(1) {
		return errf(http.StatusTooManyRequests, "too_many_watchers", "%d watches are open, the most at once: close one first", maxWatchers)
	}
	defer s.watchers.Release(1)
	p, err := s.resolve(p0, resolveOpts{followLast: true})
	if err != nil {
		return err
	}
	defer p.close()
	d, _, err := s.openRead(p, true)
	if err != nil {
		return err
	}
	top, err := unix.Openat(int(d.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	d.Close()
	if err != nil {
		return s.statErr(p, err)
	}
	ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		unix.Close(top)
		return errf(http.StatusServiceUnavailable, "busy", "inotify: %v (the system's inotify limits)", err)
	}
	inf := os.NewFile(uintptr(ino), "inotify") // reads wait in the poller
	abs, _ := s.absPath(p0)
	ws := &watchSet{s: s, ino: ino, root: abs, dirs: map[int]*watchDir{}, byID: map[uint64]bool{}, rec: rec}
	defer func() { ws.close(); inf.Close() }()
	ws.add(top, "", 0)
	if len(ws.dirs) == 0 {
		return errf(http.StatusConflict, "changed", "%s could not be watched: try again", p0)
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, v any) error {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send("ready", map[string]any{"path": p0, "dirs": len(ws.dirs)}) != nil {
		return nil
	}
	// The read ends when the client goes or the server stops: the
	// inotify file is closed, which wakes the read.
	var once sync.Once
	stop := func() { once.Do(func() { inf.SetReadDeadline(pastTime) }) }
	go func() {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		stop()
	}()
	defer stop()
	buf := make([]byte, 64<<10)
	for {
		n, err := inf.Read(buf)
		if err != nil {
			return nil
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				for i, c := range raw {
					if c == 0 {
						raw = raw[:i]
						break
					}
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				if send("overflow", map[string]string{"path": p0, "hint": "events were lost: list the directory again"}) != nil {
					return nil
				}
				continue
			}
			dir := ws.dirs[int(ev.Wd)]
			if dir == nil || name == "" {
				if dir != nil && ev.Mask&unix.IN_DELETE_SELF != 0 {
					unix.Close(dir.fd)
					delete(ws.dirs, int(ev.Wd))
				}
				continue
			}
			typ := "file"
			if ev.Mask&unix.IN_ISDIR != 0 {
				typ = "dir"
			}
			op := ""
			switch {
			case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
				op = "create"
				if typ == "dir" && rec {
					ws.addChild(dir.fd, dir.rel, name, 0)
				}
			case ev.Mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
				op = "write"
			case ev.Mask&unix.IN_DELETE != 0:
				op = "remove"
			case ev.Mask&unix.IN_MOVED_FROM != 0:
				op = "rename"
			default:
				continue
			}
			if send("change", ChangeEvent{Op: op, Path: path.Join(ws.root, dir.rel, name), Type: typ}) != nil {
				return nil
			}
			if op == "create" && typ == "dir" && rec {
				// What was made in it before its watch was in place.
				for _, c := range ws.early(dir.fd, name) {
					c.Path = path.Join(ws.root, dir.rel, name, c.Path)
					if send("change", c) != nil {
						return nil
					}
				}
			}
		}
	}
}

// pastTime, as a read deadline, wakes a waiting read at once.
var pastTime = time.Unix(1, 0)

// maxEarly bounds the entries reported of a directory made under a
// watch before its own watch was in place.
const maxEarly = 256

// early lists a directory just made (name in parent) as create events.
func (ws *watchSet) early(parent int, name string) []ChangeEvent {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, _ := f.Readdirnames(maxEarly)
	out := make([]ChangeEvent, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		typ := "file"
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			typ = "dir"
		}
		out = append(out, ChangeEvent{Op: "create", Path: n, Type: typ})
	}
	return out
}
