//go:build !shellctl_stream_client

package main

// A stand-in reader of GET /v1/jobs/{id}/stream (extended-api.md §1) for
// as long as internal/client has no stream client of its own: the events
// the command line needs (output, state, end), one connection, no resume.
// It goes when client.Stream comes (the stream helper's
// internal/client/stream.go): delete this file and the build line of
// stream_adapter.go, which maps the same names onto client.Stream. The
// code that uses it sees only openStream, jobStream and streamEvent.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/shellctl/shellctl/internal/client"
)

// Event types of the stream.
const (
	evOutput = "output"
	evState  = "state"
	evEnd    = "end"
)

// streamEvent is one event: output carries Offset and Bytes, state and end
// Status and ExitCode.
type streamEvent struct {
	Type     string
	Offset   int64
	Bytes    []byte
	Status   string
	ExitCode *int
}

type jobStream struct {
	ctx    context.Context
	c      *client.Client
	id     string
	ch     string
	next   int64
	body   io.ReadCloser
	rd     *bufio.Reader
	closed bool
}

// openStream opens the stream of channel ("output" or "stderr") of job id
// from offset; the connection is made by the first Next.
func openStream(ctx context.Context, c *client.Client, id, channel string, offset int64) *jobStream {
	return &jobStream{ctx: ctx, c: c, id: id, ch: channel, next: offset}
}

func (s *jobStream) Offset() int64 { return s.next }

func (s *jobStream) Close() error {
	s.closed = true
	if s.body != nil {
		return s.body.Close()
	}
	return nil
}

func (s *jobStream) connect() error {
	q := url.Values{"offset": {strconv.FormatInt(s.next, 10)}}
	if s.ch != "" {
		q.Set("channel", s.ch)
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, strings.TrimRight(s.c.BaseURL, "/")+"/v1/jobs/"+url.PathEscape(s.id)+"/stream?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.c.Token)
	}
	hc := s.c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		var env struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
			return &client.Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
		}
		return &client.Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(raw))}
	}
	s.body, s.rd = resp.Body, bufio.NewReaderSize(resp.Body, 64<<10)
	return nil
}

// Next returns the next event; io.EOF after end.
func (s *jobStream) Next() (*streamEvent, error) {
	if s.closed {
		return nil, io.EOF
	}
	if s.body == nil {
		if err := s.connect(); err != nil {
			return nil, err
		}
	}
	typ, data := "message", []byte(nil)
	for {
		line, err := s.rd.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("stream of job %s: %w", s.id, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if data == nil {
				typ = "message"
				continue
			}
			ev, err := s.decode(typ, data)
			if err != nil || ev != nil {
				return ev, err
			}
			typ, data = "message", nil
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
}

func (s *jobStream) decode(typ string, data []byte) (*streamEvent, error) {
	var d struct {
		Offset   int64   `json:"offset"`
		Text     *string `json:"text"`
		Base64   *string `json:"base64"`
		Status   string  `json:"status"`
		ExitCode *int    `json:"exit_code"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("stream of job %s: %s event: %w", s.id, typ, err)
	}
	ev := &streamEvent{Type: typ, Offset: d.Offset, Status: d.Status, ExitCode: d.ExitCode}
	switch typ {
	case evOutput:
		switch {
		case d.Text != nil:
			ev.Bytes = []byte(*d.Text)
		case d.Base64 != nil:
			b, err := base64.StdEncoding.DecodeString(*d.Base64)
			if err != nil {
				return nil, fmt.Errorf("stream of job %s: output at %d: %w", s.id, d.Offset, err)
			}
			ev.Bytes = b
		}
		if ev.Offset != s.next {
			return nil, fmt.Errorf("stream of job %s: output at %d, want %d", s.id, ev.Offset, s.next)
		}
		s.next += int64(len(ev.Bytes))
	case evEnd:
		s.Close()
	case evState:
	default:
		return nil, nil // input_wait and others: not needed here
	}
	return ev, nil
}
