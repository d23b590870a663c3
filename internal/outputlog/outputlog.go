// Package outputlog reads windows of a job's output.log for the API: windows
// never split a UTF-8 character, bytes that are not valid UTF-8 are sent as
// U+FFFD and still consumed, so a client that keeps following the returned
// offset always reaches the end (see shared/spec/http-api.md, "wait").
//
// Decoding follows Go's utf8.DecodeRune walking the file from offset 0: a
// valid character is one unit, every other byte is one invalid unit that
// becomes U+FFFD. Windows are cut only between units, so concatenating the
// windows a client gets by following the offsets from 0 equals the whole
// file decoded that way (for a valid UTF-8 file: exactly the file).
package outputlog

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// ErrOffset is returned (wrapped) for an offset outside [0, size].
var ErrOffset = errors.New("outputlog: offset out of range")

// maxPooled is the largest buffer kept for reuse: the API caps a window at
// 512 KiB, plus the few bytes of look-around.
const maxPooled = 512<<10 + 64

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10+64); return &b }}

func getBuf(n int) *[]byte {
	bp := bufPool.Get().(*[]byte)
	if cap(*bp) < n {
		b := make([]byte, n)
		*bp = b
	}
	*bp = (*bp)[:n]
	return bp
}

func putBuf(bp *[]byte) {
	if cap(*bp) <= maxPooled {
		bufPool.Put(bp)
	}
}

// isCont reports whether c is a UTF-8 continuation byte.
func isCont(c byte) bool { return c&0xC0 == 0x80 }

// Window reads from f (output.log) starting at offset, at most limit bytes of
// the file, never past size (the file size known to the caller).
//
//   - A window starting inside a UTF-8 character moves forward to the next
//     character start: the skipped continuation bytes are consumed, not sent.
//     The limit counts from that character start.
//   - The window ends on a character boundary: a character that would cross
//     the limit is left for the next window, except that a window always
//     holds at least one unit when any is available (a limit smaller than one
//     character still returns that whole character).
//   - Bytes that are not valid UTF-8 are returned as U+FFFD (one per byte) and
//     still consumed.
//   - final says size is final (the job is done, nothing more will be
//     written). When it is false, an incomplete character at the very end
//     (its bytes so far are a valid prefix and reach size) is not consumed:
//     the window stops before it, because the writer may complete it later.
//     When final is true such bytes are consumed as U+FFFD each, so the
//     client reaches size.
//
// next is the file offset just after the consumed bytes. truncated reports
// that more bytes existed past the window that it could have returned but
// for limit, i.e. next < size — except that an incomplete trailing character
// held back because final is false does not count (asking again at once
// would return nothing, so it is not reported as more output).
//
// limit < 1 is treated as 1. An offset outside [0, size] is an error
// wrapping ErrOffset. Window reads only limit plus a few bytes of f.
func Window(f io.ReaderAt, offset, size int64, limit int, final bool) (text string, next int64, truncated bool, err error) {
	v, err := ReadWindow(f, offset, size, limit, final)
	if err != nil {
		return "", offset, false, err
	}
	text = string(v.Text)
	v.Release()
	return text, v.Next, v.Truncated, nil
}

// A View is a window as ReadWindow read it: Text is the window's text
// (valid UTF-8), Next and Truncated as Window says. Text may alias a
// buffer that is reused once Release is called: the text must not be used
// after that. A View never released is simply left to the collector.
type View struct {
	Text      []byte
	Next      int64
	Truncated bool
	bp        *[]byte
}

// String is Text as a string that shares its bytes: like Text it must not
// be used after Release. (A window is up to 512 KiB: copying it into a
// string of its own, then into the answer, cost a page read as much as
// the read itself, and its garbage more.)
func (v *View) String() string { return unsafe.String(unsafe.SliceData(v.Text), len(v.Text)) }

// Release gives Text's buffer back for reuse; Text is then empty. It may
// be called more than once.
func (v *View) Release() {
	v.Text = nil
	if v.bp != nil {
		putBuf(v.bp)
		v.bp = nil
	}
}

// ReadWindow is Window without the copy: the text stays in the buffer it
// was read into, until the View is released.
func ReadWindow(f io.ReaderAt, offset, size int64, limit int, final bool) (View, error) {
	if offset < 0 || offset > size {
		return View{Next: offset}, fmt.Errorf("%w: offset %d, size %d", ErrOffset, offset, size)
	}
	if offset == size {
		return View{Next: offset}, nil
	}
	if limit < 1 {
		limit = 1
	}
	if avail := size - offset; int64(limit) > avail {
		limit = int(avail)
	}
	// Read up to 3 bytes before offset (to see whether offset is inside a
	// character), limit bytes, up to 3 bytes skipped at the start and up to
	// 3 bytes to see whether the last character is complete.
	lo := max(0, offset-(utf8.UTFMax-1))
	hi := min(size, offset+int64(limit)+2*(utf8.UTFMax-1))
	bp := getBuf(int(hi - lo))
	b := *bp
	if n, rerr := f.ReadAt(b, lo); n < len(b) {
		putBuf(bp)
		if rerr == nil || rerr == io.EOF {
			rerr = io.ErrUnexpectedEOF
		}
		return View{Next: offset}, fmt.Errorf("outputlog: read %d bytes at %d: %w", len(b), lo, rerr)
	}
	atSize := hi == size // b ends at the end of the known data
	// held: the view is of b, which goes back to the pool on Release.
	held := func(text []byte, next int64, trunc bool) View {
		return View{Text: text, Next: next, Truncated: trunc, bp: bp}
	}

	s := int(offset - lo)
	if isCont(b[s]) {
		// Find the lead byte of a character that could contain offset.
		for k := 1; k < utf8.UTFMax && s-k >= 0; k++ {
			l := s - k
			if !utf8.RuneStart(b[l]) {
				continue
			}
			if !utf8.FullRune(b[l:]) {
				// An incomplete valid prefix reaching the end of the data.
				if !final && atSize {
					putBuf(bp)
					return View{Next: offset}, nil
				}
				break // final: each of its bytes is an invalid unit
			}
			if r, sz := utf8.DecodeRune(b[l:]); (r != utf8.RuneError || sz > 1) && l+sz > s {
				s = l + sz // offset is inside this valid character: skip it
			}
			break
		}
	}

	// Fast path: cut at s+limit, back up to a character start, and check
	// the span is valid UTF-8 as it stands (no U+FFFD, no incomplete tail).
	if e := s + limit; e < len(b) {
		if isCont(b[e]) {
			for l := e - 1; l > s && l >= e-(utf8.UTFMax-1); l-- {
				if utf8.RuneStart(b[l]) {
					if r, sz := utf8.DecodeRune(b[l:]); (r != utf8.RuneError || sz > 1) && l+sz > e {
						e = l
					}
					break
				}
			}
		}
		if e > s && utf8.Valid(b[s:e]) {
			next := lo + int64(e)
			return held(b[s:e], next, next < size && !heldTail(b[e:], final, atSize)), nil
		}
	} else if s < len(b) && utf8.Valid(b[s:]) {
		next := lo + int64(len(b))
		return held(b[s:], next, next < size), nil
	}
	text, next, trunc := slowWindow(b, lo, s, size, limit, final, atSize)
	putBuf(bp)
	return View{Text: text, Next: next, Truncated: trunc}, nil
}

// heldTail reports whether rest, the unconsumed bytes up to the end of b, is
// only an incomplete trailing character that a non-final window holds back.
func heldTail(rest []byte, final, atSize bool) bool {
	return !final && atSize && len(rest) > 0 && !utf8.FullRune(rest)
}

// slowWindow decodes unit by unit from b[s:], replacing invalid bytes.
func slowWindow(b []byte, lo int64, s int, size int64, limit int, final, atSize bool) ([]byte, int64, bool) {
	out := make([]byte, 0, min(len(b)-s, limit+utf8.UTFMax)+16)
	pos := s
	held := false
	for pos < len(b) {
		c := b[pos]
		if c < utf8.RuneSelf {
			if pos-s >= limit {
				break
			}
			out = append(out, c)
			pos++
			continue
		}
		sz, valid := 1, false
		if utf8.FullRune(b[pos:]) {
			var r rune
			r, sz = utf8.DecodeRune(b[pos:])
			valid = r != utf8.RuneError || sz > 1
		} else if !final || !atSize {
			// An incomplete character at the end of the data (held back
			// until it completes), or at the end of what was read (not
			// reached: b extends past the limit by a whole character).
			held = atSize
			break
		}
		if pos > s && pos+sz-s > limit {
			break
		}
		if valid {
			out = append(out, b[pos:pos+sz]...)
		} else {
			out = utf8.AppendRune(out, utf8.RuneError)
		}
		pos += sz
	}
	next := lo + int64(pos)
	return out, next, next < size && !held
}

// Tail returns the last ≤ limit bytes of f before size, started at a
// character boundary (continuation bytes of a character cut by the start are
// skipped, so it may hold fewer bytes), with invalid bytes as U+FFFD. size is
// treated as final: an incomplete trailing character becomes U+FFFD.
// limit < 1 is treated as 1.
func Tail(f io.ReaderAt, size int64, limit int) (string, error) {
	v, err := ReadTail(f, size, limit)
	if err != nil {
		return "", err
	}
	text := string(v.Text)
	v.Release()
	return text, nil
}

// ReadTail is Tail without the copy, as ReadWindow is Window.
func ReadTail(f io.ReaderAt, size int64, limit int) (View, error) {
	if size < 0 {
		return View{}, fmt.Errorf("%w: size %d", ErrOffset, size)
	}
	if limit < 1 {
		limit = 1
	}
	start := max(0, size-int64(limit))
	return ReadWindow(f, start, size, limit, true)
}
