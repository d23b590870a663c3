package client

// The live output stream (GET /v1/jobs/{id}/stream, Server-Sent Events):
// a reader of its events that resumes by itself. When the connection
// breaks before the end event (a network fault, a server restart), Next
// reconnects with Last-Event-ID set to the offset after the last chunk it
// returned, so the chunks a caller gets tile the file exactly once.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Stream event types.
const (
	EventOutput    = "output"
	EventState     = "state"
	EventInputWait = "input_wait"
	EventEnd       = "end"
)

// StreamEvent is one event of a job's stream. Data is the event's JSON;
// the fields of its type are decoded from it.
type StreamEvent struct {
	Type string
	ID   string
	Data []byte

	// output: the chunk's bytes (text or decoded base64) and where they
	// start in the file. end: Offset is the file's final size.
	Offset int64
	Bytes  []byte

	// state and end
	Status   string
	Done     bool
	ExitCode *int
	// end
	Signal *string
	Reason *string
	// input_wait
	Waiting bool
}

// StreamOptions choose where a stream starts and how it resumes.
type StreamOptions struct {
	Offset  int64  // byte offset to start from
	Channel string // "output" (default) or "stderr"
	// Resume sends Offset as the Last-Event-ID header (as a reconnecting
	// EventSource does) instead of the offset query, from the first
	// connection on.
	Resume bool
	// GiveUp is how long Next keeps trying to reconnect a broken stream
	// before it returns the error (default 60 s).
	GiveUp time.Duration
}

// Stream reads the events of one job's stream. Not safe for concurrent
// use.
type Stream struct {
	c    *Client
	ctx  context.Context
	id   string
	opt  StreamOptions
	next int64 // the offset after the last chunk returned: where a reconnect resumes
	body io.ReadCloser
	rd   *bufio.Reader
	done bool
	// opened: a connection was made before (the next one resumes with
	// Last-Event-ID).
	opened bool
	// Reconnects counts the connections made after the first.
	Reconnects int

	// reuse (Copy): events are decoded into data and out, kept across
	// events, instead of buffers of their own.
	reuse     bool
	data, out []byte
}

// Stream opens job id's stream; the first connection is made by the
// first Next.
func (c *Client) Stream(ctx context.Context, id string, opt StreamOptions) *Stream {
	if opt.GiveUp <= 0 {
		opt.GiveUp = 60 * time.Second
	}
	return &Stream{c: c, ctx: ctx, id: id, opt: opt, next: opt.Offset}
}

// Offset is where the stream resumes: the byte offset after the last
// chunk Next returned.
func (s *Stream) Offset() int64 { return s.next }

// Close ends the stream.
func (s *Stream) Close() error {
	s.done = true
	if s.body != nil {
		err := s.body.Close()
		s.body = nil
		return err
	}
	return nil
}

// connect opens a connection resuming at s.next.
func (s *Stream) connect(first bool) error {
	q := url.Values{}
	if s.opt.Channel != "" {
		q.Set("channel", s.opt.Channel)
	}
	resume := !first || s.opt.Resume
	if !resume {
		q.Set("offset", strconv.FormatInt(s.next, 10))
	}
	u := strings.TrimRight(s.c.BaseURL, "/") + "/v1/jobs/" + url.PathEscape(s.id) + "/stream?" + q.Encode()
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if resume {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(s.next, 10))
	}
	if s.c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.c.Token)
	}
	resp, err := s.c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("connect to stream of job %s: %w", s.id, err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return apiError(resp.StatusCode, raw)
	}
	s.body, s.rd = resp.Body, bufio.NewReaderSize(resp.Body, streamBuf)
	return nil
}

// streamBuf is the reader's buffer: an output event's data line (the
// server reads at most 64 KiB at a time, plus the escapes of its text)
// mostly fits, so it is read without being gathered first.
const streamBuf = 128 << 10

// apiError is the API's error answer as an *Error.
func apiError(status int, raw []byte) error {
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
		return &Error{Status: status, Code: env.Error.Code, Message: env.Error.Message}
	}
	return &Error{Status: status, Code: "http_" + strconv.Itoa(status), Message: strings.TrimSpace(string(raw))}
}

// Next returns the next event; io.EOF after the end event. A broken
// connection is resumed from Offset (with backoff, for up to GiveUp);
// an answer of the API that is not 200 (an unknown job, a bad offset)
// is returned as an *Error at once, and so is the context's error.
func (s *Stream) Next() (*StreamEvent, error) {
	if s.done {
		return nil, io.EOF
	}
	var broke time.Time
	wait := 50 * time.Millisecond
	for {
		if s.body == nil {
			err := s.connect(!s.opened)
			if err != nil {
				var ae *Error
				if errors.As(err, &ae) || s.ctx.Err() != nil {
					return nil, errors.Join(err, s.ctx.Err())
				}
				if broke.IsZero() {
					broke = time.Now()
				}
				if time.Since(broke) > s.opt.GiveUp {
					return nil, err
				}
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-s.ctx.Done():
					t.Stop()
					return nil, s.ctx.Err()
				}
				wait = min(2*wait, 2*time.Second)
				continue
			}
			if s.opened {
				s.Reconnects++
			}
			s.opened = true
			broke, wait = time.Time{}, 50*time.Millisecond
		}
		var scratch *[]byte
		if s.reuse {
			scratch = &s.data
		}
		ev, err := readEvent(s.rd, scratch)
		if err == nil {
			if ev == nil {
				continue // a comment or an empty event
			}
			if s.reuse {
				err = ev.decodeInto(&s.out)
				if ev.Type != EventOutput {
					ev.Data = bytes.Clone(ev.Data) // small, and kept (the end event)
				}
			} else {
				err = ev.decode()
			}
			if err != nil {
				return nil, err
			}
			if ev.Type == EventOutput {
				if ev.Offset != s.next {
					return nil, fmt.Errorf("stream of job %s: output event at %d, want %d (a gap or a repeat)", s.id, ev.Offset, s.next)
				}
				s.next = ev.Offset + int64(len(ev.Bytes))
			}
			if ev.Type == EventEnd {
				s.Close()
			}
			return ev, nil
		}
		// The connection broke before the end: resume.
		s.body.Close()
		s.body = nil
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		if broke.IsZero() {
			broke = time.Now()
		}
	}
}

// readEvent reads one event (nil for a block with no data: comments,
// keep-alives). Lines are as the SSE format has them: "field: value".
// With scratch, the event's Data is built in *scratch (its buffer kept
// for the next event: Data is valid until then), else in a buffer of its
// own.
func readEvent(rd *bufio.Reader, scratch *[]byte) (*StreamEvent, error) {
	ev := &StreamEvent{Type: "message"}
	var data []byte
	if scratch != nil {
		data = (*scratch)[:0]
	}
	hasData := false
	var long []byte // a line longer than rd's buffer, gathered
	seen := false
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line (a big chunk): gather it whole.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = rd.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if !seen {
				continue
			}
			if scratch != nil {
				*scratch = data
			}
			if !hasData {
				return nil, nil
			}
			if data == nil {
				data = []byte{}
			}
			ev.Data = data
			return ev, nil
		}
		seen = true
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Type = string(value)
		case "id":
			ev.ID = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			hasData = true
			data = append(data, value...)
		}
	}
}

// decode fills the fields of ev's type from its data.
func (ev *StreamEvent) decode() error { return ev.decodeInto(nil) }

// decodeInto is decode with an output event's bytes decoded into *out
// (its buffer kept for the next event) when out is not nil.
func (ev *StreamEvent) decodeInto(out *[]byte) error {
	if ev.Type == EventOutput && ev.decodeOutput(out) {
		return ev.checkID()
	}
	var d struct {
		Offset   int64   `json:"offset"`
		Text     *string `json:"text"`
		Base64   *string `json:"base64"`
		Status   string  `json:"status"`
		Done     bool    `json:"done"`
		ExitCode *int    `json:"exit_code"`
		Signal   *string `json:"signal"`
		Reason   *string `json:"reason"`
		Waiting  bool    `json:"waiting"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return fmt.Errorf("decode %s event %q: %w", ev.Type, ev.Data, err)
	}
	ev.Offset, ev.Status, ev.Done, ev.ExitCode, ev.Signal, ev.Reason, ev.Waiting = d.Offset, d.Status, d.Done, d.ExitCode, d.Signal, d.Reason, d.Waiting
	if ev.Type == EventOutput {
		switch {
		case d.Text != nil:
			ev.Bytes = []byte(*d.Text)
		case d.Base64 != nil:
			b, err := base64.StdEncoding.DecodeString(*d.Base64)
			if err != nil {
				return fmt.Errorf("decode output event at %d: base64: %w", d.Offset, err)
			}
			ev.Bytes = b
		default:
			return fmt.Errorf("output event at %d has neither text nor base64", d.Offset)
		}
		return ev.checkID()
	}
	return nil
}

// checkID checks an output event's id is the offset after its bytes.
func (ev *StreamEvent) checkID() error {
	if id, err := strconv.ParseInt(ev.ID, 10, 64); err != nil || id != ev.Offset+int64(len(ev.Bytes)) {
		return fmt.Errorf("output event at %d of %d bytes has id %q", ev.Offset, len(ev.Bytes), ev.ID)
	}
	return nil
}

// decodeOutput decodes an output event's data of the shape the server
// writes ({"offset":N,"text":"…"} or {"offset":N,"base64":"…"}, the
// string with only the escapes \" \\ \n \r \t \b \f \u00XX) without
// encoding/json, which would cost most of a fast stream's time; false
// leaves anything else to it. The bytes go to a buffer of their own, or
// into *dst (kept: its buffer is reused) when dst is not nil.
func (ev *StreamEvent) decodeOutput(dst *[]byte) bool {
	d, ok := bytes.CutPrefix(ev.Data, []byte(`{"offset":`))
	if !ok {
		return false
	}
	i := 0
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	off, err := strconv.ParseInt(string(d[:i]), 10, 64)
	if err != nil || i > 18 {
		return false
	}
	d = d[i:]
	body, ok := bytes.CutSuffix(d, []byte(`"}`))
	if !ok {
		return false
	}
	var out []byte
	if dst != nil {
		out = (*dst)[:0]
	}
	if s, ok := bytes.CutPrefix(body, []byte(`,"base64":"`)); ok {
		b, err := base64.StdEncoding.AppendDecode(out, s)
		if err != nil {
			return false
		}
		ev.Offset, ev.Bytes = off, b
		if dst != nil {
			*dst = b
		}
		return true
	}
	s, ok := bytes.CutPrefix(body, []byte(`,"text":"`))
	if !ok {
		return false
	}
	if out == nil {
		out = make([]byte, 0, len(s))
	}
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			k = len(s)
		}
		if bytes.IndexByte(s[:k], '"') >= 0 {
			return false // the string ends early: not our shape
		}
		if k == len(s) {
			out = append(out, s...)
			break
		}
		out = append(out, s[:k]...)
		s = s[k:]
		if len(s) < 2 {
			return false
		}
		switch s[1] {
		case '"', '\\', '/':
			out = append(out, s[1])
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			if len(s) < 6 || s[2] != '0' || s[3] != '0' {
				return false
			}
			v, err := strconv.ParseUint(string(s[4:6]), 16, 8)
			if err != nil || v >= 0x80 {
				return false
			}
			out = append(out, byte(v))
			s = s[6:]
			continue
		default:
			return false
		}
		s = s[2:]
	}
	if !utf8.Valid(out) {
		return false
	}
	ev.Offset, ev.Bytes = off, out
	if dst != nil {
		*dst = out
	}
	return true
}

// Copy writes every chunk of the stream to w until the end event, which
// it returns. The events it reads share their buffers (each chunk is
// written before the next is read), so a fast stream costs no garbage; w
// must not keep the bytes it is given (as io.Writer says).
func (s *Stream) Copy(w io.Writer) (*StreamEvent, error) {
	s.reuse = true
	defer func() { s.reuse = false }()
	for {
		ev, err := s.Next()
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case EventOutput:
			if _, err := w.Write(ev.Bytes); err != nil {
				return nil, fmt.Errorf("write output of job %s: %w", s.id, err)
			}
		case EventEnd:
			return ev, nil
		}
	}
}
