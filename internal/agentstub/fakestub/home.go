package fakestub

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
)

// The Home Snapshot gateway of agent-cli-backend.md: PUT and GET of
// /agent-stub/home-snapshots/archive with purpose tokens, write-once
// storage per snapshot ref, and the gateway's failure modes.

const homeRoute = "/home-snapshots/archive"

// SetHomeArchive stores an archive under ref, as if uploaded.
func (s *Server) SetHomeArchive(ref string, data []byte) {
	s.mu.Lock()
	s.homes[ref] = append([]byte(nil), data...)
	s.mu.Unlock()
}

// HomeArchive returns the archive stored under ref.
func (s *Server) HomeArchive(ref string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.homes[ref]
	return b, ok
}

// HomeBytesReceived counts the bytes of every PUT body read so far.
func (s *Server) HomeBytesReceived() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.homeReceived }

// SetHostileTarget sets where the symlink of the "symlink-escape" hostile
// archive points (default /tmp/outside).
func (s *Server) SetHostileTarget(dir string) { s.mu.Lock(); s.hostileTarget = dir; s.mu.Unlock() }

func (s *Server) serveHome(w http.ResponseWriter, r *http.Request, route string) {
	s.record(r, nil)
	scope := ScopeHomeRead
	if r.Method == http.MethodPut {
		scope = ScopeHomeWrite
	}
	ref, ok := s.authPurpose(w, r, scope) // any snapshot_ref query is ignored
	if !ok || s.fault(w, r, route) {
		return
	}
	plain := func(status int, body string) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	switch {
	case s.mode("unconfigured"):
		s.writeDetail(w, http.StatusServiceUnavailable, "", "Home Snapshot gateway is not configured")
		return
	case s.mode("store-fail"):
		s.writeDetail(w, http.StatusBadGateway, "", "store unavailable")
		return
	case s.mode("redirect"):
		w.Header().Set("Location", baseURL(r)+recorderPrefix+"home")
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	case s.mode("400"):
		plain(http.StatusBadRequest, "bad request\n")
		return
	case s.mode("500"):
		plain(http.StatusInternalServerError, "internal server error\n")
		return
	case s.mode("stall"):
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/zstd")
			w.WriteHeader(http.StatusOK)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		s.wait(r, -1)
		return
	}
	if r.Method == http.MethodPut {
		s.putHome(w, r, ref)
	} else {
		s.getHome(w, r, ref)
	}
}

// countReader counts what is read into the server's received total.
type countReader struct {
	s *Server
	r io.Reader
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.s.mu.Lock()
	c.s.homeReceived += int64(n)
	c.s.mu.Unlock()
	return n, err
}

func (s *Server) putHome(w http.ResponseWriter, r *http.Request, ref string) {
	body := countReader{s: s, r: r.Body}
	if s.mode("store-fail-mid") {
		_, _ = io.CopyN(io.Discard, body, 1024)
		s.writeDetail(w, http.StatusBadGateway, "", "store unavailable")
		return
	}
	var buf bytes.Buffer
	_, err := io.Copy(&buf, body)
	if err != nil {
		// A broken request stream: the store writer is closed and the
		// partial object discarded.
		return
	}
	s.mu.Lock()
	_, exists := s.homes[ref]
	if !exists {
		s.homes[ref] = buf.Bytes()
	}
	s.mu.Unlock()
	if exists {
		s.writeDetail(w, http.StatusConflict, "", "object exists")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) getHome(w http.ResponseWriter, r *http.Request, ref string) {
	data, ok := s.HomeArchive(ref)
	if name, hostile := s.modeWithPrefix(HostilePrefix); hostile {
		s.mu.Lock()
		target := s.hostileTarget
		s.mu.Unlock()
		data, ok = HostileArchive(name, target), true
	}
	if s.mode("missing") || !ok {
		s.writeDetail(w, http.StatusNotFound, "", "snapshot is missing")
		return
	}
	switch {
	case s.mode("not-zstd"):
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(data)
		_ = zw.Close()
		data = gz.Bytes()
	case s.mode("tail-cut"):
		data = data[:len(data)-1]
	}
	w.Header().Set("Content-Type", "application/zstd")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if s.mode("truncate-download") {
		_, _ = w.Write(data[:len(data)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	for len(data) > 0 {
		n := min(len(data), 1<<20)
		if _, err := w.Write(data[:n]); err != nil {
			return
		}
		data = data[n:]
	}
}

// hostileBuilders make the crafted archives of the "hostile" mode: each
// adds its entries to tw; target is where an escaping symlink points.
var hostileBuilders = map[string]func(tw *tar.Writer, target string){
	"absolute":     func(tw *tar.Writer, _ string) { tarFile(tw, "/abs.txt", 0o644, "x") },
	"dotdot":       func(tw *tar.Writer, _ string) { tarFile(tw, "../x", 0o644, "x") },
	"inner-dotdot": func(tw *tar.Writer, _ string) { tarFile(tw, "a/../b", 0o644, "x") },
	"duplicate": func(tw *tar.Writer, _ string) {
		tarFile(tw, "dup.txt", 0o644, "one")
		tarFile(tw, "dup.txt", 0o644, "two")
	},
	"dir-twice": func(tw *tar.Writer, _ string) {
		tarEntry(tw, tar.TypeDir, "d/", "", 0o755)
		tarEntry(tw, tar.TypeDir, "d", "", 0o700)
	},
	"unclean": func(tw *tar.Writer, _ string) { tarFile(tw, "a//b", 0o644, "x") },
	"hardlink": func(tw *tar.Writer, _ string) {
		tarFile(tw, "a.txt", 0o644, "x")
		tarEntry(tw, tar.TypeLink, "b.txt", "a.txt", 0o644)
	},
	"hardlink-out": func(tw *tar.Writer, _ string) { tarEntry(tw, tar.TypeLink, "passwd", "/etc/passwd", 0o644) },
	"fifo":         func(tw *tar.Writer, _ string) { tarEntry(tw, tar.TypeFifo, "fifo", "", 0o644) },
	"chardev":      func(tw *tar.Writer, _ string) { tarEntry(tw, tar.TypeChar, "null", "", 0o666) },
	"setuid":       func(tw *tar.Writer, _ string) { tarFile(tw, "suid", 0o6755, "#!/bin/sh\n") },
	"readonly-dir": func(tw *tar.Writer, _ string) {
		tarEntry(tw, tar.TypeDir, "ro/", "", 0o555)
		tarFile(tw, "ro/child.txt", 0o644, "c")
	},
	"symlink-write": func(tw *tar.Writer, t string) {
		tarEntry(tw, tar.TypeSymlink, "l", t, 0o777)
		tarFile(tw, "l/f", 0o644, "pwned")
	},
}

// HostileArchiveNames lists the fixtures of the "hostile" mode.
func HostileArchiveNames() []string {
	var out []string
	for n := range hostileBuilders {
		out = append(out, n)
	}
	return out
}

// HostileArchive builds the tar+zstd fixture name ("" if unknown).
func HostileArchive(name, target string) []byte {
	b, ok := hostileBuilders[name]
	if !ok {
		return nil
	}
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	b(tw, target)
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

func tarEntry(tw *tar.Writer, typ byte, name, link string, mode int64) {
	_ = tw.WriteHeader(&tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: mode, ModTime: time.Unix(1767225600, 0)})
}

func tarFile(tw *tar.Writer, name string, mode int64, data string) {
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(1767225600, 0)})
	_, _ = io.WriteString(tw, data)
}
