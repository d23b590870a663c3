package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// wsEchoCeiling is what the WebSocket library alone carries on this
// machine: n bytes sent in 64 KiB binary messages to a bare echo server on
// loopback (the library of the attach route and of internal/client, in
// this process, no job, no runner) and read back, at most attachWindow in
// flight, as the attach rows send them. It is the library's, not the
// protocol's: its client masks what it sends into a 4 KiB buffer, one
// write to the socket each (docs/performance.md, attach).
func wsEchoCeiling(ctx context.Context, n int64) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		buf := make([]byte, 64<<10)
		for {
			_, rd, err := c.Reader(r.Context())
			if err != nil {
				return
			}
			k, err := io.ReadFull(rd, buf)
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				return
			}
			if c.Write(r.Context(), websocket.MessageBinary, buf[:k]) != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String(), &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	chunk := []byte(strings.Repeat(line99[:98]+"\r\n", 64<<10/100))
	credit := make(chan int64, 1024)
	sent := make(chan error, 1)
	start := time.Now()
	go func() {
		sent <- sendWindowed(ctx, n, chunk, credit, func(b []byte) error { return c.Write(ctx, websocket.MessageBinary, b) })
	}()
	buf := make([]byte, 64<<10)
	for got := int64(0); got < n; {
		_, rd, err := c.Reader(ctx)
		if err != nil {
			return 0, err
		}
		k, err := io.ReadFull(rd, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, err
		}
		got += int64(k)
		credit <- int64(k)
	}
	if err := <-sent; err != nil {
		return 0, err
	}
	return mbps(n, time.Since(start)), nil
}

// wsEchoNote is the stdio pipe row's note of the WebSocket library's own
// ceiling.
func wsEchoNote(ctx context.Context, n int64, floor *Stats) string {
	var got []float64
	for i := 0; i < 2; i++ {
		v, err := wsEchoCeiling(ctx, n)
		if err != nil {
			return "a bare WebSocket echo on loopback failed: " + err.Error()
		}
		got = append(got, v)
	}
	s := Summarize(got)
	note := fmt.Sprintf("the WebSocket library's own ceiling: %d MiB echoed by a bare WebSocket server on loopback (no job, no runner; the same library, client and server, and window) carries %.0f MB/s", n>>20, s.P50)
	if floor != nil && floor.P50 > 0 {
		note += fmt.Sprintf(", %.2f× the bare pipes", s.P50/floor.P50)
	}
	return note
}
