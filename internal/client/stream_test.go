package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// sseServer serves data as a stream in pieces of step bytes (base64 for
// pieces that are not valid UTF-8), ending the first connection (without
// an end event) after cut events. It records each request's resume point.
type sseServer struct {
	data []byte
	step int
	cut  int

	mu      sync.Mutex
	resumes []string // "offset=N" or "last=N" per request
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer tok" {
		http.Error(w, `{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}`, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	first := len(s.resumes) == 0
	from, raw := "offset", r.URL.Query().Get("offset")
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		from, raw = "last", h
	}
	s.resumes = append(s.resumes, from+"="+raw)
	s.mu.Unlock()
	off, _ := strconv.Atoi(raw)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, ": hello\n\nevent: state\ndata: {\"status\":\"running\",\n")
	fmt.Fprint(w, "data: \"done\":false,\"exit_code\":null}\n\n")
	sent := 0
	for off < len(s.data) {
		if first && sent == s.cut {
			return // the connection breaks
		}
		end := min(len(s.data), off+s.step)
		p := s.data[off:end]
		if utf8.Valid(p) {
			text, _ := json.Marshal(string(p))
			fmt.Fprintf(w, "event: output\nid: %d\ndata: {\"offset\":%d,\"text\":%s}\n\n", end, off, text)
		} else {
			fmt.Fprintf(w, "event: output\nid: %d\ndata: {\"offset\":%d,\"base64\":%q}\n\n", end, off, base64.StdEncoding.EncodeToString(p))
		}
		fmt.Fprint(w, ": keep-alive\n\n")
		off, sent = end, sent+1
	}
	fmt.Fprintf(w, "event: end\ndata: {\"status\":\"exited\",\"exit_code\":3,\"signal\":null,\"reason\":\"exited\",\"offset\":%d}\n\n", len(s.data))
}

func TestStreamResumes(t *testing.T) {
	data := []byte("abc\xff\xfedefghij" + strings.Repeat("k", 200<<10) + "xyz")
	srv := &sseServer{data: data, step: 5, cut: 2}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := &Client{BaseURL: ts.URL, Token: "tok"}
	s := c.Stream(context.Background(), "0123456789abcdef", StreamOptions{Offset: 1})
	var got bytes.Buffer
	var first *StreamEvent
	var end *StreamEvent
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = ev
		}
		switch ev.Type {
		case EventOutput:
			got.Write(ev.Bytes)
			if len(ev.Bytes) > 5 {
				srv.step = 1 << 20 // after the resume: one long line
			}
		case EventEnd:
			end = ev
		}
	}
	if first.Type != EventState || first.Status != "running" || first.Done {
		t.Fatalf("first event %+v: want the state (its data on two lines)", first)
	}
	if !bytes.Equal(got.Bytes(), data[1:]) {
		t.Fatalf("got %d bytes %q…, want %d", got.Len(), got.Bytes()[:min(20, got.Len())], len(data)-1)
	}
	if end == nil || end.Status != "exited" || end.ExitCode == nil || *end.ExitCode != 3 || end.Offset != int64(len(data)) || *end.Reason != "exited" {
		t.Fatalf("end %+v", end)
	}
	if want := []string{"offset=1", "last=11"}; fmt.Sprint(srv.resumes) != fmt.Sprint(want) || s.Reconnects != 1 {
		t.Fatalf("requests resumed at %v (%d reconnects), want %v", srv.resumes, s.Reconnects, want)
	}
}

// TestStreamCopy copies a stream's bytes and returns its end.
func TestStreamCopy(t *testing.T) {
	data := []byte("hello \u4e16\u754c\n\x00\x01\xff")
	ts := httptest.NewServer(&sseServer{data: data, step: 3, cut: -1})
	defer ts.Close()
	c := &Client{BaseURL: ts.URL, Token: "tok"}
	var out bytes.Buffer
	end, err := c.Stream(context.Background(), "0123456789abcdef", StreamOptions{}).Copy(&out)
	if err != nil || end.Offset != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("Copy: %q, end %+v, %v", out.Bytes(), end, err)
	}
}

// TestStreamAPIError: a refused stream is the API's error at once, not a
// reconnect loop.
func TestStreamAPIError(t *testing.T) {
	ts := httptest.NewServer(&sseServer{})
	defer ts.Close()
	c := &Client{BaseURL: ts.URL, Token: "wrong"}
	_, err := c.Stream(context.Background(), "0123456789abcdef", StreamOptions{}).Next()
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != "unauthorized" {
		t.Fatalf("got %v, want the 401 as *Error", err)
	}
}

// TestStreamGap: an output event that does not start where the last
// ended is an error (bytes would be lost or doubled).
func TestStreamGap(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "event: output\nid: 3\ndata: {\"offset\":0,\"text\":\"abc\"}\n\n")
		fmt.Fprint(w, "event: output\nid: 7\ndata: {\"offset\":4,\"text\":\"efg\"}\n\n")
	}))
	defer ts.Close()
	s := (&Client{BaseURL: ts.URL}).Stream(context.Background(), "0123456789abcdef", StreamOptions{})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("got %v, want a gap error", err)
	}
}

// TestDecodeOutputFastPath: the output events' own decoder agrees with
// encoding/json on every string it takes, and leaves the rest to it.
func TestDecodeOutputFastPath(t *testing.T) {
	strs := []string{"", "plain", "a\"b\\c/d", "\n\r\t\x00\x1f\x7f", "\u4e16\u2028<&>", strings.Repeat("line\n", 50)}
	for c := 0; c < 256; c++ {
		strs = append(strs, string(rune(c))+"x")
	}
	taken := 0
	for _, s := range strs {
		text, _ := json.Marshal(s)
		for _, data := range []string{
			fmt.Sprintf(`{"offset":12,"text":%s}`, text),
			fmt.Sprintf(`{"offset":12,"text":%s,"x":1}`, text),
			fmt.Sprintf(`{"offset":12,"base64":%q}`, base64.StdEncoding.EncodeToString([]byte(s))),
		} {
			fast := &StreamEvent{Type: EventOutput, Data: []byte(data)}
			slow := &StreamEvent{Type: EventOutput, Data: []byte(data)}
			if !fast.decodeOutput(nil) {
				continue
			}
			taken++
			slow.ID = fmt.Sprint(12 + len(s))
			if err := slow.decode(); err != nil {
				t.Fatal(err)
			}
			if fast.Offset != 12 || !bytes.Equal(fast.Bytes, []byte(s)) || !bytes.Equal(slow.Bytes, fast.Bytes) {
				t.Fatalf("%s: fast %d %q, json %q", data, fast.Offset, fast.Bytes, slow.Bytes)
			}
		}
	}
	if taken < len(strs) {
		t.Fatalf("the fast path took %d of %d events of the server's shape", taken, 3*len(strs))
	}
	// The server's escapes of backspace and form feed (encoding/json's) too.
	if ev := (&StreamEvent{Type: EventOutput, Data: []byte(`{"offset":3,"text":"a\b\fz"}`)}); !ev.decodeOutput(nil) || string(ev.Bytes) != "a\b\fz" {
		t.Errorf("fast path did not take \\b and \\f: %q", ev.Bytes)
	}
	for _, data := range []string{`{"offset":1,"text":"a"b"}`, `{"offset":1,"text":"\u2028"}`, `{"offset":x,"text":""}`, `{"offset":1,"text":"\q"}`} {
		if (&StreamEvent{Type: EventOutput, Data: []byte(data)}).decodeOutput(nil) {
			t.Errorf("fast path took %s", data)
		}
	}
}

// Copy, which reuses its buffers from event to event, gives the file
// byte for byte through text and base64 chunks and a resume.
func TestStreamCopyReusesBuffersAndStaysExact(t *testing.T) {
	data := []byte("abc\xff\xfedefghij" + strings.Repeat("k\"\\\n\x01é", 40<<10) + "xyz")
	srv := &sseServer{data: data, step: 70 << 10, cut: 2}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := &Client{BaseURL: ts.URL, Token: "tok"}
	var got bytes.Buffer
	end, err := c.Stream(context.Background(), "0123456789abcdef", StreamOptions{}).Copy(&got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("Copy gave %d bytes, want the %d of the file", got.Len(), len(data))
	}
	if end.Type != EventEnd || end.Offset != int64(len(data)) || !strings.Contains(string(end.Data), `"status":"exited"`) {
		t.Fatalf("end event %+v (data %s)", end, end.Data)
	}
}

// A fast stream read with Copy makes next to no garbage: its events'
// buffers are reused, not made anew for each 64 KiB chunk.
func TestStreamCopyAllocatesLittlePerEvent(t *testing.T) {
	const events, chunk = 200, 64 << 10
	text := strings.Repeat(strings.Repeat("y", 99)+"\n", chunk/100)
	quoted, _ := json.Marshal(text)
	var body bytes.Buffer
	for i := 0; i < events; i++ {
		off := i * len(text)
		fmt.Fprintf(&body, "event: output\nid: %d\ndata: {\"offset\":%d,\"text\":%s}\n\n", off+len(text), off, quoted)
	}
	fmt.Fprintf(&body, "event: end\ndata: {\"status\":\"exited\",\"exit_code\":0,\"signal\":null,\"reason\":\"exited\",\"offset\":%d}\n\n", events*len(text))
	sse := body.Bytes()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	defer ts.Close()
	c := &Client{BaseURL: ts.URL}
	var n countingWriter
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := c.Stream(context.Background(), "0123456789abcdef", StreamOptions{}).Copy(&n); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n != countingWriter(events*len(text)) {
		t.Fatalf("Copy gave %d bytes, want %d", n, events*len(text))
	}
	if per := (after.TotalAlloc - before.TotalAlloc) / events; per > chunk/4 {
		t.Fatalf("Copy allocated %d bytes per %d-byte event", per, len(text))
	}
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
