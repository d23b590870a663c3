package proto

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSunPath is the room for a socket path in sockaddr_un, less the NUL.
const maxSunPath = 107

// ShortPath returns a path to name inside dir that fits sockaddr_un. Long
// state dirs are reached through /proc/self/fd/N of an O_PATH descriptor of
// dir, which the caller closes with the returned func once bound or connected.
func ShortPath(dir, name string) (string, func(), error) {
	p := filepath.Join(dir, name)
	if len(p) <= maxSunPath {
		return p, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s for its socket: %w", dir, err)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name, func() { unix.Close(fd) }, nil
}

// Listener is a listening unix socket made with plain system calls.
type Listener struct{ f *os.File }

// Listen binds the control socket name in dir.
func Listen(dir, name string) (*Listener, error) {
	p, done, err := ShortPath(dir, name)
	if err != nil {
		return nil, err
	}
	defer done()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket for %s: %w", filepath.Join(dir, name), err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: p}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", filepath.Join(dir, name), err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen on %s: %w", filepath.Join(dir, name), err)
	}
	// A non-blocking descriptor joins Go's poller: Accept below blocks the
	// goroutine, not a thread, and Close wakes it.
	return &Listener{f: os.NewFile(uintptr(fd), filepath.Join(dir, name))}, nil
}

// Accept waits for the next connection.
func (l *Listener) Accept() (*Conn, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return aerr != unix.EAGAIN
	})
	if err != nil {
		return nil, err
	}
	if aerr != nil {
		return nil, aerr
	}
	return NewConn(os.NewFile(uintptr(nfd), "ctl-conn")), nil
}

// Close stops listening. The socket file stays: its owner removes it.
func (l *Listener) Close() error { return l.f.Close() }

// FileConn wraps an inherited connected socket descriptor.
func FileConn(fd int) (*Conn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("control channel fd %d: %w", fd, err)
	}
	return NewConn(os.NewFile(uintptr(fd), "ctl")), nil
}
