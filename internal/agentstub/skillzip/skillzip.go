// Package skillzip packs a skill directory into a zip archive and unpacks one
// safely: no entry may land outside the destination directory.
package skillzip

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/shellctl/shellctl/internal/agentstub"
)

// Error codes of this package.
const (
	CodeUnsafeArchive = "unsafe_archive" // an entry would escape, or is a link or device
	CodeBadArchive    = "bad_archive"    // not a zip, or over the limits
	CodeInvalidSkill  = "invalid_skill"  // a directory to pack is not a skill
)

// SkillFile is the file every skill directory holds at its top.
const SkillFile = "SKILL.md"

const (
	// maxEntries and maxUnpacked bound what one skill archive may unpack to,
	// so a hostile or broken archive cannot fill the disk: skills are a few
	// documents and scripts, far below these.
	maxEntries  = 10000
	maxUnpacked = 256 << 20
)

func fail(code, format string, args ...any) error {
	return &agentstub.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Pack zips the directory dir (which must hold SKILL.md) with paths relative
// to dir. Only directories and regular files are allowed: a symlink could
// point anywhere on the packer's machine.
func Pack(dir string) ([]byte, error) {
	st, err := os.Stat(filepath.Join(dir, SkillFile))
	if err != nil || !st.Mode().IsRegular() {
		return nil, fail(CodeInvalidSkill, "%s has no %s", dir, SkillFile)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			_, err = zw.CreateHeader(&zip.FileHeader{Name: name + "/", Modified: info.ModTime()})
			return err
		case !info.Mode().IsRegular():
			return fail(CodeInvalidSkill, "%s is not a regular file or directory", p)
		}
		hdr, err := zip.FileInfoHeader(info)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Method = name, zip.Deflate
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		var ae *agentstub.Error
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	return buf.Bytes(), nil
}

// Unpack extracts the zip archive in r into dest, creating it. Every entry is
// checked before anything is written: a name that is absolute, has a ".."
// element or a backslash, or an entry that is neither a file nor a directory
// refuses the whole archive. When the archive holds everything under one top
// directory with SKILL.md in it (zipped as "name/..."), that directory is
// stripped so SKILL.md lands at dest's top.
func Unpack(r io.ReaderAt, size int64, dest string) error {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		if errors.Is(err, zip.ErrInsecurePath) {
			return fail(CodeUnsafeArchive, "archive has an entry outside its directory")
		}
		return fail(CodeBadArchive, "not a zip archive: %v", err)
	}
	if len(zr.File) > maxEntries {
		return fail(CodeBadArchive, "archive has %d entries, more than %d", len(zr.File), maxEntries)
	}
	var total uint64
	for _, f := range zr.File {
		if err := checkEntry(f); err != nil {
			return err
		}
		total += f.UncompressedSize64
	}
	if total > maxUnpacked {
		return fail(CodeBadArchive, "archive unpacks to %d bytes, more than %d", total, maxUnpacked)
	}
	strip := commonTop(zr.File)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	budget := int64(maxUnpacked)
	for _, f := range zr.File {
		name := strings.TrimPrefix(strings.TrimSuffix(f.Name, "/"), strip)
		if name == "" {
			continue
		}
		target := filepath.Join(dest, filepath.FromSlash(name))
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			continue
		}
		n, err := extract(f, target, budget)
		if err != nil {
			return err
		}
		budget -= n
	}
	return nil
}

func checkEntry(f *zip.File) error {
	name := strings.TrimSuffix(f.Name, "/")
	if name == "" || strings.Contains(f.Name, `\`) || !filepath.IsLocal(filepath.FromSlash(name)) ||
		hasDotDot(name) {
		return fail(CodeUnsafeArchive, "refused entry %q: it would land outside the skill directory", f.Name)
	}
	m := f.Mode()
	if !m.IsDir() && !m.IsRegular() {
		return fail(CodeUnsafeArchive, "refused entry %q: not a regular file or directory", f.Name)
	}
	return nil
}

// hasDotDot reports a ".." element anywhere, even one that stays inside
// after cleaning ("a/../b"): no honest archive needs it.
func hasDotDot(name string) bool {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}

// commonTop returns "dir/" when every entry is dir or under it and
// dir/SKILL.md exists while SKILL.md does not, else "".
func commonTop(files []*zip.File) string {
	top, hasNested := "", false
	for _, f := range files {
		name := strings.TrimSuffix(f.Name, "/")
		if name == SkillFile {
			return ""
		}
		first, _, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		} else if first != top {
			return ""
		}
		if name == path.Join(first, SkillFile) {
			hasNested = true
		}
	}
	if !hasNested {
		return ""
	}
	return top + "/"
}

// extract writes one file entry, reading at most budget bytes whatever the
// header claims, and returns the bytes written.
func extract(f *zip.File, target string, budget int64) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return 0, fmt.Errorf("unpack: %w", err)
	}
	rc, err := f.Open()
	if err != nil {
		return 0, fail(CodeBadArchive, "open entry %q: %v", f.Name, err)
	}
	defer rc.Close()
	perm := os.FileMode(0o644)
	if f.Mode()&0o111 != 0 {
		perm = 0o755
	}
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, fmt.Errorf("unpack: %w", err)
	}
	n, err := io.Copy(out, io.LimitReader(rc, budget+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fail(CodeBadArchive, "read entry %q: %v", f.Name, err)
	}
	if n > budget {
		return n, fail(CodeBadArchive, "archive unpacks to more than %d bytes", int64(maxUnpacked))
	}
	return n, nil
}
