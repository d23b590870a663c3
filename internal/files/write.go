package files

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/httperr"
)

// PutAnswer is the answer of PUT content.
type PutAnswer struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// cond is what must hold of the target just before it is replaced.
type cond struct {
	ifMatch     string // an ETag the current file must have ("" none)
	ifNoneMatch bool   // the target must not exist
	mode        uint32
	modeGiven   bool
}

// existing is the target as it is now (exists false when missing),
// refused when it is not a regular file or is the state dir.
func (s *Service) existing(p *place) (unix.Stat_t, bool, error) {
	st, err := p.lstat()
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, s.statErr(p, err)
	}
	if err := s.checkKind(p, &st, false); err != nil {
		return st, true, err
	}
	return st, true, nil
}

// check applies c to the target as it is now.
func (s *Service) check(p *place, c cond) (unix.Stat_t, bool, error) {
	st, exists, err := s.existing(p)
	if err != nil {
		return st, exists, err
	}
	if c.ifNoneMatch && exists {
		return st, exists, errf(http.StatusPreconditionFailed, "precondition_failed", "%s exists and If-None-Match: * was given: leave the header out to replace it", p.asked)
	}
	if c.ifMatch != "" {
		if !exists {
			return st, exists, errf(http.StatusPreconditionFailed, "precondition_failed", "%s does not exist, and If-Match %s was given: it names no version", p.asked, c.ifMatch)
		}
		if !etagMatch(c.ifMatch, etag(&st)) {
			return st, exists, errf(http.StatusPreconditionFailed, "precondition_failed", "%s changed: its ETag is %s, If-Match asked for %s; read it again and redo the change", p.asked, etag(&st), c.ifMatch)
		}
	}
	return st, exists, nil
}

func etagMatch(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == tag || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}

// writeAtomic writes body into a new file beside the target (O_EXCL, no
// link followed), fsyncs it and renames it over the target, so a reader
// sees the old file or the new one, never half. More than max bytes: 413,
// and the temporary file is removed.
func (s *Service) writeAtomic(p *place, body io.Reader, max int64, c cond) (PutAnswer, bool, error) {
	if p.name == "." {
		return PutAnswer{}, false, errf(http.StatusConflict, "not_a_regular_file", "%s is a directory (a file root): give a file's path", p.asked)
	}
	st, exists, err := s.check(p, c)
	if err != nil {
		return PutAnswer{}, exists, err
	}
	mode := c.mode
	if !c.modeGiven {
		mode = 0o644
		if exists {
			mode = st.Mode & 0o7777
		}
	}
	tmp, fd, err := s.createTemp(p, mode)
	if err != nil {
		return PutAnswer{}, exists, err
	}
	f := os.NewFile(uintptr(fd), tmp)
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = unix.Unlinkat(p.pfd(), tmp, 0)
		}
	}()
	// Owned as the file it replaces, else as its directory: a root server
	// writing into a user's Home leaves files the user owns.
	owner := st
	if !exists {
		_ = unix.Fstat(p.pfd(), &owner)
	}
	_ = unix.Fchown(fd, int(owner.Uid), int(owner.Gid))
	if err := unix.Fchmod(fd, mode); err != nil {
		return PutAnswer{}, exists, s.statErr(p, err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	n, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(body, max+1), buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return PutAnswer{}, exists, errf(http.StatusRequestTimeout, "request_timeout", "%s: the body stalled longer than the server's --body-read-timeout: nothing was written; send it again", p.asked)
	}
	if err != nil {
		return PutAnswer{}, exists, errf(http.StatusBadRequest, "invalid_request", "%s: the body was not read to its end (%v): nothing was written; send it again", p.asked, err)
	}
	if n > max {
		return PutAnswer{}, exists, errf(http.StatusRequestEntityTooLarge, "too_large", "%s: the body is over %d bytes (the server's --max-file-bytes): nothing was written", p.asked, max)
	}
	if err := f.Sync(); err != nil {
		return PutAnswer{}, exists, errf(http.StatusInternalServerError, "internal_error", "%s: fsync: %v", p.asked, err)
	}
	// Checked again just before the rename: the target may have changed
	// while the body arrived.
	if _, exists, err = s.check(p, c); err != nil {
		return PutAnswer{}, exists, err
	}
	flags := uint(0)
	if c.ifNoneMatch {
		flags = unix.RENAME_NOREPLACE
	}
	if err := unix.Renameat2(p.pfd(), tmp, p.pfd(), p.name, flags); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return PutAnswer{}, true, errf(http.StatusPreconditionFailed, "precondition_failed", "%s was made while the body arrived, and If-None-Match: * was given", p.asked)
		}
		return PutAnswer{}, exists, s.statErr(p, err)
	}
	done = true
	f.Close()
	// The rename is durable once the directory is.
	if dfd, err := unix.Openat(p.pfd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Fsync(dfd)
		unix.Close(dfd)
	}
	abs, _ := s.absPath(p.asked)
	return PutAnswer{Path: abs, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, exists, nil
}

// createTemp makes a new file beside p's target, never through a link.
func (s *Service) createTemp(p *place, mode uint32) (string, int, error) {
	base := p.name
	if len(base) > 200 {
		base = base[:200]
	}
	for range 10 {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		name := "." + base + ".shellctl-" + hex.EncodeToString(rnd[:]) + ".tmp"
		fd, err := unix.Openat(p.pfd(), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode&0o777)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", -1, s.statErr(p, err)
		}
		return name, fd, nil
	}
	return "", -1, errf(http.StatusInternalServerError, "internal_error", "%s: no free temporary name", p.asked)
}

func (s *Service) put(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	c := cond{ifMatch: r.Header.Get("If-Match")}
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm != "" {
		if inm != "*" {
			return errf(http.StatusBadRequest, "invalid_request", "If-None-Match %q: only * (the file must not exist) is understood on PUT", inm)
		}
		c.ifNoneMatch = true
	}
	if v := r.URL.Query().Get("mode"); v != "" {
		if c.mode, err = modeParam("mode", v, 0o644); err != nil {
			return err
		}
		c.modeGiven = true
	}
	mkdirs, err := boolParam(r, "mkdirs", false)
	if err != nil {
		return err
	}
	if r.ContentLength > s.cfg.MaxFileBytes {
		return errf(http.StatusRequestEntityTooLarge, "too_large", "%s: Content-Length %d is over %d bytes (the server's --max-file-bytes): nothing was written", path, r.ContentLength, s.cfg.MaxFileBytes)
	}
	p, err := s.resolve(path, resolveOpts{followLast: true, mkdirs: mkdirs})
	if err != nil {
		return err
	}
	defer p.close()
	ans, existed, err := s.writeAtomic(p, s.body(w, r), s.cfg.MaxFileBytes, c)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	httperr.WriteJSON(w, status, ans)
	return nil
}

// maxEditBytes bounds the file edit reads and rewrites.
const maxEditBytes = 16 << 20

// EditRequest is the body of POST /v1/files/edit.
type EditRequest struct {
	Path       string  `json:"path"`
	OldText    *string `json:"old_text"`
	NewText    *string `json:"new_text"`
	ReplaceAll bool    `json:"replace_all"`
}

// EditAnswer is its answer.
type EditAnswer struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	SHA256       string `json:"sha256"`
}

func (s *Service) edit(w http.ResponseWriter, r *http.Request) error {
	var req EditRequest
	if err := decode(s.body(w, r), &req); err != nil {
		return err
	}
	if req.OldText == nil || req.NewText == nil || *req.OldText == "" {
		return errf(http.StatusBadRequest, "invalid_request", "edit needs path, a non-empty old_text and new_text (the exact text to find and what replaces it)")
	}
	ans, err := s.Edit(req)
	if err != nil {
		return err
	}
	httperr.WriteJSON(w, http.StatusOK, ans)
	return nil
}

// Edit replaces req.OldText by req.NewText in a UTF-8 file, written as PUT
// writes, and only if the file did not change since it was read.
func (s *Service) Edit(req EditRequest) (EditAnswer, error) {
	p, err := s.resolve(req.Path, resolveOpts{followLast: true})
	if err != nil {
		return EditAnswer{}, err
	}
	defer p.close()
	f, st, err := s.openRead(p, false)
	if err != nil {
		return EditAnswer{}, err
	}
	if st.Size > maxEditBytes {
		f.Close()
		return EditAnswer{}, errf(http.StatusRequestEntityTooLarge, "too_large", "%s is %d bytes; edit takes files of at most %d bytes: write it with PUT instead", req.Path, st.Size, maxEditBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditBytes+1))
	f.Close()
	if err != nil {
		return EditAnswer{}, s.statErr(p, err)
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return EditAnswer{}, errf(http.StatusUnsupportedMediaType, "not_text", "%s is not UTF-8 text: edit changes text files only; write binary files with PUT", req.Path)
	}
	text := string(data)
	n := strings.Count(text, *req.OldText)
	switch {
	case n == 0:
		return EditAnswer{}, errf(http.StatusConflict, "edit_no_match", "%s does not contain old_text: read the file again and copy the text exactly (whitespace and line ends included)", req.Path)
	case n > 1 && !req.ReplaceAll:
		e := errf(http.StatusConflict, "edit_ambiguous", "%s contains old_text %d times: give more surrounding text so it is found once, or set replace_all", req.Path, n)
		e.Count = n
		return EditAnswer{}, e
	}
	if !req.ReplaceAll {
		n = 1
	}
	out := strings.Replace(text, *req.OldText, *req.NewText, n)
	ans, _, err := s.writeAtomic(p, strings.NewReader(out), int64(len(out)), cond{ifMatch: etag(&st), mode: st.Mode & 0o7777, modeGiven: true})
	if err != nil {
		return EditAnswer{}, err
	}
	return EditAnswer{Path: ans.Path, Replacements: n, SHA256: ans.SHA256}, nil
}
