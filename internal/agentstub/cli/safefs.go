//go:build unix

package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// errOutside marks a key that names a path outside its root.
var errOutside = errors.New("resolves outside the root")

// cleanKey returns key as a clean relative slash path inside its root, or
// errOutside: absolute keys, keys that clean to the root itself or climb
// out of it, and keys with NUL are refused.
func cleanKey(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsRune(key, 0) {
		return "", errOutside
	}
	c := path.Clean(key)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", errOutside
	}
	return c, nil
}

// writeBeneath writes the file at the clean relative path rel below the
// directory root: every parent is created (0755) and opened one component
// at a time without following a symlink, so neither ".." nor a symlink
// (one already there or one swapped in meanwhile) can lead the write out
// of root. The data goes to "<name>.tmp-<random>" first (0644, created
// exclusively, no symlink followed) and is renamed over name only when
// fill succeeded; rename replaces a symlink at name, never writes through.
func writeBeneath(root, rel string, fill func(*os.File) error) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", root, err)
	}
	parts := strings.Split(rel, "/")
	for i, dir := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(fd, dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return fmt.Errorf("create directory %s: %w", path.Join(parts[:i+1]...), err)
		}
		next, err := openDirBeneath(fd, dir)
		link := err != nil && isSymlinkAt(fd, dir)
		unix.Close(fd)
		if link || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return fmt.Errorf("open directory %s: refusing to follow a symlink", path.Join(parts[:i+1]...))
		}
		if err != nil {
			return fmt.Errorf("open directory %s: %w", path.Join(parts[:i+1]...), err)
		}
		fd = next
	}
	defer unix.Close(fd)
	name := parts[len(parts)-1]
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := name + ".tmp-" + hex.EncodeToString(b)
	tfd, err := unix.Openat(fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(tfd), tmp)
	err = fill(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(fd, tmp, fd, name)
		if err != nil {
			err = fmt.Errorf("rename into place: %w", err)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(fd, tmp, 0)
		return err
	}
	return nil
}

// isSymlinkAt reports whether name in dirfd is a symlink (not followed).
func isSymlinkAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}
