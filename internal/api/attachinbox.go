package api

// The client's messages on an attach socket, read and done (attachRead).
// Reading runs ahead of doing, so that the input messages that came
// while one input was on its way to the job's runner go to it together:
// one runner request for what were many messages. Before, each message
// waited for the runner's answer to the one before it before the next was
// even read.
//
// What it keeps: the order (a control message is done after every byte
// before it and before any after it; bytes are never reordered, dropped
// or refused), the backpressure (the inbox holds a bounded number of
// bytes; while it is full the socket is not read, which holds the client
// back by the WebSocket's own flow control, as before), and the end (the
// reader's end lets what was read be done, then nothing of it is left).

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
	// reading is held by the goroutine reading the socket (one at a
	// time: messages are queued in the order they were read).
	reading sync.Mutex

	mu     sync.Mutex
	msgs   []attachMsg
	held   int  // bytes of msgs and of the batch being done
	doing  bool // a goroutine is doing the queue's messages
	closed bool // the reader ended: no more messages
	// room wakes the reader when bytes were done; it holds one wake-up,
	// so none is lost between a look at the queue and the wait after it.
	room chan struct{}
}

func newAttachInbox() *attachInbox {
	return &attachInbox{room: make(chan struct{}, 1)}
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
// before it read the message). claimed: no one was doing the queue's
// messages, and the caller now is (it calls next until it says no more).
func (q *attachInbox) put(m attachMsg) (claimed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, m)
	q.held += len(m.data)
	claimed = !q.doing
	q.doing = true
	return claimed
}

// close says the reader ended.
func (q *attachInbox) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

func (q *attachInbox) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// next takes the oldest message, with every input message queued right
// behind it merged into it (up to attachBatchBytes), for the goroutine
// doing the queue's messages; ok false when none is left, or ctx ended
// (then nothing more is done), and the caller no longer does them. It
// never waits. The bytes stay held until done is called with the message.
func (q *attachInbox) next(ctx context.Context) (m attachMsg, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 || ctx.Err() != nil {
		q.doing = false
		return attachMsg{}, false
	}
	return q.take(), true
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

// pumpAttach reads messages with read (until it fails) into an inbox
// and does them with do, in order, merged as next merges them, until the
// reader ended and all it read was done, or ctx ended. Two goroutines
// take turns: the one that read a message when none was being done does
// it (no hand-over between reading a lone message and doing it: a line
// typed costs no more than before), and the other reads the socket
// meanwhile, queueing what comes. It returns once both are gone.
func pumpAttach(ctx context.Context, read func(context.Context) (attachMsg, error), do func(context.Context, attachMsg)) {
	q := newAttachInbox()
	work := func() {
		for {
			q.reading.Lock()
			if q.isClosed() {
				q.reading.Unlock()
				return
			}
			m, err := attachMsg{}, q.waitRoom(ctx)
			if err == nil {
				m, err = read(ctx)
			}
			if err != nil {
				// The client went, or ctx ended: what was read is still
				// done (by the goroutine doing it), and no more is read.
				q.close()
				q.reading.Unlock()
				return
			}
			claimed := q.put(m)
			q.reading.Unlock()
			if !claimed {
				continue
			}
			for {
				m, ok := q.next(ctx)
				if !ok {
					break
				}
				do(ctx, m)
				q.done(m)
			}
		}
	}
	other := make(chan struct{})
	go func() {
		defer close(other)
		work()
	}()
	work()
	<-other
}
