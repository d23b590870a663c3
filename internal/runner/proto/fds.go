package proto

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdMarker is the one byte that carries descriptors (SCM_RIGHTS) ahead of
// the message they go with. On a stream socket the kernel never merges
// bytes carrying descriptors with others in one read, and reading exactly
// one byte leaves the message itself to the line reader.
const fdMarker = 'F'

// maxFDs bounds the descriptors one message may carry.
const maxFDs = 8

// SendWithFDs sends fds (SCM_RIGHTS) and then m; the peer takes them with
// RecvFDs before it reads m. Only the server's end (a *net.UnixConn) can.
func (c *Conn) SendWithFDs(m *Msg, fds []int) error {
	uc, ok := c.c.(interface {
		WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (n, oobn int, err error)
	})
	if !ok {
		return fmt.Errorf("send %s with descriptors: not a unix socket", m.T)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, _, err := uc.WriteMsgUnix([]byte{fdMarker}, unix.UnixRights(fds...), nil); err != nil {
		return fmt.Errorf("send %s descriptors: %w", m.T, err)
	}
	return c.write(m)
}

// RecvFDs reads the descriptors SendWithFDs sent (close-on-exec), before
// anything else is read from c. want is how many are expected: any other
// number is an error, and whatever came is closed.
func (c *Conn) RecvFDs(want int) ([]int, error) {
	if c.rend > c.rpos {
		return nil, errors.New("receive descriptors: the message was already read")
	}
	sc, ok := c.c.(syscall.Conn)
	if !ok {
		return nil, errors.New("receive descriptors: not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(maxFDs*4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b[:], oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("receive descriptors: %w", err)
	}
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if n != 1 || b[0] != fdMarker || len(fds) != want {
		for _, fd := range fds {
			unix.Close(fd)
		}
		if n == 0 {
			return nil, errors.New("receive descriptors: the peer closed the channel")
		}
		return nil, fmt.Errorf("receive descriptors: got %d (marker %q), want %d", len(fds), b[:n], want)
	}
	return fds, nil
}
