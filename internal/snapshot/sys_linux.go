package snapshot

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// setFileTimes sets the modification (and access) time of an open file
// through its descriptor: utimensat(fd, NULL, …), where syscall.Futimes
// would resolve /proc/self/fd/N, a path walk per file.
func setFileTimes(f *os.File, mtime time.Time) error {
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(mtime.UnixNano()), syscall.NsecToTimespec(mtime.UnixNano())}
	var err error
	// Control, not Fd: Fd would switch the descriptor to blocking mode
	// first, two more system calls.
	rc, cerr := f.SyscallConn()
	if cerr != nil {
		return cerr
	}
	if cerr := rc.Control(func(fd uintptr) {
		_, _, errno := syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		if errno != 0 {
			err = errno
		}
	}); cerr != nil {
		return cerr
	}
	return err
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
