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
type scrubReader struct {
	r     io.ReadCloser
	pairs []pair
	keep  int // longest value - 1
	in    []byte
	out   []byte
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
	for len(s.out) == 0 {
		if s.eof {
			if len(s.in) == 0 {
				return 0, s.err
			}
			s.emit(len(s.in), true)
			continue
		}
		if s.buf == nil {
			s.buf = make([]byte, scrubChunk)
		}
		n, err := s.r.Read(s.buf)
		s.in = append(s.in, s.buf[:n]...)
		if err != nil {
			s.eof, s.err = true, err
			continue
		}
		if safe := len(s.in) - s.partial(); safe > 0 {
			s.emit(safe, false)
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
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

// partial is the length of the longest end of s.in that is the start of
// some value (a value not yet whole), 0 when there is none.
func (s *scrubReader) partial() int {
	from := max(len(s.in)-s.keep, 0)
	for p := from; p < len(s.in); p++ {
		tail := s.in[p:]
		for _, pr := range s.pairs {
			if len(tail) < len(pr.value) && bytes.HasPrefix(pr.value, tail) {
				return len(tail)
			}
		}
	}
	return 0
}

func (s *scrubReader) Close() error { return s.r.Close() }
