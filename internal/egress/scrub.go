package egress

import (
	"bytes"
	"io"
	"strings"
)

// scrubChunk is how much of an upstream body is read at a time.
const scrubChunk = 32 << 10

// pair is one value and what stands for it.
type pair struct{ value, placeholder []byte }

// scrubString replaces every value of pairs in s by its placeholder.
func scrubString(s string, pairs []pair) string {
	for _, p := range pairs {
		if strings.Contains(s, string(p.value)) {
			s = strings.ReplaceAll(s, string(p.value), string(p.placeholder))
		}
	}
	return s
}

// scrubReader copies r with every value replaced by its placeholder,
// also a value split across two reads: it holds back the end of what it
// has read only when that end could be the start of a value, until it
// knows. (Holding back a fixed length would delay a stream's event until
// the next one: a value never holds a line break, so an event that ends
// with one goes out whole.)
//
// Most of a download holds no value: such a read goes straight into the
// caller's buffer and out again, searched but never copied. Only a read
// that holds a value, or follows bytes held back, goes through in and out,
// whose arrays are kept and reused (a fresh array per read cost more than
// the search and the copies together).
type scrubReader struct {
	r     io.ReadCloser
	pairs []pair
	keep  int    // longest value - 1
	in    []byte // read, not yet given out (held back, or to be scrubbed)
	out   []byte // scrubbed, not yet given out: out[pos:]
	pos   int
	buf   []byte
	eof   bool
	err   error
}

func newScrubReader(r io.ReadCloser, pairs []pair) *scrubReader {
	longest := 0
	for _, p := range pairs {
		longest = max(longest, len(p.value))
	}
	return &scrubReader{r: r, pairs: pairs, keep: max(longest-1, 0)}
}

func (s *scrubReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for s.pos == len(s.out) {
		s.out, s.pos = s.out[:0], 0
		if s.eof {
			if len(s.in) == 0 {
				return 0, s.err
			}
			s.emit(len(s.in), true)
			continue
		}
		if len(s.in) == 0 && len(p) > s.keep {
			n, err := s.r.Read(p)
			if err != nil {
				s.eof, s.err = true, err
			}
			if !s.holdsValue(p[:n]) {
				// Give out all but an end that may start a value;
				// that end waits in s.in for the next read.
				safe := n
				if !s.eof {
					safe -= s.partial(p[:n])
				}
				s.in = append(s.in, p[safe:n]...)
				if safe > 0 {
					return safe, nil
				}
				continue
			}
			s.in = append(s.in, p[:n]...)
		} else {
			if s.buf == nil {
				s.buf = make([]byte, scrubChunk)
			}
			n, err := s.r.Read(s.buf)
			s.in = append(s.in, s.buf[:n]...)
			if err != nil {
				s.eof, s.err = true, err
			}
		}
		if s.eof {
			continue
		}
		if safe := len(s.in) - s.partial(s.in); safe > 0 {
			s.emit(safe, false)
		}
	}
	n := copy(p, s.out[s.pos:])
	s.pos += n
	return n, nil
}

// holdsValue reports whether b holds a whole value.
func (s *scrubReader) holdsValue(b []byte) bool {
	for _, pr := range s.pairs {
		if bytes.Contains(b, pr.value) {
			return true
		}
	}
	return false
}

// emit moves in[:upTo] (and a value that starts there and runs past it,
// which is then whole in s.in) to out, values replaced.
func (s *scrubReader) emit(upTo int, final bool) {
	i := 0
	for i < upTo {
		at, which := -1, -1
		for k, pr := range s.pairs {
			j := bytes.Index(s.in[i:], pr.value)
			if j >= 0 && (at < 0 || j < at) {
				at, which = j, k
			}
		}
		if at < 0 || i+at >= upTo {
			break
		}
		s.out = append(s.out, s.in[i:i+at]...)
		s.out = append(s.out, s.pairs[which].placeholder...)
		i += at + len(s.pairs[which].value)
	}
	if i < upTo {
		s.out = append(s.out, s.in[i:upTo]...)
		i = upTo
	}
	if final {
		i = len(s.in)
	}
	s.in = append(s.in[:0], s.in[i:]...)
}

// partial is the length of the longest end of b that is the start of
// some value (a value not yet whole), 0 when there is none.
func (s *scrubReader) partial(b []byte) int {
	from := max(len(b)-s.keep, 0)
	for p := from; p < len(b); p++ {
		tail := b[p:]
		for _, pr := range s.pairs {
			if len(tail) < len(pr.value) && bytes.HasPrefix(pr.value, tail) {
				return len(tail)
			}
		}
	}
	return 0
}

func (s *scrubReader) Close() error { return s.r.Close() }
