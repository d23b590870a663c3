//go:build unix && !linux

package cli

import "golang.org/x/sys/unix"

// openDirBeneath opens the directory name (one path component) inside the
// directory dirfd without following a symlink.
func openDirBeneath(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
}
