package proto

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSunPath is the room for a socket path in sockaddr_un, less the NUL.
const maxSunPath = 107

// shortPath returns a path to name inside dir that fits sockaddr_un. Long
// state dirs are reached through /proc/self/fd/N of an O_PATH descriptor of
// dir, which the caller closes with the returned func once bound or connected.
func shortPath(dir, name string) (string, func(), error) {
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

// Listen binds the control socket name in dir.
func Listen(dir, name string) (*net.UnixListener, error) {
	p, done, err := shortPath(dir, name)
	if err != nil {
		return nil, err
	}
	defer done()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", filepath.Join(dir, name), err)
	}
	// The runner removes the file itself when it leaves; the listener must
	// not unlink a path that may by then belong to a successor.
	l.SetUnlinkOnClose(false)
	return l, nil
}

// Dial connects to the control socket name in dir.
func Dial(dir, name string) (*Conn, error) {
	p, done, err := shortPath(dir, name)
	if err != nil {
		return nil, err
	}
	defer done()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}
