package cli

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openDirBeneath opens the directory name (one path component) inside the
// directory dirfd without following a symlink: openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or, where the kernel or a seccomp
// filter refuses openat2, openat with O_NOFOLLOW, which for a single
// component is the same guarantee.
func openDirBeneath(dirfd int, name string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		fd, err = unix.Openat(dirfd, name, flags, 0)
	}
	return fd, err
}
