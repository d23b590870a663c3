// Package sanitize turns raw terminal (pty) output into text an agent can read.
//
// The Sanitizer is a streaming state machine: bytes are fed with Write in
// whatever pieces the pty returned them, and every construct (escape
// sequences, CR LF pairs, multi-byte characters) is recognised even when it
// is split across Writes. The rules (see shared/spec/jobs.md, "The
// sanitizer"):
//
//   - ANSI/VT sequences are removed whole: CSI (ESC [ … final byte 0x40–0x7E),
//     the strings OSC, DCS, SOS, PM and APC (ESC ] P X ^ _ … up to BEL or
//     ESC \) and the short escapes (ESC, intermediate bytes 0x20–0x2F, one
//     final byte, e.g. ESC 7 or ESC ( B).
//   - C0 controls other than \n and \t are dropped, and so is DEL (0x7f).
//   - \r\n becomes \n; a \r followed by text starts the line over, so
//     progress frames collapse to the last one. Repeated \r (\r\r\n) count
//     as one.
//   - Invalid UTF-8 becomes U+FFFD, one per invalid byte, exactly as Go's
//     utf8.DecodeRune walks the stream.
//   - A line is written once it ends. The partial line is held because a
//     later \r may erase it; Flush writes it (the caller does so after a
//     short idle so prompts show). Text that follows a flush continues the
//     line; a \r followed by text after a flush begins a new line instead.
//
// 8-bit C1 controls are not interpreted: input is UTF-8, so a lone 0x9B is
// an invalid byte and becomes U+FFFD.
package sanitize

import (
	"encoding/binary"
	"errors"
	"io"
	"unicode/utf8"
)

// LineCap bounds the held partial line. A line is held only because a later
// \r could still erase it; past 64 KiB that is not worth the memory, so the
// line is written as a partial line (as Flush would) and held memory stays
// bounded whatever the input, e.g. 100 MB without a newline. 64 KiB is far
// longer than any progress bar or prompt, so normal output is unaffected.
const LineCap = 64 << 10

// outHigh is how much finished output may collect inside one Write before it
// is written to w, so a single huge Write never grows the buffer unbounded.
const outHigh = 64 << 10

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("sanitize: write after close")

var (
	replacement = []byte(string(utf8.RuneError))
	tab         = []byte{'\t'}
)

type state uint8

const (
	stGround state = iota
	stEsc          // after ESC
	stEscInt       // ESC + intermediate bytes, waiting for the final byte
	stCSI          // ESC [ params/intermediates, waiting for the final byte
	stStr          // inside OSC/DCS/SOS/PM/APC, up to BEL or ESC \
	stStrEsc       // ESC seen inside a string
)

// Sanitizer is a streaming pty-output sanitizer. It is not safe for
// concurrent use.
type Sanitizer struct {
	w io.Writer

	// buf holds finished output not yet written (buf[:lineStart]) followed
	// by the current partial line (buf[lineStart:]).
	buf       []byte
	lineStart int

	flushed bool // part of the current line was already written to w
	cr      bool // a \r was seen and no text has followed it yet
	st      state

	utf  [utf8.UTFMax]byte // an incomplete character carried across Writes
	nutf int

	err    error
	closed bool
}

// New returns a Sanitizer writing sanitized output to w.
func New(w io.Writer) *Sanitizer {
	return &Sanitizer{w: w, buf: make([]byte, 0, 4096)}
}

// Write feeds raw terminal bytes. Every line finished by p is written to w
// before Write returns (in one w.Write call when it fits in the buffer); a
// trailing partial line is held. It returns len(p) unless writing to w fails.
func (s *Sanitizer) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.closed {
		return 0, ErrClosed
	}
	q := p
	if s.nutf > 0 {
		q = s.finishRune(q)
	}
	s.process(q)
	s.writeFinished()
	if s.err != nil {
		return 0, s.err
	}
	return len(p), nil
}

// Flush writes the held partial line now; it is a no-op when none is held.
// Text arriving later continues that line, but a \r followed by text then
// begins a new line.
func (s *Sanitizer) Flush() error {
	if s.err != nil {
		return s.err
	}
	s.writeFinished()
	if len(s.buf) > 0 {
		s.flushPartial()
	}
	return s.err
}

// Pending reports whether a partial line is held (Flush would write it).
func (s *Sanitizer) Pending() bool {
	return len(s.buf) > s.lineStart
}

// Close ends the input: an incomplete trailing character becomes U+FFFD per
// byte, an unfinished escape sequence is dropped, and whatever is held is
// written. Later Writes fail with ErrClosed. Close is idempotent.
func (s *Sanitizer) Close() error {
	if s.closed || s.err != nil {
		return s.err
	}
	s.closed = true
	s.st = stGround
	for ; s.nutf > 0; s.nutf-- {
		s.text(replacement)
	}
	if len(s.buf) > 0 {
		s.write(s.buf)
		s.buf = s.buf[:0]
		s.lineStart = 0
	}
	return s.err
}

// write sends b to w, recording the first error.
func (s *Sanitizer) write(b []byte) {
	if s.err != nil {
		return
	}
	n, err := s.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.err = err
	}
}

// writeFinished writes the finished lines and moves the partial line to the
// front of buf.
func (s *Sanitizer) writeFinished() {
	if s.lineStart == 0 {
		return
	}
	s.write(s.buf[:s.lineStart])
	n := copy(s.buf, s.buf[s.lineStart:])
	s.buf = s.buf[:n]
	s.lineStart = 0
}

// flushPartial writes all of buf (finished lines and the partial line) and
// marks the current line as partly written.
func (s *Sanitizer) flushPartial() {
	s.write(s.buf)
	s.buf = s.buf[:0]
	s.lineStart = 0
	s.flushed = true
}

// newline ends the current line.
func (s *Sanitizer) newline() {
	s.cr = false
	s.flushed = false
	s.buf = append(s.buf, '\n')
	s.lineStart = len(s.buf)
	if s.lineStart >= outHigh {
		s.write(s.buf)
		s.buf = s.buf[:0]
		s.lineStart = 0
	}
}

// text appends valid UTF-8 text (no controls) to the current line, applying
// a pending \r and the line cap.
func (s *Sanitizer) text(b []byte) {
	if s.cr {
		s.cr = false
		if s.flushed {
			// Part of this line is already out and cannot be erased:
			// the restarted line goes on a new line.
			s.newline()
		} else {
			s.buf = s.buf[:s.lineStart]
		}
	}
	for len(b) > 0 {
		room := LineCap - (len(s.buf) - s.lineStart)
		if len(b) <= room {
			s.buf = append(s.buf, b...)
			return
		}
		// Fill up to the cap on a character boundary, then write the line.
		k := room
		for k > 0 && !utf8.RuneStart(b[k]) {
			k--
		}
		s.buf = append(s.buf, b[:k]...)
		b = b[k:]
		s.flushPartial()
	}
}

// control executes a C0 control byte (other than ESC) in any state.
func (s *Sanitizer) control(c byte) {
	switch c {
	case '\n':
		s.newline()
	case '\r':
		s.cr = true
	case '\t':
		s.text(tab)
	}
}

// finishRune completes a character carried from the previous Write with the
// first bytes of q and returns the rest of q.
func (s *Sanitizer) finishRune(q []byte) []byte {
	var tmp [utf8.UTFMax]byte
	copy(tmp[:], s.utf[:s.nutf])
	k := copy(tmp[s.nutf:], q)
	m := s.nutf + k
	if !utf8.FullRune(tmp[:m]) {
		// Still incomplete (q was shorter than the rest of the character).
		s.utf = tmp
		s.nutf = m
		return q[k:]
	}
	r, size := utf8.DecodeRune(tmp[:m])
	if r == utf8.RuneError && size == 1 {
		// The carried bytes are a valid prefix cut off by q: the lead byte
		// and the continuation bytes after it are each invalid.
		for ; s.nutf > 0; s.nutf-- {
			s.text(replacement)
		}
		return q
	}
	used := size - s.nutf
	s.nutf = 0
	s.text(tmp[:size])
	return q[used:]
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special reports whether any byte of the 8-byte little-endian word x is a
// C0 control (< 0x20) or DEL (0x7f). Bytes >= 0x80 are not special: they are
// text candidates checked as UTF-8. Both tests are exact about whether such
// a byte exists (borrows only happen after a byte that matched).
func special(x uint64) bool {
	lt20 := (x - ones*0x20) & ^x & highs
	y := x ^ (ones * 0x7f)
	del := (y - ones) & ^y & highs
	return lt20|del != 0
}

// process runs p through the state machine.
func (s *Sanitizer) process(p []byte) {
	n := len(p)
	i := 0
	for i < n {
		if s.st != stGround {
			i = s.escape(p, i)
			continue
		}
		// Fast path: a run of text bytes (>= 0x20, not DEL), 8 at a time.
		j := i
		var hi uint64
		for j+8 <= n {
			x := binary.LittleEndian.Uint64(p[j:])
			if special(x) {
				break
			}
			hi |= x
			j += 8
		}
		for j < n {
			c := p[j]
			if c < 0x20 || c == 0x7f {
				break
			}
			hi |= uint64(c)
			j++
		}
		if j > i {
			run := p[i:j]
			if hi&highs == 0 || utf8.Valid(run) {
				s.text(run)
			} else if s.textRun(run, j == n) {
				return // an incomplete character at the end was carried
			}
			i = j
			if i == n {
				break
			}
		}
		c := p[i]
		i++
		switch c {
		case 0x1b:
			s.st = stEsc
		case '\n':
			s.newline()
		case '\r':
			s.cr = true
		case '\t':
			s.text(p[i-1 : i])
		}
		// other C0 controls and DEL are dropped
	}
}

// textRun emits a run of text bytes that is not valid UTF-8 as it stands:
// valid characters pass, each invalid byte becomes U+FFFD. When the run ends
// the input (atEnd) with an incomplete but possibly valid character, that
// character is carried to the next Write and textRun reports true.
func (s *Sanitizer) textRun(run []byte, atEnd bool) bool {
	start, k := 0, 0
	for k < len(run) {
		if run[k] < utf8.RuneSelf {
			k++
			continue
		}
		if atEnd && !utf8.FullRune(run[k:]) {
			if start < k {
				s.text(run[start:k])
			}
			s.nutf = copy(s.utf[:], run[k:])
			return true
		}
		r, size := utf8.DecodeRune(run[k:])
		if r == utf8.RuneError && size == 1 {
			if start < k {
				s.text(run[start:k])
			}
			s.text(replacement)
			k++
			start = k
			continue
		}
		k += size
	}
	if start < k {
		s.text(run[start:k])
	}
	return false
}

// isStringStart reports whether c after ESC opens a control string.
func isStringStart(c byte) bool {
	return c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_'
}

// escape consumes bytes of an escape sequence starting at p[i] until the
// sequence ends or p does; it returns the index of the next unconsumed byte.
func (s *Sanitizer) escape(p []byte, i int) int {
	for i < len(p) && s.st != stGround {
		c := p[i]
		switch s.st {
		case stEsc, stEscInt:
			switch {
			case c == '[' && s.st == stEsc:
				s.st = stCSI
			case isStringStart(c) && s.st == stEsc:
				s.st = stStr
			case c >= 0x20 && c <= 0x2f:
				s.st = stEscInt
			case c >= 0x30 && c <= 0x7e:
				s.st = stGround
			case c == 0x1b:
				s.st = stEsc // a new escape replaces the unfinished one
			case c == 0x18 || c == 0x1a: // CAN, SUB abort the sequence
				s.st = stGround
			case c < 0x20:
				s.control(c) // executed without leaving the sequence
			case c == 0x7f:
				// ignored
			default:
				// Not part of any escape: abandon it, reprocess as text.
				s.st = stGround
				return i
			}
		case stCSI:
			switch {
			case c >= 0x20 && c <= 0x3f:
				// parameters and intermediates
			case c >= 0x40 && c <= 0x7e:
				s.st = stGround
			case c == 0x1b:
				s.st = stEsc
			case c == 0x18 || c == 0x1a:
				s.st = stGround
			case c < 0x20:
				s.control(c)
			case c == 0x7f:
			default:
				s.st = stGround
				return i
			}
		case stStr:
			// Skip the string body quickly up to a byte that can end it.
			for i < len(p) {
				c = p[i]
				if c == 0x07 || c == 0x1b || c == 0x18 || c == 0x1a {
					break
				}
				i++
			}
			if i == len(p) {
				return i
			}
			if c == 0x1b {
				s.st = stStrEsc
			} else {
				s.st = stGround
			}
		case stStrEsc:
			if c == '\\' {
				s.st = stGround
			} else {
				// ESC ends the string and starts a new escape sequence.
				s.st = stEsc
				continue
			}
		}
		i++
	}
	return i
}
