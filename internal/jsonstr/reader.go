package jsonstr

// Reader: a JSON reader without reflection, for the hand-written decoders
// of the runner's inputs (its control messages, its spec, its stage's
// replies), so that a runner links no encoding/json.
//
// What it reads decodes as encoding/json decodes it (the callers' tests
// compare the two on what encoding/json writes and on random input), with
// two differences a caller decides about: an object's keys are matched
// exactly (encoding/json also takes a key in another case), and a value
// the caller's field does not take is an error, where encoding/json would
// sometimes skip it.

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Reader reads one JSON value. Its methods return false when the input
// is not JSON of the kind asked for.
type Reader struct {
	b []byte
	i int
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

func (r *Reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// End reports whether only white space is left.
func (r *Reader) End() bool {
	r.ws()
	return r.i == len(r.b)
}

func (r *Reader) eat(c byte) bool {
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// Object reads an object, calling field for each key with the reader at
// its value; field returns false for a key it does not take.
func (r *Reader) Object(field func(key string) bool) bool {
	if !r.eat('{') {
		return false
	}
	if r.eat('}') {
		return true
	}
	for {
		key, ok := r.String()
		if !ok || !r.eat(':') || !field(key) {
			return false
		}
		if r.eat(',') {
			continue
		}
		return r.eat('}')
	}
}

// String reads a string (escapes decoded, invalid UTF-8 and lone
// surrogates as U+FFFD, as encoding/json does).
func (r *Reader) String() (string, bool) {
	if !r.eat('"') {
		return "", false
	}
	start := r.i
	// The common case: nothing to decode.
	for r.i < len(r.b) {
		c := r.b[r.i]
		if c == '"' {
			s := string(r.b[start:r.i])
			r.i++
			return s, true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		r.i++
	}
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if r.i+1 >= len(r.b) {
				return "", false
			}
			e := r.b[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr, ok := r.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(rr) {
					hi := rr
					rr = utf8.RuneError
					if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
						save := r.i
						r.i += 2
						lo, ok := r.hex4()
						if !ok {
							return "", false
						}
						if d := utf16.DecodeRune(hi, lo); d != utf8.RuneError {
							rr = d
						} else {
							r.i = save
						}
					}
				}
				out = utf8.AppendRune(out, rr)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			r.i++
		default:
			rr, size := utf8.DecodeRune(r.b[r.i:])
			if rr == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, r.b[r.i:r.i+size]...)
			}
			r.i += size
		}
	}
	return "", false
}

// hex4 reads the 4 hex digits of a \u escape.
func (r *Reader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}
	v, ok := Hex4(r.b[r.i:])
	if ok {
		r.i += 4
	}
	return v, ok
}

// Hex4 reads the four hexadecimal digits at the start of b (a \u
// escape's, at least 4 bytes), without the string strconv would need.
func Hex4(b []byte) (rune, bool) {
	var v rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

// number is the literal of a JSON number; integer: no fraction, no exponent.
func (r *Reader) number() (lit []byte, integer, ok bool) {
	r.ws()
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	digits := func() int {
		n := 0
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	first := r.i
	n := digits()
	if n == 0 || (n > 1 && r.b[first] == '0') {
		return nil, false, false
	}
	integer = true
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		integer = false
		if digits() == 0 {
			return nil, false, false
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		integer = false
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			return nil, false, false
		}
	}
	return r.b[start:r.i], integer, true
}

// Int reads an integer that fits bits bits.
func (r *Reader) Int(bits int) (int64, bool) {
	lit, integer, ok := r.number()
	if !ok || !integer {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, bits)
	return n, err == nil
}

// Float reads a number as a float64, as encoding/json does.
func (r *Reader) Float() (float64, bool) {
	lit, _, ok := r.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	return f, err == nil
}

// Bool reads true or false.
func (r *Reader) Bool() (bool, bool) {
	r.ws()
	switch {
	case len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "true":
		r.i += 4
		return true, true
	case len(r.b)-r.i >= 5 && string(r.b[r.i:r.i+5]) == "false":
		r.i += 5
		return false, true
	}
	return false, false
}

// Strings reads an array of strings; null is nil (encoding/json writes a
// nil slice so when the field has no omitempty).
func (r *Reader) Strings() ([]string, bool) {
	r.ws()
	if len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return nil, true
	}
	if !r.eat('[') {
		return nil, false
	}
	l := []string{}
	if r.eat(']') {
		return l, true
	}
	for {
		s, ok := r.String()
		if !ok {
			return nil, false
		}
		l = append(l, s)
		if r.eat(',') {
			continue
		}
		return l, r.eat(']')
	}
}

// Raw reads any value and returns its bytes (what encoding/json keeps
// in a json.RawMessage).
func (r *Reader) Raw() ([]byte, bool) {
	r.ws()
	start := r.i
	if !r.skip(0) {
		return nil, false
	}
	return append([]byte(nil), r.b[start:r.i]...), true
}

// maxDepth bounds the nesting Raw follows.
const maxDepth = 64

func (r *Reader) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	r.ws()
	if r.i >= len(r.b) {
		return false
	}
	switch c := r.b[r.i]; {
	case c == '{':
		return r.Object(func(string) bool { return r.skip(depth + 1) })
	case c == '[':
		r.i++
		if r.eat(']') {
			return true
		}
		for {
			if !r.skip(depth + 1) {
				return false
			}
			if r.eat(',') {
				continue
			}
			return r.eat(']')
		}
	case c == '"':
		_, ok := r.String()
		return ok
	case c == 't' || c == 'f':
		_, ok := r.Bool()
		return ok
	case c == 'n':
		if len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
			r.i += 4
			return true
		}
		return false
	default:
		_, _, ok := r.number()
		return ok
	}
}

// Null reads null if it is next, and reports whether it was.
func (r *Reader) Null() bool {
	r.ws()
	if len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// Skip reads any value and drops it (an object's key no field takes).
func (r *Reader) Skip() bool { return r.skip(0) }

// Bytes reads a string of standard base64 (padded), as encoding/json
// writes a []byte; null is nil.
func (r *Reader) Bytes() ([]byte, bool) {
	if r.Null() {
		return nil, true
	}
	// The common case, a string of base64 with no escape, is decoded
	// where it lies: no copy of it as a string first (what a runner's
	// input or raw output cost per byte). Such a string ends at the first
	// quote; base64 refuses any byte but its alphabet except line ends,
	// which it skips and a JSON string may not hold raw: those are looked
	// for apart.
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == '"' {
		if n := bytes.IndexByte(r.b[r.i+1:], '"'); n >= 0 {
			src := r.b[r.i+1 : r.i+1+n]
			if bytes.IndexByte(src, '\\') < 0 && bytes.IndexByte(src, '\n') < 0 && bytes.IndexByte(src, '\r') < 0 {
				b := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
				n, err := base64.StdEncoding.Decode(b, src)
				r.i += 1 + len(src) + 1
				return b[:n], err == nil
			}
		}
	}
	s, ok := r.String()
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

// Offset is how far the reader got (for errors).
func (r *Reader) Offset() int { return r.i }

// Array reads an array, calling elem with the reader at each element.
func (r *Reader) Array(elem func() bool) bool {
	if !r.eat('[') {
		return false
	}
	if r.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if r.eat(',') {
			continue
		}
		return r.eat(']')
	}
}
