//go:build unix && !linux

package snapshot

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// setFileTimes sets the modification (and access) time of an open file
// through its descriptor, so no path is resolved again.
func setFileTimes(f *os.File, mtime time.Time) error {
	tv := syscall.NsecToTimeval(mtime.UnixNano())
	return syscall.Futimes(int(f.Fd()), []syscall.Timeval{tv, tv})
}

// processUmask: not known here, so every file's mode is set explicitly.
func processUmask() fs.FileMode { return fs.ModePerm }
