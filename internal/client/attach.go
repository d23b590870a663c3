package client

// GET /v1/jobs/{id}/attach: a WebSocket to a job (spec/extended-api.md §8),
// through github.com/coder/websocket.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// AttachSubprotocol is the attach WebSocket's subprotocol.
const AttachSubprotocol = "shellctl.attach.v1"

// AttachOptions says where the output starts.
type AttachOptions struct {
	// Offset: output.log from this byte offset (nil: the current end).
	// For a pty job it asks for the sanitized log instead of the terminal's
	// raw bytes.
	Offset *int64
	// RawOffset: a pty job's raw terminal bytes from this offset (a
	// reconnect; nil: a redraw of the screen, then the raw bytes).
	RawOffset *int64
	// TokenInSubprotocol sends the token as the subprotocol entry
	// bearer.<token> instead of the Authorization header (as a browser
	// must).
	TokenInSubprotocol bool
}

// AttachConn is one attach WebSocket.
type AttachConn struct {
	c   *websocket.Conn
	buf []byte // Next reads each message into it
}

// AttachMessage is one message from the server: Output bytes (binary), or
// a control message (text). Output lies in the connection's own buffer:
// it is valid until the next call of Next (copy what is kept longer).
type AttachMessage struct {
	Output  []byte
	Control *AttachControl
}

// AttachControl is a text message from the server.
type AttachControl struct {
	Type string `json:"type"` // "exit", "redraw", "resume", "error"
	// exit
	Status   string  `json:"status,omitempty"`
	ExitCode *int    `json:"exit_code,omitempty"`
	Signal   *string `json:"signal,omitempty"`
	Offset   int64   `json:"offset,omitempty"`
	// redraw, resume, exit: where the raw bytes that follow start (pty).
	RawOffset *int64 `json:"raw_offset,omitempty"`
	// error
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Attach opens the attach WebSocket of job id.
func (c *Client) Attach(ctx context.Context, id string, opt AttachOptions) (*AttachConn, error) {
	u, err := url.Parse(strings.TrimRight(c.BaseURL, "/") + "/v1/jobs/" + url.PathEscape(id) + "/attach")
	if err != nil {
		return nil, fmt.Errorf("attach: base URL %q: %w", c.BaseURL, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	q := u.Query()
	if opt.Offset != nil {
		q.Set("offset", strconv.FormatInt(*opt.Offset, 10))
	}
	if opt.RawOffset != nil {
		q.Set("raw_offset", strconv.FormatInt(*opt.RawOffset, 10))
	}
	u.RawQuery = q.Encode()
	protos := []string{AttachSubprotocol}
	h := http.Header{}
	if c.Token != "" {
		if opt.TokenInSubprotocol {
			protos = append(protos, "bearer."+c.Token)
		} else {
			h.Set("Authorization", "Bearer "+c.Token)
		}
	}
	var hc *http.Client
	if c.HTTP != nil && c.HTTP.Transport != nil {
		// The caller's transport, without its timeout: a WebSocket lives
		// as long as the job is attached.
		hc = &http.Client{Transport: c.HTTP.Transport}
	}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: h, Subprotocols: protos,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var raw []byte
			if resp.Body != nil {
				raw, _ = io.ReadAll(io.LimitReader(resp.Body, 1024))
			}
			return nil, apiError(resp.StatusCode, raw)
		}
		return nil, fmt.Errorf("attach to job %s: %w", id, err)
	}
	// Output comes in messages of at most 64 KiB; a redraw of the largest
	// screen is larger.
	ws.SetReadLimit(16 << 20)
	return &AttachConn{c: ws}, nil
}

// Subprotocol is what the server chose.
func (a *AttachConn) Subprotocol() string { return a.c.Subprotocol() }

// Input sends bytes to the job's input.
func (a *AttachConn) Input(ctx context.Context, b []byte) error {
	return a.c.Write(ctx, websocket.MessageBinary, b)
}

// Resize sets the job's terminal size.
func (a *AttachConn) Resize(ctx context.Context, cols, rows int) error {
	return a.control(ctx, map[string]any{"type": "resize", "cols": cols, "rows": rows})
}

// EOF ends the job's input.
func (a *AttachConn) EOF(ctx context.Context) error {
	return a.control(ctx, map[string]any{"type": "eof"})
}

func (a *AttachConn) control(ctx context.Context, v any) error {
	b, _ := json.Marshal(v)
	return a.c.Write(ctx, websocket.MessageText, b)
}

// ErrAttachClosed is returned by Next once the server closed the socket
// normally (after the exit message).
var ErrAttachClosed = errors.New("attach closed")

// Next reads the next message. Its Output is valid until the next call.
func (a *AttachConn) Next(ctx context.Context) (*AttachMessage, error) {
	typ, b, err := a.read(ctx)
	if err != nil {
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return nil, ErrAttachClosed
		}
		return nil, err
	}
	if typ == websocket.MessageBinary {
		return &AttachMessage{Output: b}, nil
	}
	var m AttachControl
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("attach: a text message that is not a control message: %w", err)
	}
	return &AttachMessage{Control: &m}, nil
}

// read reads the next message into a.buf, kept from message to message:
// a stream of output costs no allocation (and no clearing of new memory)
// per message.
func (a *AttachConn) read(ctx context.Context) (websocket.MessageType, []byte, error) {
	typ, r, err := a.c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	b := a.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	a.buf = b
	if cap(b) > 4<<20 {
		a.buf = nil // a rare long one (a redraw) is not kept
	}
	return typ, b, nil
}

// Close closes the socket (the job goes on).
func (a *AttachConn) Close() error {
	return a.c.Close(websocket.StatusNormalClosure, "")
}

// CloseNow drops the connection without the close handshake.
func (a *AttachConn) CloseNow() error { return a.c.CloseNow() }
