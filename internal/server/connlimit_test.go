package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Over the cap, the oldest connection without an authorized request goes
// first, then the oldest idle trusted one; busy ones never; with every
// connection busy the newcomer is answered 503 and closed.
func TestLimitListenerDisplacesInOrder(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2)
	defer l.Close()
	accepted := make(chan *trackedConn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*trackedConn)
		}
	}()
	dial := func() (net.Conn, *trackedConn) {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		select {
		case tc := <-accepted:
			return c, tc
		case <-time.After(5 * time.Second):
			t.Fatal("not accepted")
			return nil, nil
		}
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}

	c1, a1 := dial()
	a1.begin(true) // an authorized request: trusted from now on
	a1.end()
	c2, _ := dial() // pending
	_, a3 := dial() // over the cap: the pending c2 goes, not the older trusted c1
	if !closed(c2) {
		t.Fatal("the pending connection was not closed to make room")
	}
	a3.begin(false) // busy
	_, a4 := dial() // no pending one left: the idle trusted c1 goes
	if !closed(c1) {
		t.Fatal("the idle trusted connection was not closed to make room")
	}
	a4.begin(false)
	// Both open connections are busy: the next is turned away.
	c5, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	c5.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c5), nil)
	if err != nil {
		t.Fatalf("refused connection: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"code":"too_many_connections"`) {
		t.Fatalf("refusal = %d %s", resp.StatusCode, body)
	}
	if open, evicted, refused := l.Stats(); open != 2 || evicted != 2 || refused != 1 {
		t.Fatalf("stats open %d evicted %d refused %d, want 2 2 1", open, evicted, refused)
	}
	// A busy connection that ends its request and closes frees its place.
	a3.end()
	a3.Close()
	if open, _, _ := l.Stats(); open != 1 {
		t.Fatalf("open after a close = %d, want 1", open)
	}
}
