// Package streamsum counts and hashes (SHA-256) a streamed HTTP answer
// whose outcome is told in trailers, as a snapshot save and a files
// archive tell theirs: the trailers are declared before the header is
// written, and the body's byte count and hash, taken as the bytes go out,
// are set as trailers once the stream has ended whole. A stream cut
// before its trailers is a failure to the client.
package streamsum

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Declare announces names as the trailers of the answer h belongs to; it
// must come before the header is written.
func Declare(h http.Header, names ...string) {
	h.Set("Trailer", strings.Join(names, ", "))
}

// Writer writes to w and counts and hashes what w took.
type Writer struct {
	w     io.Writer
	n     int64
	h     hash.Hash
	async *asyncHash
}

// New counts and hashes on the writing goroutine: for a writer already
// off the producer's path (a compressor's flushing goroutine).
func New(w io.Writer) *Writer { return &Writer{w: w, h: sha256.New()} }

// NewAsync hashes on a goroutine of its own, so hashing and sending
// overlap: each write is copied into one of a few buffers. Close (or Sum)
// ends the goroutine.
func NewAsync(w io.Writer) *Writer { return &Writer{w: w, async: newAsyncHash()} }

func (c *Writer) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.async != nil {
		c.async.write(p[:n])
	} else {
		c.h.Write(p[:n])
	}
	return n, err
}

// Len is the number of bytes written through.
func (c *Writer) Len() int64 { return c.n }

// Sum is the hex SHA-256 of the bytes written through; no write may
// follow.
func (c *Writer) Sum() string {
	if c.async != nil {
		return hex.EncodeToString(c.async.sum())
	}
	return hex.EncodeToString(c.h.Sum(nil))
}

// Close ends the hashing goroutine of NewAsync (a no-op otherwise and
// when done already).
func (c *Writer) Close() {
	if c.async != nil {
		c.async.close()
	}
}

// asyncHash hashes the stream on another goroutine.
type asyncHash struct {
	h    hash.Hash
	ch   chan []byte
	free chan []byte
	done chan struct{}
	once sync.Once
}

func newAsyncHash() *asyncHash {
	a := &asyncHash{h: sha256.New(), ch: make(chan []byte, 4), free: make(chan []byte, 5), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for b := range a.ch {
			a.h.Write(b)
			select {
			case a.free <- b[:0]:
			default: // enough spare: let it go
			}
		}
	}()
	return a
}

func (a *asyncHash) write(p []byte) {
	var b []byte
	select {
	case b = <-a.free:
	default:
	}
	a.ch <- append(b[:0], p...)
}

func (a *asyncHash) close() { a.once.Do(func() { close(a.ch) }) }

// sum is the hash of everything written (the writes are over).
func (a *asyncHash) sum() []byte {
	a.close()
	<-a.done
	return a.h.Sum(nil)
}
