package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/jobs"
)

// fakeFollower is a job whose file and status a test drives.
type fakeFollower struct {
	mu      sync.Mutex
	data    []byte
	status  string
	done    bool
	changed chan struct{}
	reads   int
	wait    *bool
}

func newFake() *fakeFollower {
	return &fakeFollower{status: "running", changed: make(chan struct{})}
}

func (f *fakeFollower) change(fn func()) {
	f.mu.Lock()
	fn()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeFollower) State(context.Context) (jobs.FollowState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := jobs.FollowState{Status: f.status, Done: f.done, Size: int64(len(f.data)), InputWait: f.wait}
	if !f.done {
		st.Changed = f.changed
	}
	return st, nil
}

func (f *fakeFollower) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return copy(p, f.data[off:]), nil
}

func (f *fakeFollower) End(context.Context) (*jobs.FollowEnd, error) {
	code := 0
	reason := "exited"
	return &jobs.FollowEnd{Status: "exited", ExitCode: &code, Reason: &reason}, nil
}

type sse struct{ typ, id, data string }

// serveFake serves fw's stream from off; events arrive on the channel.
func serveFake(t *testing.T, fw follower, off int64, stop chan struct{}) <-chan sse {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_ = serveStream(r.Context(), w, fw, off, stop)
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close(); srv.CloseClientConnections() })
	out := make(chan sse, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				out <- ev
				ev = sse{}
			case strings.HasPrefix(line, ":"):
				ev.typ = "comment" + line
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan sse) sse {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("stream closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10 s")
	}
	return sse{}
}

// chunkBytes decodes an output event's bytes and checks its id.
func chunkBytes(t *testing.T, ev sse) (int64, []byte) {
	t.Helper()
	var d struct {
		Offset int64
		Text   *string
		Base64 *string
	}
	if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
		t.Fatalf("output data %q: %v", ev.data, err)
	}
	var b []byte
	switch {
	case d.Text != nil && d.Base64 == nil:
		b = []byte(*d.Text)
	case d.Base64 != nil && d.Text == nil:
		var err error
		if b, err = base64.StdEncoding.DecodeString(*d.Base64); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("output data %q has not exactly one of text, base64", ev.data)
	}
	if want := fmt.Sprint(d.Offset + int64(len(b))); ev.id != want {
		t.Fatalf("output event id %q, want %s (data %s)", ev.id, want, ev.data)
	}
	return d.Offset, b
}

// TestStreamEvents: state first, chunks on UTF-8 boundaries with an
// incomplete character held until it completes, raw bytes as base64,
// the bytes reassembled exactly, and end last with the final size.
func TestStreamEvents(t *testing.T) {
	fw := newFake()
	fw.data = []byte("hi \"x\"\t\x01\n\xe4\xb8")
	ch := serveFake(t, fw, 0, nil)
	if ev := next(t, ch); ev.typ != "state" || !strings.Contains(ev.data, `"status":"running"`) {
		t.Fatalf("first event %+v, want state running", ev)
	}
	ev := next(t, ch)
	if ev.typ != "output" {
		t.Fatalf("got %+v, want output", ev)
	}
	off, b := chunkBytes(t, ev)
	if off != 0 || string(b) != "hi \"x\"\t\x01\n" || !strings.Contains(ev.data, `"text"`) {
		t.Fatalf("first chunk at %d %q (%s): the incomplete character must be held", off, b, ev.data)
	}
	fw.change(func() { fw.data = append(fw.data, "\x96\xff\xfeok"...) })
	var got []byte
	got = append(got, b...)
	for _, want := range []string{"\u4e16", "\xff\xfe", "ok"} {
		ev := next(t, ch)
		off, b := chunkBytes(t, ev)
		if off != int64(len(got)) || string(b) != want {
			t.Fatalf("chunk at %d %q, want at %d %q", off, b, len(got), want)
		}
		got = append(got, b...)
	}
	fw.change(func() { fw.data = append(fw.data, '\xe4'); fw.status = "exited"; fw.done = true })
	ev = next(t, ch)
	if off, b := chunkBytes(t, ev); off != int64(len(got)) || string(b) != "\xe4" || !strings.Contains(ev.data, "base64") {
		t.Fatalf("final incomplete byte: %+v", ev)
	}
	// The change after the bytes written before it.
	if ev := next(t, ch); ev.typ != "state" || !strings.Contains(ev.data, `"exited"`) {
		t.Fatalf("got %+v, want state exited", ev)
	}
	ev = next(t, ch)
	if ev.typ != "end" || ev.data != fmt.Sprintf(`{"status":"exited","exit_code":0,"signal":null,"reason":"exited","offset":%d}`, len(fw.data)) {
		t.Fatalf("last event %+v, want end", ev)
	}
	if _, ok := <-ch; ok {
		t.Fatal("stream not closed after end")
	}
}

// TestStreamKeepAlive: an idle stream sends a comment every interval.
func TestStreamKeepAlive(t *testing.T) {
	old := StreamKeepAlive
	StreamKeepAlive = 50 * time.Millisecond
	t.Cleanup(func() { StreamKeepAlive = old })
	ch := serveFake(t, newFake(), 0, nil)
	next(t, ch) // state
	start := time.Now()
	for range 3 {
		if ev := next(t, ch); ev.typ != "comment: keep-alive" {
			t.Fatalf("got %+v, want a keep-alive comment", ev)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("3 keep-alives took %v at a 50 ms interval", d)
	}
}

// TestStreamBoundedReads: a backlog bigger than one read goes in reads
// of at most streamRead bytes, from the offset asked.
func TestStreamBoundedReads(t *testing.T) {
	fw := newFake()
	fw.data = []byte(strings.Repeat("a", 5*streamRead+10))
	fw.status, fw.done = "exited", true
	ch := serveFake(t, fw, 7, nil)
	next(t, ch)
	at := int64(7)
	for {
		ev := next(t, ch)
		if ev.typ == "end" {
			break
		}
		off, b := chunkBytes(t, ev)
		if off != at || len(b) > streamRead {
			t.Fatalf("chunk at %d of %d bytes, want at %d, at most %d", off, len(b), at, streamRead)
		}
		at += int64(len(b))
	}
	if at != int64(len(fw.data)) || fw.reads != 6 {
		t.Fatalf("read to %d in %d reads, want %d in 6", at, fw.reads, len(fw.data))
	}
}

// TestStreamStop: streams end when the server shuts down.
func TestStreamStop(t *testing.T) {
	stop := make(chan struct{})
	ch := serveFake(t, newFake(), 0, stop)
	next(t, ch)
	close(stop)
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("an event after stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open 5 s after stop")
	}
}

// TestStreamTextEncoding: the stream's text (the JobResult's hand-made
// encoder, appendString) is JSON that decodes to the same text, on one line.
func TestStreamTextEncoding(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\n\r\t\x00\x1f\x7f", "<&>\u2028\u4e16", strings.Repeat("x\n", 100)} {
		enc := appendString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil || got != s {
			t.Errorf("%q encoded %s decodes to %q, %v", s, enc, got, err)
		}
		if strings.ContainsAny(string(enc), "\n\r") {
			t.Errorf("%q encoded %q spans lines", s, enc)
		}
	}
}

// TestStreamInputWait: an input_wait event each time the job's input-wait
// flag changes (none while the job's view does not track it).
func TestStreamInputWait(t *testing.T) {
	fw := newFake()
	ch := serveFake(t, fw, 0, nil)
	next(t, ch) // state
	yes, no := true, false
	fw.change(func() { fw.data = []byte("x") })
	if ev := next(t, ch); ev.typ != "output" {
		t.Fatalf("got %+v, want output (no input_wait while untracked)", ev)
	}
	for _, w := range []*bool{&yes, &no} {
		fw.change(func() { fw.wait = w; fw.data = append(fw.data, '>') })
		if ev := next(t, ch); ev.typ != "output" {
			t.Fatalf("got %+v, want the output (a prompt) before input_wait", ev)
		}
		if ev := next(t, ch); ev.typ != "input_wait" || ev.data != fmt.Sprintf(`{"waiting":%v}`, *w) {
			t.Fatalf("got %+v, want input_wait %v", ev, *w)
		}
	}
	// An unrelated change sends no repeat.
	fw.change(func() { fw.data = append(fw.data, 'y') })
	if ev := next(t, ch); ev.typ != "output" {
		t.Fatalf("got %+v, want output", ev)
	}
}
