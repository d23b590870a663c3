package snapshot

import (
	"archive/tar"
	"errors"
	"io"
	"sync"
	"time"
)

// A restore runs as two stages, as `zstd -d | tar -x` does: the calling
// goroutine decodes the archive and checks each entry, and a writer
// goroutine applies the entries to Home (creating, writing and closing
// files: system calls that mostly cost kernel time). On 2 cores the two
// overlap; in one goroutine (or with the zstd decoder's own goroutines,
// which measured no faster than decoding inline) they add up. The stages
// hand over batches: the checked entries of a stretch of the archive and
// their contents, read straight into the batch's buffer, so no byte of
// contents is copied more than before. (The prefetcher below adds one
// copy of the compressed bytes, 1 % of the samples, to take the socket's
// reads off the reading stage.)
const (
	// restoreBatchBytes is the file contents one batch carries: the
	// decoder copies into it what it used to copy into the one copy
	// buffer, and the writer writes from it.
	restoreBatchBytes = 256 << 10
	// restoreBatchEntries bounds the entries of one batch, so a stretch
	// of empty files, directories or links is handed over as soon as a
	// batch of contents would be.
	restoreBatchEntries = 256
	// restoreBatches is how many batches exist: one being filled, one
	// being written and two queued, so neither stage waits for the other
	// over a small file. Memory: restoreBatches × restoreBatchBytes (1 MiB)
	// in place of the former 256 KiB copy buffer.
	restoreBatches = 4
)

// piece is one entry of a batch, or a stretch of a file's contents that
// did not fit in the batch that holds its entry.
type piece struct {
	kind  byte   // the entry's tar type (TypeRegA arrives as TypeReg)
	more  bool   // more contents of the file of the piece before
	raw   string // the entry's name in the archive, for messages
	name  string // cleaned, relative to Home
	perm  uint32
	mtime time.Time
	link  string // symlink target or hard link name
	data  []byte // file contents: a slice of the batch's buffer
	end   bool   // a file's contents end with this piece
}

type batch struct {
	buf    []byte
	used   int
	pieces []piece
}

func (b *batch) full() bool {
	return b.used == len(b.buf) || len(b.pieces) == cap(b.pieces)
}

func (b *batch) reset() {
	clear(b.pieces) // drop the strings of the last batch
	b.pieces, b.used = b.pieces[:0], 0
}

// errWriterStopped is what flush and add return to the reading stage once
// the writer stage has stopped on an error; Restore answers the writer's
// own error (close returns it) in its place.
var errWriterStopped = errors.New("restore writer stopped")

// pipeline is the hand-over between the two stages of a restore.
type pipeline struct {
	work chan *batch   // to the writer, in archive order
	free chan *batch   // back from the writer, to be filled again
	done chan struct{} // closed when the writer has returned
	err  error         // the writer's error, read after done
	cur  *batch        // the batch being filled
	shut bool          // closed already: close is safe to call twice
}

// newPipeline starts the writer stage: apply is called on each batch in
// archive order, in one goroutine, until it fails.
func newPipeline(apply func(*batch) error) *pipeline {
	p := &pipeline{
		work: make(chan *batch, restoreBatches),
		free: make(chan *batch, restoreBatches),
		done: make(chan struct{}),
	}
	for range restoreBatches - 1 {
		p.free <- &batch{buf: make([]byte, restoreBatchBytes), pieces: make([]piece, 0, restoreBatchEntries)}
	}
	p.cur = &batch{buf: make([]byte, restoreBatchBytes), pieces: make([]piece, 0, restoreBatchEntries)}
	go func() {
		defer close(p.done)
		for b := range p.work {
			if testHookApply != nil {
				testHookApply()
			}
			if err := apply(b); err != nil {
				p.err = err
				return
			}
			b.reset()
			p.free <- b // never blocks: there are only restoreBatches batches
		}
	}()
	return p
}

// testHookApply, when set (tests only), runs in the writer before each
// batch is applied.
var testHookApply func()

// flush hands the batch being filled to the writer and takes an empty one.
func (p *pipeline) flush() error {
	if len(p.cur.pieces) == 0 {
		return nil
	}
	select {
	case <-p.done: // stopped: read no further (work has room even then)
		return errWriterStopped
	default:
	}
	select {
	case p.work <- p.cur:
	case <-p.done:
		return errWriterStopped
	}
	select {
	case p.cur = <-p.free:
		return nil
	case <-p.done:
		return errWriterStopped
	}
}

// add appends an entry without contents.
func (p *pipeline) add(pc piece) error {
	if p.cur.full() {
		if err := p.flush(); err != nil {
			return err
		}
	}
	p.cur.pieces = append(p.cur.pieces, pc)
	return nil
}

// addFile appends a regular file and reads its contents from r into the
// batches. A read error is returned as readFailed, for the caller to
// classify.
func (p *pipeline) addFile(pc piece, r io.Reader) (readFailed, err error) {
	for {
		if p.cur.full() {
			if err := p.flush(); err != nil {
				return nil, err
			}
		}
		b := p.cur
		start := b.used
		var rerr error
		for b.used < len(b.buf) {
			n, err := r.Read(b.buf[b.used:])
			b.used += n
			if err != nil {
				rerr = err
				break
			}
		}
		pc.data = b.buf[start:b.used:b.used]
		pc.end = rerr == io.EOF
		b.pieces = append(b.pieces, pc)
		switch {
		case rerr == io.EOF:
			return nil, nil
		case rerr != nil:
			return rerr, nil
		}
		// The continuation keeps the entry's header fields: the piece
		// that ends the file is the one whose mode and mtime endFile
		// applies, and it may be any of them.
		pc.more, pc.data, pc.end = true, nil, false
	}
}

// close hands over what is left, waits for the writer to finish and
// returns its error. After close, nothing of the pipeline runs.
func (p *pipeline) close() error {
	if p.shut {
		return p.err
	}
	p.shut = true
	if len(p.cur.pieces) > 0 {
		select {
		case p.work <- p.cur:
		case <-p.done:
		}
	}
	close(p.work)
	<-p.done
	return p.err
}

// pieceOf makes the piece of a checked entry.
func pieceOf(hdr *tar.Header, name string) piece {
	kind := hdr.Typeflag
	if kind == tar.TypeRegA {
		kind = tar.TypeReg
	}
	return piece{kind: kind, raw: hdr.Name, name: name, perm: entryPerm(hdr), mtime: hdr.ModTime, link: hdr.Linkname}
}

const (
	// prefetchChunk and prefetchChunks: the request body is read ahead in
	// its own goroutine into 4 × 128 KiB (a zstd block is at most
	// 128 KiB), so the socket's copies, a sixth of the reading stage's
	// time through the server, leave that stage, which is the longer one.
	prefetchChunk  = 128 << 10
	prefetchChunks = 4
)

// prefetcher reads r ahead in its own goroutine. Its Read serves the
// bytes in order, then the error that ended r (io.EOF at its end). Only
// one goroutine may call Read.
//
// stop ends it without waiting for a read of r under way: such a read
// waits for a peer's next bytes, which a peer that stalls may not send
// for as long as the connection's deadline (the whole operation's, 30
// minutes by default). The goroutine drops what that read brings and ends
// as soon as it returns, without reading r again.
type prefetcher struct {
	full     chan []byte // chunks read, in order; closed after the last
	free     chan []byte
	stopped  chan struct{} // closed by stop
	stopOnce sync.Once
	err      error  // what ended r; read after full is closed
	cur      []byte // the unread rest of the chunk being served
	last     []byte // that chunk, given back once served
}

// errPrefetchStopped is what Read returns once stop was called: the
// restore has failed already, and that failure is what it answers.
var errPrefetchStopped = errors.New("restore stopped reading the body")

func newPrefetcher(r io.Reader) *prefetcher {
	p := &prefetcher{
		full:    make(chan []byte, prefetchChunks),
		free:    make(chan []byte, prefetchChunks),
		stopped: make(chan struct{}),
	}
	for range prefetchChunks {
		p.free <- make([]byte, prefetchChunk)
	}
	go p.run(r)
	return p
}

func (p *prefetcher) run(r io.Reader) {
	defer close(p.full) // after p.err is set: Read sees it once full is closed
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stopped:
			return
		}
		select {
		case <-p.stopped: // free and stopped were both ready
			return
		default:
		}
		n, err := r.Read(buf[:cap(buf)])
		select {
		case <-p.stopped:
			return // what the read brought is dropped; r is not read again
		default:
		}
		if n > 0 {
			p.full <- buf[:n] // never blocks: as many places as chunks
		} else {
			p.free <- buf
		}
		if err != nil {
			p.err = err
			return
		}
	}
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.last != nil {
			p.free <- p.last // never blocks
			p.last = nil
		}
		select {
		case buf, ok := <-p.full:
			if !ok {
				return 0, p.err
			}
			p.cur, p.last = buf, buf
		case <-p.stopped:
			return 0, errPrefetchStopped
		}
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// stop ends the reading ahead and unblocks Read, without waiting for a
// read of r under way (see prefetcher); any goroutine may call it, more
// than once.
func (p *prefetcher) stop() {
	p.stopOnce.Do(func() { close(p.stopped) })
}
