package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fakeSocket hands pumpAttach the messages a test sends, one per read,
// and says which read was asked for: the (k+1)th means the kth message
// was queued.
type fakeSocket struct {
	msgs  chan attachMsg
	asked chan int
	reads int // the reader's
	sent  int // the test's
}

func newFakeSocket() *fakeSocket {
	return &fakeSocket{msgs: make(chan attachMsg), asked: make(chan int, 1000)}
}

func (f *fakeSocket) read(ctx context.Context) (attachMsg, error) {
	f.reads++
	f.asked <- f.reads
	select {
	case m, ok := <-f.msgs:
		if !ok {
			return attachMsg{}, io.EOF // the client went
		}
		return m, nil
	case <-ctx.Done():
		return attachMsg{}, ctx.Err()
	}
}

// send hands the socket's reader msgs and waits until it queued them all.
func (f *fakeSocket) send(t *testing.T, msgs ...attachMsg) {
	t.Helper()
	for _, m := range msgs {
		f.msgs <- m
	}
	f.sent += len(msgs)
	for {
		select {
		case n := <-f.asked:
			if n == f.sent+1 {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the reader did not come back for more after %d messages", f.sent)
		}
	}
}

func bin(s string) attachMsg { return attachMsg{typ: websocket.MessageBinary, data: []byte(s)} }
func txt(s string) attachMsg { return attachMsg{typ: websocket.MessageText, data: []byte(s)} }

// doer records what pumpAttach does, holding each call until the test
// lets it go when gated.
type doer struct {
	got   chan attachMsg
	gate  chan struct{}
	calls []attachMsg
}

func (d *doer) do(ctx context.Context, m attachMsg) {
	d.calls = append(d.calls, attachMsg{typ: m.typ, data: append([]byte(nil), m.data...)})
	d.got <- m
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
		}
	}
}

func describe(ms []attachMsg) string {
	var b bytes.Buffer
	for _, m := range ms {
		kind := "bin"
		if m.typ == websocket.MessageText {
			kind = "text"
		}
		fmt.Fprintf(&b, "%s(%q) ", kind, m.data)
	}
	return b.String()
}

// TestAttachInputCoalesced: input messages that come while one input is
// being done (on its way to the job's runner) are done as one, in order;
// a control message stays between the bytes sent before it and those
// after, never merged or moved; the client's going lets what it sent be
// done, then the pump ends with its reader. Without the inbox each
// message was one call (one runner request, one round trip).
func TestAttachInputCoalesced(t *testing.T) {
	f := newFakeSocket()
	d := &doer{got: make(chan attachMsg, 100), gate: make(chan struct{})}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		pumpAttach(context.Background(), f.read, d.do)
	}()
	f.send(t, bin("first"))
	<-d.got // held: the rest queue behind it
	var want []attachMsg
	want = append(want, bin("first"))
	var before, after bytes.Buffer
	var queued []attachMsg
	for i := 0; i < 50; i++ {
		s := fmt.Sprintf("a%02d,", i)
		before.WriteString(s)
		queued = append(queued, bin(s))
	}
	queued = append(queued, txt(`{"type":"eof"}`))
	for i := 0; i < 30; i++ {
		s := fmt.Sprintf("b%02d,", i)
		after.WriteString(s)
		queued = append(queued, bin(s))
	}
	queued = append(queued, txt(`{"type":"resize","cols":90,"rows":30}`), bin(""), bin("last"))
	f.send(t, queued...)
	want = append(want, bin(before.String()), txt(`{"type":"eof"}`), bin(after.String()),
		txt(`{"type":"resize","cols":90,"rows":30}`), bin("last"))
	close(f.msgs) // the client goes with all of it still queued
	close(d.gate)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("the pump did not end after the client went; done so far: %s", describe(d.calls))
	}
	if got, w := describe(d.calls), describe(want); got != w {
		t.Errorf("done:\n%s\nwant (the 50 and the 30 input messages each merged, the control messages between them):\n%s", got, w)
	}
}

// TestAttachInboxBounded: while what is held reaches attachInboxBytes
// the reader waits before it reads the socket again (the client is held
// back), and reads once bytes were done; a merge stops at
// attachBatchBytes.
func TestAttachInboxBounded(t *testing.T) {
	q := newAttachInbox()
	gone, cancel := context.WithCancel(context.Background())
	cancel() // waitRoom answers at once: room, or not
	msg := bytes.Repeat([]byte("x"), 64<<10)
	n := 0
	for q.waitRoom(gone) == nil {
		q.put(bin(string(msg)))
		n++
		if n > 1000 {
			t.Fatal("the inbox took 64 MiB without holding the reader back")
		}
	}
	if n*len(msg) != attachInboxBytes {
		t.Errorf("the reader was held back after %d bytes, want %d", n*len(msg), attachInboxBytes)
	}
	m, ok := q.next(context.Background())
	if !ok || len(m.data) != n*len(msg) || len(m.data) > attachBatchBytes {
		t.Fatalf("next: %d bytes (ok %v), want the %d queued merged, at most %d", len(m.data), ok, n*len(msg), attachBatchBytes)
	}
	if q.waitRoom(gone) == nil {
		t.Error("room before the merged input was done: its bytes are still held")
	}
	q.done(m)
	if err := q.waitRoom(gone); err != nil {
		t.Errorf("no room once every byte was done: %v", err)
	}
	// Messages that together pass attachBatchBytes go in two.
	big := bytes.Repeat([]byte("y"), attachBatchBytes-10)
	q.put(bin(string(big)))
	q.put(bin("0123456789ab"))
	m1, _ := q.next(context.Background())
	m2, _ := q.next(context.Background())
	if len(m1.data) != len(big) || string(m2.data) != "0123456789ab" {
		t.Errorf("merge past the bound: %d then %d bytes, want %d then 12", len(m1.data), len(m2.data), len(big))
	}
}

// TestAttachPumpEndsWithItsContext: a doer held (a job that does not
// read) and a reader waiting on the socket both end when the connection's
// context does (the job's end was sent, or the server stops), and the
// pump returns only once its reader is gone.
func TestAttachPumpEndsWithItsContext(t *testing.T) {
	f := newFakeSocket()
	d := &doer{got: make(chan attachMsg, 100), gate: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		pumpAttach(ctx, f.read, d.do)
	}()
	f.send(t, bin("held"))
	<-d.got
	f.send(t, bin("queued"))
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the pump did not end with its context")
	}
	if len(d.calls) != 1 {
		t.Errorf("done after the context ended: %s", describe(d.calls))
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal(ctx.Err())
	}
}
