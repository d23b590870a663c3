package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// The attach throughput rows' ceilings: what a WebSocket carries on this
// machine with less and less between the socket and the bytes' way back,
// each measured as the rows measure attach (the same library and client,
// n bytes in 64 KiB binary messages, at most attachWindow in flight, read
// back on the same socket), with a server in this process: no server
// process, no job, no runner (docs/performance.md, attach).
//
//   - echo (wsEcho): the library alone. It is the library's, not the
//     protocol's: its client masks what it sends into a 4 KiB buffer, one
//     write to the socket each.
//   - pump (pumpToCat): the least work any attach design does: each
//     message straight into a local cat (its stdin pipe, or a raw pty, as
//     the floors run it), what cat prints written to a log file as a
//     job's output is kept, and sent back from that file. An attach
//     route does all of this and more (a job, a runner, the server's own
//     process), so this is the most to expect of one with this client.

// wsCeiling serves each connection with serve (its error, if any, is
// reported with the client's) and measures n bytes through it.
func wsCeiling(ctx context.Context, n int64, serve func(context.Context, *websocket.Conn) error) (float64, error) {
	// The sender is not left waiting for credit when this returns early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	served := make(chan error, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		if err := serve(r.Context(), c); err != nil {
			select {
			case served <- err:
			default:
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
			select {
			case serr := <-served:
				return 0, fmt.Errorf("the server: %v (the client: %w)", serr, err)
			default:
			}
			return 0, err
		}
		k, err := io.ReadFull(rd, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, err
		}
		got += int64(k)
		select {
		case credit <- int64(k):
		default:
		}
	}
	if err := <-sent; err != nil {
		return 0, err
	}
	return mbps(n, time.Since(start)), nil
}

// wsEcho sends each message back as it came.
func wsEcho(ctx context.Context, c *websocket.Conn) error {
	buf := make([]byte, 64<<10)
	for {
		_, rd, err := c.Reader(ctx)
		if err != nil {
			return nil // the client went
		}
		k, err := io.ReadFull(rd, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if c.Write(ctx, websocket.MessageBinary, buf[:k]) != nil {
			return nil
		}
	}
}

// pumpToCat is the pump's server side for one connection (mode "stdio"
// or "pty": the cat it pumps to): it runs until the client goes.
func pumpToCat(ctx context.Context, c *websocket.Conn, mode string) error {
	var p *pipeCat
	var err error
	if mode == "pty" {
		p, err = startPTYCat()
	} else {
		p, err = startPipeCat()
	}
	if err != nil {
		return err
	}
	defer p.close()
	log, err := os.CreateTemp("", "shellctl-bench-pump-*")
	if err != nil {
		return err
	}
	defer os.Remove(log.Name())
	defer log.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// In: each message's bytes, as read, to cat.
	go func() {
		defer cancel()
		buf := make([]byte, 64<<10)
		for {
			_, rd, err := c.Reader(ctx)
			if err != nil {
				return
			}
			for {
				k, err := rd.Read(buf)
				if k > 0 {
					if _, werr := p.in.Write(buf[:k]); werr != nil {
						return
					}
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					return
				}
			}
		}
	}()
	// Out: what cat prints, to the log; a second goroutine sends the log
	// on as it grows (woken by the size, as the attach route is).
	var size atomic.Int64
	grew := make(chan struct{}, 1)
	go func() {
		defer cancel()
		buf := make([]byte, 64<<10)
		var off int64
		for {
			k, err := p.out.Read(buf)
			if k > 0 {
				if _, werr := log.WriteAt(buf[:k], off); werr != nil {
					return
				}
				off += int64(k)
				size.Store(off)
				select {
				case grew <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	var sent int64
	for {
		select {
		case <-grew:
		case <-ctx.Done():
			return nil
		}
		for end := size.Load(); sent < end; {
			k := int(min(int64(len(buf)), end-sent))
			if _, err := log.ReadAt(buf[:k], sent); err != nil {
				return err
			}
			if err := c.Write(ctx, websocket.MessageBinary, buf[:k]); err != nil {
				return nil // the client went
			}
			sent += int64(k)
		}
	}
}

// wsEchoNote is the stdio pipe row's note of the echo.
func wsEchoNote(ctx context.Context, n int64, floor *Stats) string {
	return ceilingNote(ctx, n, floor, wsEcho, "the WebSocket library's own ceiling: %d MiB echoed by a bare WebSocket server on loopback (no job, no runner; the same library, client and server, and window) carries %.0f MB/s", "a bare WebSocket echo on loopback failed: ")
}

// wsPumpNote is an attach throughput row's note of the pump to cat (mode
// "stdio" or "pty").
func wsPumpNote(ctx context.Context, mode string, n int64, floor *Stats) string {
	what := "stdin and stdout pipes"
	if mode == "pty" {
		what = "raw pty"
	}
	pump := func(ctx context.Context, c *websocket.Conn) error { return pumpToCat(ctx, c, mode) }
	return ceilingNote(ctx, n, floor, pump, "the least any attach design does, measured: %d MiB sent over a WebSocket to a server in the bench's process that pumps it straight into a local cat's "+what+", logs what cat prints to a file and sends it back from there (no server process, no runner; the same library, client and window) carries %.0f MB/s", "a WebSocket pumped straight to a local cat failed: ")
}

// ceilingNote measures a ceiling twice and says its median (format: the
// MiB, then the MB/s), and its ratio to floor.
func ceilingNote(ctx context.Context, n int64, floor *Stats, serve func(context.Context, *websocket.Conn) error, format, failed string) string {
	var got []float64
	for i := 0; i < 2; i++ {
		v, err := wsCeiling(ctx, n, serve)
		if err != nil {
			return failed + err.Error()
		}
		got = append(got, v)
	}
	s := Summarize(got)
	note := fmt.Sprintf(format, n>>20, s.P50)
	if floor != nil && floor.P50 > 0 {
		note += fmt.Sprintf(", %.2f× the floor", s.P50/floor.P50)
	}
	return note
}
