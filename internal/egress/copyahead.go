package egress

import (
	"io"
	"sync"
)

// copyAhead copies src to dst through a ring that one goroutine fills
// from src while the caller writes to dst what is in it: each write
// takes everything read since the last one began.
//
// An interception decrypts on one side and encrypts on the other. Done
// in one loop, each read of the upstream (one TLS record, at most 16 KiB)
// became one write to the job, and each write a chunk of the job's
// answer: a chunk header, a flush of the server's small buffer and the
// record, two records and two system calls where one would do. Reading
// ahead lets the two sides run on two cores, and when the job's side is
// the slower one its writes grow to what piled up meanwhile (large
// chunks, full records); when it is the faster one it writes each read
// at once, so a stream's event is never held back.
//
// flush, if not nil, is called whenever the ring is left empty by a
// write (an event stream's answer goes out as soon as it is written).
// abort must make a pending src.Read return: it is called when a write
// fails, and copyAhead returns only once its goroutine has ended.
// The result is the write's error, or src's other than io.EOF.
func copyAhead(dst io.Writer, src io.Reader, buf []byte, flush func(), abort func()) error {
	r := &ring{buf: buf}
	r.moved.L = &r.mu
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.fill(src)
	}()
	err := r.drain(dst, flush)
	if err != nil {
		r.mu.Lock()
		r.stopped = true
		r.moved.Broadcast()
		r.mu.Unlock()
		abort()
	}
	<-done
	return err
}

// ring holds what was read from src and not yet written to dst:
// buf[tail%len : head%len], wrapping.
type ring struct {
	mu         sync.Mutex
	moved      sync.Cond // head or tail moved, or one side ended
	buf        []byte
	head, tail int64 // bytes read in, bytes written out
	rerr       error // src's end (io.EOF included)
	stopped    bool  // a write failed: stop reading
}

func (r *ring) fill(src io.Reader) {
	size := int64(len(r.buf))
	for {
		r.mu.Lock()
		for r.head-r.tail == size && !r.stopped {
			r.moved.Wait()
		}
		if r.stopped {
			r.mu.Unlock()
			return
		}
		free := size - (r.head - r.tail)
		at := int(r.head % size)
		r.mu.Unlock()
		// The free space from head up to the end of buf or to tail.
		end := min(len(r.buf), at+int(free))
		n, err := src.Read(r.buf[at:end])
		r.mu.Lock()
		r.head += int64(n)
		if err != nil {
			r.rerr = err
		}
		r.moved.Broadcast()
		r.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (r *ring) drain(dst io.Writer, flush func()) error {
	size := int64(len(r.buf))
	for {
		r.mu.Lock()
		for r.head == r.tail && r.rerr == nil {
			r.moved.Wait()
		}
		head, tail, rerr := r.head, r.tail, r.rerr
		r.mu.Unlock()
		if head == tail {
			if rerr == io.EOF {
				return nil
			}
			return rerr
		}
		// What was read, from tail up to head or to the end of buf.
		at := int(tail % size)
		end := min(len(r.buf), at+int(head-tail))
		if _, err := dst.Write(r.buf[at:end]); err != nil {
			return err
		}
		r.mu.Lock()
		r.tail += int64(end - at)
		empty := r.head == r.tail
		r.moved.Broadcast()
		r.mu.Unlock()
		if empty && flush != nil {
			flush()
		}
	}
}
