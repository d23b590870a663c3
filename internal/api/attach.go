package api

// GET /v1/jobs/{id}/attach: a WebSocket to a job (spec/extended-api.md §8).
// This file is the HTTP and WebSocket side: the handshake, auth by header
// or subprotocol, the framing of the messages. What the job is and how far
// its output may be read is the jobs service's; the WebSocket itself is
// github.com/coder/websocket (RFC 6455 framing, masking, close handshake,
// ping/pong), so no frame is parsed here.
//
// Messages (subprotocol "shellctl.attach.v1"):
//
//	client → server  binary: input bytes, as POST /input writes them
//	                 (a pty job's terminal, or a stdio job's stdin pipe)
//	                 text:   {"type":"resize","cols":N,"rows":N}
//	                         {"type":"eof"}
//	server → client  binary: output bytes (a pty job's raw terminal, or
//	                 output.log from offset: a stdio job's stdout)
//	                 text:   {"type":"exit","status","exit_code","signal","offset"}
//	                         then a normal close (1000)
//	                         {"type":"error","code","message"} for a
//	                         control message that could not be done
//	                         (the socket stays open)
//
// Output is read from the job's file at the client's pace, as the stream
// reads it (stream.go): one read of at most streamRead bytes at a time, the
// next only once the last is written to the socket; a client that stops
// reading holds this handler, never the job, and no more memory.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
)

// AttachSubprotocol is the subprotocol of the attach WebSocket; a client
// must offer it.
const AttachSubprotocol = "shellctl.attach.v1"

// bearerSubprotocol starts the subprotocol entry that carries the token
// for clients that cannot set a header (browsers): "bearer.<token>".
const bearerSubprotocol = "bearer."

// attachReadLimit bounds one message from the client: an input of up to
// 1 MiB (the runner takes it in pieces), or a control message.
const attachReadLimit = 1 << 20

// attachAuthorized reports whether r carries the token in its header or
// as the subprotocol entry bearer.<token>.
func (s *Server) attachAuthorized(r *http.Request) bool {
	if s.Authorized(r) {
		return true
	}
	want := bearerSubprotocol + s.Token
	for _, p := range subprotocols(r) {
		if len(p) == len(want) && subtleEq(p, want) {
			return true
		}
	}
	return false
}

// subprotocols lists the entries of r's Sec-WebSocket-Protocol headers.
func subprotocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// subtleEq compares in time that depends only on the length.
func subtleEq(a, b string) bool {
	var d byte
	for i := 0; i < len(a); i++ {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// attachRoute serves GET /v1/jobs/{id}/attach: auth (header or
// subprotocol), method and id, then attach.
func (s *Server) attachRoute(w http.ResponseWriter, r *http.Request) {
	if !s.attachAuthorized(r) {
		httperr.Write(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token: send it in the Authorization header, or as the WebSocket subprotocol entry bearer.<token>")
		return
	}
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, http.MethodGet)
		return
	}
	if id := r.PathValue("id"); s.checkID(w, id) {
		s.attach(w, r, id)
	}
}

// attachControl is a text message from the client.
type attachControl struct {
	Type string `json:"type"`
	Cols *int   `json:"cols"`
	Rows *int   `json:"rows"`
}

// attachExit is the server's last message.
type attachExit struct {
	Type     string  `json:"type"`
	Status   string  `json:"status"`
	ExitCode *int    `json:"exit_code"`
	Signal   *string `json:"signal"`
	Offset   int64   `json:"offset"`
	// RawOffset: where a pty job's raw bytes ended (raw attach only).
	RawOffset *int64 `json:"raw_offset,omitempty"`
}

// attachRaw starts the raw bytes of a pty job: "redraw" (the next binary
// message redraws the screen) or "resume" (the raw bytes from the offset
// asked for follow).
type attachRaw struct {
	Type      string `json:"type"`
	RawOffset int64  `json:"raw_offset"`
}

type attachError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request, id string) {
	offered := false
	for _, p := range subprotocols(r) {
		if p == AttachSubprotocol {
			offered = true
		}
	}
	if !offered {
		httperr.Write(w, http.StatusBadRequest, "invalid_subprotocol", "attach is a WebSocket with subprotocol "+strconv.Quote(AttachSubprotocol)+": offer it in Sec-WebSocket-Protocol")
		return
	}
	q := r.URL.Query()
	var off int64 = -1
	if raw := q.Get("offset"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("offset %q is not a byte offset: give a whole number ≥ 0", raw))
			return
		}
		off = n
	}
	var rawOff int64 = -1
	if raw := q.Get("raw_offset"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("raw_offset %q is not a byte offset: give a whole number ≥ 0", raw))
			return
		}
		if off >= 0 {
			validation(w, "give offset (output.log) or raw_offset (the terminal's raw bytes), not both")
			return
		}
		rawOff = n
	}
	ctx := r.Context()
	fw, err := s.Jobs.Follow(ctx, id, jobs.ChannelOutput)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	defer fw.Close()
	st, err := fw.State(ctx)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if fw.Mode() != "pty" && !fw.Piped() {
		httperr.Write(w, http.StatusConflict, "input_unsupported", "job "+id+" runs in stdio mode without a stdin pipe: attach is for pty jobs and stdio jobs run with \"stdin\":\"pipe\"; run it again with \"stdin\":\"pipe\" to attach")
		return
	}
	if fw.Mode() != "pty" && rawOff >= 0 {
		validation(w, "raw_offset is for pty jobs (their terminal's raw bytes): job %s is a stdio job, whose output is its stdout; give offset", id)
		return
	}
	// A pty job's terminal comes raw unless output.log was asked for; a
	// stdio job's output is its stdout, output.log, from offset.
	rawMode := off < 0 && fw.Mode() == "pty"
	if off < 0 {
		off = st.Size // unused in raw mode
	} else if off > st.Size && (st.Done || off > fw.DiskSize()) {
		httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("offset %d is past the end of the output (%d bytes)", off, max(st.Size, fw.DiskSize())))
		return
	}
	// Host and Origin were checked before any route (HostCheck): an Origin
	// that reaches here is one the operator allowed, so the library's own
	// same-origin rule (which would refuse every allowed page served from
	// elsewhere) is not applied on top.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{AttachSubprotocol},
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return // Accept answered the client
	}
	// The reader of the client's messages is gone before this returns
	// (the deferred cancel and close end it): nothing of the connection
	// is left behind.
	readGone := make(chan struct{})
	defer func() { <-readGone }()
	defer c.CloseNow()
	c.SetReadLimit(attachReadLimit)
	// The request's context is not the connection's once it is hijacked:
	// this one ends when the client goes, the server stops, or the job's
	// end was sent.
	actx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopCh():
			cancel()
		case <-actx.Done():
		}
	}()
	go func() {
		defer close(readGone)
		defer cancel()
		s.attachRead(actx, c, id)
	}()
	write := func() error { return s.attachWrite(actx, c, fw, off) }
	if rawMode {
		write = func() error { return s.attachRawWrite(actx, c, fw, id, rawOff) }
	}
	if err := write(); err != nil {
		if errors.Is(err, errServerStopping) {
			_ = c.Close(websocket.StatusGoingAway, "server shutting down: attach again")
		}
		return
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
}

var errServerStopping = errors.New("server shutting down")

// attachRead takes the client's messages until it goes: input bytes to
// the job, control messages done in order with them. The socket is read
// ahead of what is done (attachinbox.go), so the input messages that
// queued while one went to the job go to it in one request.
func (s *Server) attachRead(ctx context.Context, c *websocket.Conn, id string) {
	read := func(ctx context.Context) (attachMsg, error) { return readAttach(ctx, c) }
	pumpAttach(ctx, read, func(ctx context.Context, m attachMsg) { s.attachDo(ctx, c, id, m) })
}

// attachDo does one message of the client's (binary: input, perhaps
// several messages merged; text: a control message), answering on the
// socket what could not be done.
func (s *Server) attachDo(ctx context.Context, c *websocket.Conn, id string, msg attachMsg) {
	if msg.typ == websocket.MessageBinary {
		if err := s.Jobs.AttachInput(ctx, id, msg.data); err != nil && !errors.Is(err, jobs.ErrNotRunning) {
			// (Not running: the job's end is on its way to the client.)
			s.attachFail(ctx, c, err)
		}
		return
	}
	var m attachControl
	if err := json.Unmarshal(msg.data, &m); err != nil {
		s.attachSend(ctx, c, attachError{Type: "error", Code: "validation_error", Message: "a text message is a JSON control message ({\"type\":\"resize\",\"cols\":N,\"rows\":N} or {\"type\":\"eof\"}): " + err.Error()})
		return
	}
	var err error
	switch m.Type {
	case "resize":
		if m.Cols == nil || m.Rows == nil || *m.Cols < 1 || *m.Cols > maxTerminalSide || *m.Rows < 1 || *m.Rows > maxTerminalSide {
			s.attachSend(ctx, c, attachError{Type: "error", Code: "validation_error", Message: fmt.Sprintf("resize needs cols and rows, each a whole number within 1..%d", maxTerminalSide)})
			return
		}
		err = s.Jobs.Resize(ctx, id, *m.Cols, *m.Rows)
	case "eof":
		err = s.Jobs.AttachEOF(ctx, id)
	default:
		s.attachSend(ctx, c, attachError{Type: "error", Code: "validation_error", Message: fmt.Sprintf("control message type %q is not one of \"resize\", \"eof\"", m.Type)})
		return
	}
	if err != nil && !errors.Is(err, jobs.ErrNotRunning) {
		s.attachFail(ctx, c, err)
	}
}

// attachFail tells the client a message could not be done.
func (s *Server) attachFail(ctx context.Context, c *websocket.Conn, err error) {
	code := "internal_error"
	for _, e := range errorCodes {
		if errors.Is(err, e.kind) {
			code = e.code
			break
		}
	}
	if code == "internal_error" && s.Logger != nil {
		s.Logger.Error("attach", "err", err)
	}
	s.attachSend(ctx, c, attachError{Type: "error", Code: code, Message: err.Error()})
}

func (s *Server) attachSend(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}

// attachWrite sends the job's output from off, then its end. Nothing
// polls: between reads it waits on the job's change channel.
func (s *Server) attachWrite(ctx context.Context, c *websocket.Conn, fw follower, off int64) error {
	buf := make([]byte, streamRead)
	for {
		st, err := fw.State(ctx)
		if err != nil {
			return err
		}
		for off < st.Size {
			n := int(min(int64(len(buf)), st.Size-off))
			if _, err := fw.ReadAt(buf[:n], off); err != nil {
				return err
			}
			if err := c.Write(ctx, websocket.MessageBinary, buf[:n]); err != nil {
				return err
			}
			off += int64(n)
		}
		if st.Done {
			end, err := fw.End(ctx)
			if err != nil {
				return err
			}
			return s.attachSend(ctx, c, attachExit{Type: "exit", Status: end.Status, ExitCode: end.ExitCode, Signal: end.Signal, Offset: max(off, st.Size)})
		}
		if err := s.attachWait(ctx, st.Changed); err != nil {
			return err
		}
	}
}

// attachRawWrite sends a pty job's terminal: a redraw of its screen, or
// the raw bytes from rawOff when they are still kept (a reconnect), then
// the raw bytes as the program writes them, read from the runner's ring
// at the client's pace; a client that fell more than the ring behind gets
// a fresh redraw. Then the job's end.
func (s *Server) attachRawWrite(ctx context.Context, c *websocket.Conn, fw follower, id string, rawOff int64) error {
	off := rawOff
	redraw := func() error {
		b, at, err := s.Jobs.AttachRedraw(ctx, id)
		if err != nil {
			return err
		}
		if err := s.attachSend(ctx, c, attachRaw{Type: "redraw", RawOffset: at}); err != nil {
			return err
		}
		off = at
		return c.Write(ctx, websocket.MessageBinary, b)
	}
	// started: the client was told where the raw bytes start.
	started := false
	if off >= 0 {
		b, err := s.Jobs.AttachRaw(ctx, id, off)
		switch {
		case err == nil:
			if err := s.attachSend(ctx, c, attachRaw{Type: "resume", RawOffset: off}); err != nil {
				return err
			}
			started = true
			if len(b) > 0 {
				if err := c.Write(ctx, websocket.MessageBinary, b); err != nil {
					return err
				}
				off += int64(len(b))
			}
		case errors.Is(err, jobs.ErrRawGone), errors.Is(err, jobs.ErrNotRunning):
		default:
			return err
		}
	}
	if !started {
		switch err := redraw(); {
		case err == nil:
			started = true
		case errors.Is(err, jobs.ErrNotRunning):
			// Ended before a redraw could be made: only its end is left.
		default:
			return err
		}
	}
	for {
		st, err := fw.State(ctx)
		if err != nil {
			return err
		}
		redrawn := false
		for started && (off < st.RawSize || st.Done) {
			b, err := s.Jobs.AttachRaw(ctx, id, off)
			if errors.Is(err, jobs.ErrRawGone) && !st.Done {
				// The client fell more than the ring behind: a redraw,
				// then the bytes from where it stands, with the job's
				// state looked at again (it may have gone quiet since).
				if err := redraw(); err != nil && !errors.Is(err, jobs.ErrNotRunning) {
					return err
				}
				redrawn = true
				break
			}
			if errors.Is(err, jobs.ErrRawGone) || errors.Is(err, jobs.ErrNotRunning) {
				break
			}
			if err != nil {
				return err
			}
			if len(b) == 0 {
				break
			}
			if err := c.Write(ctx, websocket.MessageBinary, b); err != nil {
				return err
			}
			off += int64(len(b))
		}
		if st.Done {
			end, err := fw.End(ctx)
			if err != nil {
				return err
			}
			e := attachExit{Type: "exit", Status: end.Status, ExitCode: end.ExitCode, Signal: end.Signal, Offset: st.Size}
			if started {
				e.RawOffset = &off
			}
			return s.attachSend(ctx, c, e)
		}
		if redrawn {
			continue
		}
		if err := s.attachWait(ctx, st.Changed); err != nil {
			return err
		}
	}
}

// attachWait waits for the job's next change; a context ended by the
// server's stop is errServerStopping (closed 1001), any other its error.
func (s *Server) attachWait(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		select {
		case <-s.stopCh():
			return errServerStopping
		default:
		}
		return ctx.Err()
	}
}
