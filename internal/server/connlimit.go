package server

import (
	"container/list"
	"context"
	"net"
	"strconv"
	"sync"
	"time"
)

// limitListener caps the connections open at once so that clients cannot
// exhaust the server's descriptors, without ever blocking the accept
// loop: a connection over the cap makes room by closing the least
// valuable open one, and only when there is none is it turned away.
//
// Each open connection is in one of three places:
//
//   - busy: a request on it is in the handler. Never closed from here
//     (a long wait, an upload); bounded by the handler's own timeouts.
//   - pending: accepted, but no request on it was ever authorized
//     (nothing sent yet, headers trickling in, a 401 answered, /healthz).
//     Closed first, oldest first.
//   - trusted and idle: an authorized request was served on it, and it
//     waits for the next one (keep-alive). Closed, oldest first, only
//     when no pending connection is left.
//
// So a flood of connections without the token only ever displaces its
// own kind, each new arrival the oldest of them; a real client's request
// arrives within a moment of its connect and is then busy, and
// /healthz is answered on a fresh connection the same way. When every
// connection is busy the newcomer gets a 503 and is closed.
type limitListener struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    int
	pending list.List // of *trackedConn, oldest first
	trusted list.List // idle trusted ones, oldest first
	evicted uint64
	refused uint64
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, max: max}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		l.mu.Lock()
		var victim *trackedConn
		if l.max > 0 && l.open >= l.max {
			victim = l.victimLocked()
			if victim == nil {
				l.refused++
				l.mu.Unlock()
				refuse(c, l.max)
				continue
			}
			l.evicted++
		}
		l.open++
		tc.elem = l.pending.PushBack(tc)
		tc.where = &l.pending
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
		}
		return tc, nil
	}
}

// victimLocked takes the connection to close out of the books: the
// oldest pending one, else the oldest idle trusted one.
func (l *limitListener) victimLocked() *trackedConn {
	for _, ls := range []*list.List{&l.pending, &l.trusted} {
		if e := ls.Front(); e != nil {
			tc := e.Value.(*trackedConn)
			tc.removeLocked()
			tc.gone = true
			l.open--
			return tc
		}
	}
	return nil
}

// refusal is written to a connection turned away: a whole HTTP answer
// with the error envelope, then the connection is closed.
func refusal(max int) []byte {
	body := `{"error":{"code":"too_many_connections","message":"the server has ` + strconv.Itoa(max) +
		` connections open, all of them in use (--max-connections): try again"}}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func refuse(c net.Conn, max int) {
	// A fresh socket's send buffer takes this at once; the deadline only
	// guards against the unexpected.
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(refusal(max))
	c.Close()
}

// Stats: connections open, closed to make room, turned away.
func (l *limitListener) Stats() (open int, evicted, refused uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.evicted, l.refused
}

type trackedConn struct {
	net.Conn
	l *limitListener

	// Guarded by l.mu.
	elem    *list.Element
	where   *list.List // pending, trusted or nil (busy)
	busy    int
	isTrust bool
	gone    bool // closed, or closed to make room

	closeOnce sync.Once
}

func (tc *trackedConn) removeLocked() {
	if tc.where != nil {
		tc.where.Remove(tc.elem)
		tc.where, tc.elem = nil, nil
	}
}

// begin marks a request in the handler; authorized makes the connection
// trusted from now on.
func (tc *trackedConn) begin(authorized bool) {
	l := tc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if authorized {
		tc.isTrust = true
	}
	tc.busy++
	tc.removeLocked()
}

// end marks the request's handler done: the connection is idle again, the
// newest of its kind.
func (tc *trackedConn) end() {
	l := tc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	tc.busy--
	if tc.busy > 0 || tc.gone {
		return
	}
	if tc.isTrust {
		tc.elem, tc.where = l.trusted.PushBack(tc), &l.trusted
	} else {
		tc.elem, tc.where = l.pending.PushBack(tc), &l.pending
	}
}

func (tc *trackedConn) Close() error {
	err := tc.Conn.Close()
	tc.closeOnce.Do(func() {
		l := tc.l
		l.mu.Lock()
		if !tc.gone {
			tc.gone = true
			tc.removeLocked()
			l.open--
		}
		l.mu.Unlock()
	})
	return err
}

type connKey struct{}

// connContext puts the tracked connection into its requests' context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

func trackedFrom(ctx context.Context) *trackedConn {
	tc, _ := ctx.Value(connKey{}).(*trackedConn)
	return tc
}
