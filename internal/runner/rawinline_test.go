package runner

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// TestSizeEventInlinesRawWhileAttached: while raw requests come (an
// attach), an out event whose raw growth is small carries exactly the
// ring's bytes between the previous event's raw size and its own; before
// any request, after a growth too large, and once the window since the
// last request has passed, it carries none.
func TestSizeEventInlinesRawWhileAttached(t *testing.T) {
	a, b := net.Pipe()
	c := proto.NewConn(a)
	r := &Runner{sizeCh: make(chan struct{}, 1), done: make(chan struct{}),
		conns: map[*proto.Conn]struct{}{c: {}}, screenStart: inProcScreen(t)}
	r.spec = &Spec{Mode: "pty", Cols: 80, Rows: 24}
	r.log = newLogger(io.Discard)
	events := make(chan *proto.Msg, 1<<10)
	onOutputEvents(b, func(m *proto.Msg) { events <- m })
	go r.sendSizes()
	f, why := r.screenFeed()
	if f == nil {
		t.Fatal(why)
	}
	t.Cleanup(func() { close(r.done); a.Close(); b.Close(); f.close() })

	var all []byte // every raw byte put, from offset 0
	// write puts p as a read of the terminal (before the ring exists,
	// which alone announces raw growth, output.log grows by a byte so an
	// event comes), then returns the first event that announces it,
	// having checked that every event's bytes are the raw bytes just
	// before its raw size.
	write := func(p []byte) *proto.Msg {
		t.Helper()
		all = append(all, p...)
		attached := r.rawSize.Load() > 0 || f.ring != nil
		f.put(p)
		if !attached {
			r.grew(1)
		}
		deadline := time.After(5 * time.Second)
		for {
			select {
			case m := <-events:
				if len(m.Data) > 0 && (m.RawSize > int64(len(all)) || !bytes.Equal(m.Data, all[m.RawSize-int64(len(m.Data)):m.RawSize])) {
					t.Fatalf("event at raw size %d carries %q, not the raw bytes that end there", m.RawSize, m.Data)
				}
				if attached && m.RawSize == int64(len(all)) || !attached && m.Size == r.size.Load() {
					return m
				}
			case <-deadline:
				t.Fatalf("no event for raw size %d", len(all))
			}
		}
	}

	if m := write([]byte("before any attach\r\n")); len(m.Data) > 0 || m.RawSize != 0 {
		t.Fatalf("before any raw request the event carries raw size %d and %q, want neither", m.RawSize, m.Data)
	}
	if ack := r.rawRequest(&proto.Msg{T: proto.TRaw, RawSize: int64(len(all))}); ack.Err != "" && ack.Err != ErrRawGone {
		t.Fatalf("raw request: %s", ack.Err)
	}
	// The first announcement: from 0 (nothing announced before), so
	// whatever it carries is checked by write, not asked for.
	write([]byte("$ "))
	for _, p := range []string{"echo hi\r\n", "hi\r\n$ ", "\x1b[31mred\x1b[0m"} {
		before := int64(len(all))
		m := write([]byte(p))
		if string(m.Data) != p || m.RawSize != before+int64(len(p)) {
			t.Fatalf("attached, the event after %q carries %q at raw size %d, want exactly those bytes ending at %d", p, m.Data, m.RawSize, before+int64(len(p)))
		}
	}
	if m := write([]byte(strings.Repeat("x", rawInlineMax+1))); len(m.Data) > 0 {
		t.Fatalf("a growth of %d bytes (over %d) was inlined", rawInlineMax+1, rawInlineMax)
	}
	if m := write([]byte("small again")); string(m.Data) != "small again" {
		t.Fatalf("after a large growth, a small one carries %q", m.Data)
	}
	// The client left: no raw request for longer than the window.
	r.rawAsked.Store(time.Now().Add(-rawInlineFor - time.Second).UnixNano())
	if m := write([]byte("nobody attached")); len(m.Data) > 0 || m.RawSize != int64(len(all)) {
		t.Fatalf("with no raw request for %v, the event carries %q at raw size %d (want none, at %d)", rawInlineFor, m.Data, m.RawSize, len(all))
	}
}
