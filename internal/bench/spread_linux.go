package bench

import (
	"errors"

	"golang.org/x/sys/unix"
)

// fsTopdirFlag is FS_TOPDIR_FL (`chattr +T`, linux/fs.h).
const fsTopdirFlag = 0x00020000

// spreadDirs marks dir so that ext4 places each directory made directly in
// it the way it places the directories of the file system's root (the
// Orlov allocator: a block group with many free inodes and few
// directories) instead of next to dir. The bench's restore targets get it
// so that the trees they receive do not land among inodes freed moments
// ago (by an earlier run or other work on the machine): on ext4 without a
// journal every inode created then skips each such inode of its group, one
// buffer lookup each, which at 10 000 files made a pass seconds slower
// whichever side it was. A restore into a fresh sandbox's Home never meets
// that. ok is false where the file system has no such flag.
func spreadDirs(dir string) (ok bool, err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|fsTopdirFlag)
	}
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	return err == nil, err
}

// hasSpreadFlag reports whether dir has FS_TOPDIR_FL (tests).
func hasSpreadFlag(dir string) (bool, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	return err == nil && flags&fsTopdirFlag != 0, err
}
