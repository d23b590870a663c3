package api

// The client's messages on an attach socket, between the goroutine that
// reads the socket and the one that does them (attachRead). Reading runs
// ahead of doing, so that the input messages that came while one input
// was on its way to the job's runner go to it together: one runner
// request, one round trip, for what was many messages. Without it every
// message waited for the runner's answer to the one before it before the
// next was even read, and the bench's 64 KiB messages through `cat` ran
// at a twentieth of a bare pipe.
//
// What it keeps: the order (a control message is done after every byte
// before it and before any after it; bytes are never reordered, dropped
// or refused), the backpressure (the inbox holds a bounded number of
// bytes; while it is full the socket is not read, which holds the client
// back by the WebSocket's own flow control, as before), and the end (the
// reader's end lets the doer finish what was read, then both are gone).

import (
	"context"
	"io"
	"slices"
	"sync"

	"github.com/coder/websocket"
)

// attachInboxBytes bounds the bytes an attach connection holds of its
// client's messages, read and not yet done (those on their way to the
// runner included): the socket is read only while fewer are held, so a
// connection holds at most this plus one message (attachReadLimit).
const attachInboxBytes = 1 << 20

// attachBatchBytes bounds the input merged into one request: the size of
// the largest message a client may send (attachReadLimit), so a runner
// gets no larger input than one message could already bring it (a pty
// runner queues 64 inputs for a terminal that is not read; its bound in
// bytes stays what it was).
const attachBatchBytes = attachReadLimit

// attachMsg is one message from the client, or (binary) several
// consecutive input messages merged.
type attachMsg struct {
	typ  websocket.MessageType
	data []byte
	buf  *[]byte // data's buffer, from attachBufs (nil: not pooled)
}

// attachInbox is the queue between the reader and the doer.
type attachInbox struct {
	mu     sync.Mutex
	msgs   []attachMsg
	held   int  // bytes of msgs and of the batch being done
	closed bool // the reader ended: no more messages
	// more and room wake the doer (a message, or the end) and the
	// reader (bytes done); each holds one wake-up, so none is lost
	// between a look at the queue and the wait that follows it.
	more chan struct{}
	room chan struct{}
}

func newAttachInbox() *attachInbox {
	return &attachInbox{more: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// waitRoom waits until the inbox holds fewer than attachInboxBytes, or
// ctx ends (its error).
func (q *attachInbox) waitRoom(ctx context.Context) error {
	for {
		q.mu.Lock()
		full := q.held >= attachInboxBytes
		q.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// put queues one message; it never waits (the reader waited for room
// before it read the message).
func (q *attachInbox) put(m attachMsg) {
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.held += len(m.data)
	q.mu.Unlock()
	wake(q.more)
}

// close says the reader ended: once what is queued is done, next says so.
func (q *attachInbox) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	wake(q.more)
}

// next takes the oldest message, with every input message queued right
// behind it merged into it (up to attachBatchBytes); ok false once the
// reader ended and all was taken, or ctx ended (then nothing more is
// done). The bytes stay held until done is called with the message.
func (q *attachInbox) next(ctx context.Context) (m attachMsg, ok bool) {
	for {
		if ctx.Err() != nil {
			return attachMsg{}, false
		}
		q.mu.Lock()
		if len(q.msgs) > 0 {
			m = q.take()
			q.mu.Unlock()
			return m, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return attachMsg{}, false
		}
		select {
		case <-q.more:
		case <-ctx.Done():
			return attachMsg{}, false
		}
	}
}

// take removes the head of the queue, merged with the input behind it;
// q.mu is held.
func (q *attachInbox) take() attachMsg {
	head := q.msgs[0]
	k, size := 1, len(head.data)
	if head.typ == websocket.MessageBinary {
		for k < len(q.msgs) && q.msgs[k].typ == websocket.MessageBinary && size+len(q.msgs[k].data) <= attachBatchBytes {
			size += len(q.msgs[k].data)
			k++
		}
	}
	if k > 1 {
		p := getAttachBuf(size)
		b := *p
		for _, m := range q.msgs[:k] {
			b = append(b, m.data...)
			putAttachBuf(m.buf)
		}
		head = attachMsg{typ: head.typ, data: b, buf: p}
	}
	clear(q.msgs[:k]) // the queue's array keeps no bytes it let go of
	q.msgs = q.msgs[k:]
	if len(q.msgs) == 0 {
		q.msgs = nil
	}
	return head
}

// done lets go of m's bytes: the reader may read again.
func (q *attachInbox) done(m attachMsg) {
	putAttachBuf(m.buf)
	q.mu.Lock()
	q.held -= len(m.data)
	q.mu.Unlock()
	wake(q.room)
}

// attachBufs holds the buffers of the client's messages between uses: a
// stream of input would otherwise allocate, clear and let go of about
// twice its size per message (a whole message read grows its buffer by
// doubling), and memory given back to the system and faulted in again
// was much of what the stream cost the server. A sync.Pool lets the
// buffers go when the streams stop (at a collection).
var attachBufs sync.Pool

// getAttachBuf is an empty buffer of attachBufs, with room for n bytes
// when one that large is kept.
func getAttachBuf(n int) *[]byte {
	if p, ok := attachBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, 0, max(n, 4<<10))
	return &b
}

func putAttachBuf(p *[]byte) {
	if p != nil && cap(*p) <= attachBatchBytes {
		*p = (*p)[:0]
		attachBufs.Put(p)
	}
}

// readAttach reads one message of c's into a buffer of attachBufs, as
// c.Read does into a new one.
func readAttach(ctx context.Context, c *websocket.Conn) (attachMsg, error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return attachMsg{}, err
	}
	p := getAttachBuf(0)
	b := *p
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b)) // doubled, as ReadAll does
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*p = b
			putAttachBuf(p)
			return attachMsg{}, err
		}
	}
	*p = b
	return attachMsg{typ: typ, data: b, buf: p}, nil
}

// pumpAttach reads messages with read (until it fails) into an inbox on a
// goroutine of its own, and does them with do, in order, merged as next
// merges them, until the reader ended and all it read was done, or ctx
// ended. It returns once the reader is gone too.
func pumpAttach(ctx context.Context, read func(context.Context) (attachMsg, error), do func(context.Context, attachMsg)) {
	q := newAttachInbox()
	readerGone := make(chan struct{})
	go func() {
		defer close(readerGone)
		defer q.close()
		for {
			if err := q.waitRoom(ctx); err != nil {
				return
			}
			m, err := read(ctx)
			if err != nil {
				return
			}
			q.put(m)
		}
	}()
	for {
		m, ok := q.next(ctx)
		if !ok {
			break
		}
		do(ctx, m)
		q.done(m)
	}
	// Either the reader ended (the queue was closed), or ctx did, which
	// ends its wait for room and its read.
	<-readerGone
}
