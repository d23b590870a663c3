package jobs

import (
	"net"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// dialControl connects to the control socket name in dir.
func dialControl(dir, name string) (*proto.Conn, error) {
	p, done, err := proto.ShortPath(dir, name)
	if err != nil {
		return nil, err
	}
	defer done()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, err
	}
	return proto.NewConn(c), nil
}
