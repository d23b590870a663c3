package snapshot

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setTimes sets the modification (and access) time of an open file or
// directory through its descriptor: utimensat(fd, NULL, …), where
// unix.Futimes would resolve /proc/self/fd/N, a path walk per file.
func setTimes(fd int, mtime time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	for {
		_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}

// setLinkTimes sets the times of the symlink name in dir itself, never
// of what it points at.
func setLinkTimes(dir int, name string, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	for {
		if err := unix.UtimesNanoAt(dir, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != unix.EINTR {
			return err
		}
	}
}

// processUmask reads the umask from /proc/self/status (reading it with
// umask(2) would mean setting it, racing with every goroutine that creates
// files). When it cannot be read, every bit counts as masked, so the mode
// of each file is always set explicitly.
func processUmask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fs.ModePerm
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
			m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
			if err != nil {
				return fs.ModePerm
			}
			return fs.FileMode(m) & fs.ModePerm
		}
	}
	return fs.ModePerm
}
