package server

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/shellctl/shellctl/internal/jobpeer"
)

// jobGuardListener refuses connections that a job's process opened: a
// job that could drive the API could start a job with any cwd (a job's cwd
// is writable) and leave its confinement, token or not. The decision is
// made once per connection, on its first Read — in the connection's own
// goroutine, not in the accept loop — and a kept-alive client pays nothing
// after that.
type jobGuardListener struct {
	net.Listener
	g   *jobpeer.Guard
	log *slog.Logger
}

func (l *jobGuardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jobGuardConn{Conn: c, l: l}, nil
}

type jobGuardConn struct {
	net.Conn
	l       *jobGuardListener
	once    sync.Once
	refused bool
}

func (c *jobGuardConn) Read(b []byte) (int, error) {
	c.once.Do(c.check)
	if c.refused {
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// check decides for the connection; a refused one is answered 403 (before
// any byte of the request is read) and reads end there.
func (c *jobGuardConn) check() {
	local, ok1 := c.Conn.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.Conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return // not TCP: no such listener is made
	}
	v := c.l.g.Check(local.AddrPort(), remote.AddrPort())
	if !v.Job {
		return
	}
	c.refused = true
	c.l.log.Warn("refused a connection opened by a job's process", "job", v.JobID, "remote", remote.String(), "listener", local.String(), "why", v.Why)
	_ = c.Conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Conn.Write(jobRefusal)
	// FIN after the answer: the close that follows may reset a connection
	// whose request was never read, and a reset can cost the client the
	// answer it had not read yet.
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// jobRefusal is the whole answer to a job's connection.
var jobRefusal = func() []byte {
	body := `{"error":{"code":"forbidden_from_job","message":"requests from a job's processes are refused, whatever the token: a job may not drive the API (serve --allow-job-clients turns this off, unsafely)"}}` + "\n"
	return []byte("HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()
