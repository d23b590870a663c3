// Package statedir holds what guards a state dir as a whole: the exclusive
// lock that keeps a second `shellctl serve` off a state dir in use
// (shared/spec/jobs.md, "State on disk").
package statedir

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// LockName is the lock file's name in the state dir. It stays after the
// server stops: removing it would let a server that opened the old file and
// one that made a new one both hold "the" lock.
const LockName = "serve.lock"

// ErrLocked is returned (wrapped) by Lock when another process holds the
// state dir's lock.
var ErrLocked = errors.New("state dir in use")

// Lock takes the exclusive lock of the state dir dir (which must exist) for
// as long as the process lives or until release is called, and writes this
// process's pid into the lock file for the next one's message.
//
// The lock file is opened relative to a handle on dir, without following a
// symlink and without blocking on a planted FIFO, and must be a regular
// file: nothing planted in the state dir can redirect the pid write. The
// lock is flock(2) on that open file, so the kernel drops it when the
// process dies, however it dies; the descriptor is close-on-exec, so
// runners and jobs never inherit it.
func Lock(dir string) (release func(), err error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening state dir %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	path := dir + "/" + LockName
	fd, err := unix.Openat(dfd, LockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock file %s is a symlink: remove it (nothing in the state dir may be a link)", path)
		}
		return nil, fmt.Errorf("opening lock file %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat of lock file %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("lock file %s is not a regular file (mode %#o): remove it", path, st.Mode)
	}
	if err := lockExclusive(fd); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another shellctl serve (%s): stop that server, or give this one its own --state-dir", ErrLocked, dir, holder(fd))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := unix.Ftruncate(fd, 0); err != nil {
		return nil, fmt.Errorf("writing lock file %s: %w", path, err)
	}
	if _, err := unix.Pwrite(fd, pid, 0); err != nil {
		return nil, fmt.Errorf("writing lock file %s: %w", path, err)
	}
	ok = true
	var once sync.Once
	return func() { once.Do(func() { unix.Close(fd) }) }, nil
}

// holder says who holds the lock, from the pid the holder wrote.
func holder(fd int) string {
	buf := make([]byte, 32)
	n, _ := unix.Pread(fd, buf, 0)
	s := strings.TrimSpace(string(buf[:max(n, 0)]))
	if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
		return "pid " + s
	}
	return "pid not recorded yet"
}

// lockGone bounds how long Lock waits for a lock whose recorded holder is
// dead: a server killed while it was starting a runner leaves the lock
// held for a moment by the forked child, until that child's execve closes
// the descriptor.
const lockGone = 2 * time.Second

// lockExclusive takes the lock, waiting (briefly) only while the process
// recorded as its holder no longer exists.
func lockExclusive(fd int) error {
	deadline := time.Now().Add(lockGone)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		buf := make([]byte, 32)
		n, _ := unix.Pread(fd, buf, 0)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(buf[:max(n, 0)])))
		if perr != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
