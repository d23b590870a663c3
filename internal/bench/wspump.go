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

// wsPumpCeiling measures the least work any attach design does, on this
// machine: a WebSocket server in this process pumps each connection's
// binary messages straight into a local `cat` (its stdin pipe, or a raw
// pty: mode "stdio" or "pty", as the floors run it), writes what cat
// prints to a log file, as a job's output is kept, and sends it back to
// the client from that file as binary messages. No server process, no
// runner, no control channel: one process between the socket and cat.
// The client is the attach rows' (the same library, 64 KiB messages, the
// same window). What an attach route carries cannot be more than this.
func wsPumpCeiling(ctx context.Context, mode string, n int64) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	pumpErr := make(chan error, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		pumpErr <- pumpToCat(r.Context(), c, mode)
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
			case perr := <-pumpErr:
				return 0, fmt.Errorf("the pump: %v (the client: %w)", perr, err)
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

// pumpToCat is wsPumpCeiling's server side for one connection: it runs
// until the client goes.
func pumpToCat(ctx context.Context, c *websocket.Conn, mode string) error {
	c.SetReadLimit(1 << 20)
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

// wsPumpNote is an attach throughput row's note of wsPumpCeiling.
func wsPumpNote(ctx context.Context, mode string, n int64, floor *Stats) string {
	var got []float64
	for i := 0; i < 2; i++ {
		v, err := wsPumpCeiling(ctx, mode, n)
		if err != nil {
			return "a WebSocket pumped straight to a local cat failed: " + err.Error()
		}
		got = append(got, v)
	}
	s := Summarize(got)
	what := "stdin and stdout pipes"
	if mode == "pty" {
		what = "raw pty"
	}
	note := fmt.Sprintf("the least any attach design does, measured: %d MiB sent over a WebSocket to a server in the bench's process that pumps it straight into a local cat's %s, logs what cat prints to a file and sends it back from there (no server process, no runner; the same library, client and window) carries %.0f MB/s", n>>20, what, s.P50)
	if floor != nil && floor.P50 > 0 {
		note += fmt.Sprintf(", %.2f× the floor", s.P50/floor.P50)
	}
	return note
}
