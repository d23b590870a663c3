package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Request bodies are read in one pass by a small JSON scanner instead of
// io.ReadAll + json.Unmarshal. The "big" string fields of the object
// (run's script; input's text and base64) are unescaped straight from the
// read buffer into their sinks as their bytes arrive: a 40 MB script goes
// to its file without ever being whole in memory (io.ReadAll + Unmarshal
// + []byte held three copies). Every other field is copied, bounded, into
// a small object that encoding/json decodes as before, so their rules are
// unchanged.
//
// A big string is unescaped exactly as encoding/json does it (invalid
// UTF-8 and lone surrogates become U+FFFD, a fuzz test compares the two).
// Where encoding/json would give up with a syntax error, so does the
// scanner. The scanner also spots the bare words NaN and Infinity (which
// Python's json module writes for float('nan') and float('inf')) wherever
// a value stands, so that they are answered 422 naming the field rather
// than 400 "not JSON".

// sink receives the decoded bytes of the big field. Reset starts it over
// (a field given twice: the last one wins, as with encoding/json).
type sink interface {
	io.Writer
	Reset() error
}

// bodyError is a request body that cannot be decoded, with the status and
// code it is answered with.
type bodyError struct {
	status int
	code   string
	msg    string
	cause  error
}

func (e *bodyError) Error() string { return e.msg }
func (e *bodyError) Unwrap() error { return e.cause }

func syntaxErr(format string, args ...any) error {
	return &bodyError{status: 400, code: "invalid_request", msg: "request body is not valid JSON: " + fmt.Sprintf(format, args...)}
}

// readErr marks an error of the body's reader (deadline, size limit,
// client gone): the handler tells these apart.
type readErr struct{ err error }

func (e *readErr) Error() string { return "read request body: " + e.err.Error() }
func (e *readErr) Unwrap() error { return e.err }

// maxDepth bounds nesting inside the fields that are copied.
const maxDepth = 64

// bigField is a string field decoded into its sink as it arrives, and
// what became of it.
type bigField struct {
	key   string
	sink  sink
	state int   // bigAbsent, bigString, bigNull
	n     int64 // decoded bytes of the string
}

type decoder struct {
	r       *bufio.Reader
	bigs    []bigField // the big fields (none: every field is copied)
	restMax int        // bytes the copied fields may take

	rest      []byte // the other fields, as a JSON object
	restN     int    // fields copied
	nonFinite string // path of the first NaN/Infinity, "" if none
	nonTok    string // how it was spelled
}

const (
	bigAbsent = iota
	bigString
	bigNull
)

// decode reads the whole body. After it, rest holds the other fields.
func (d *decoder) decode() error {
	d.rest = append(d.rest[:0], '{')
	c, err := d.next()
	if err == io.EOF {
		d.rest = append(d.rest, '}') // an empty body is an empty object
		return nil
	}
	if err != nil {
		return err
	}
	if c != '{' {
		return &bodyError{status: 400, code: "invalid_request", msg: "request body must be a JSON object"}
	}
	for first := true; ; first = false {
		c, err := d.next()
		if err != nil {
			return d.eof(err)
		}
		if c == '}' && first {
			break
		}
		if c != '"' {
			return syntaxErr("expected a field name, found %q", c)
		}
		var kb memSink
		kb.max = d.restMax
		if _, err := d.str(&kb); err != nil {
			return err
		}
		key := string(kb.b)
		if c, err = d.next(); err != nil {
			return d.eof(err)
		}
		if c != ':' {
			return syntaxErr("expected ':' after field name %q, found %q", key, c)
		}
		if b := d.bigOf(key); b != nil {
			if err := d.big(key, b); err != nil {
				return err
			}
		} else {
			if d.restN > 0 {
				d.rest = append(d.rest, ',')
			}
			d.restN++
			kq, _ := json.Marshal(key)
			d.rest = append(d.rest, kq...)
			d.rest = append(d.rest, ':')
			if err := d.value(key, 0); err != nil {
				return err
			}
		}
		if c, err = d.next(); err != nil {
			return d.eof(err)
		}
		if c == '}' {
			break
		}
		if c != ',' {
			return syntaxErr("expected ',' or '}' after field %q, found %q", key, c)
		}
	}
	d.rest = append(d.rest, '}')
	switch c, err := d.next(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	default:
		return syntaxErr("unexpected %q after the top-level object", c)
	}
}

// next returns the next byte that is not JSON white space.
func (d *decoder) next() (byte, error) {
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			if err != io.EOF {
				err = &readErr{err}
			}
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

func (d *decoder) peek() (byte, error) {
	c, err := d.next()
	if err == nil {
		err = d.r.UnreadByte()
	}
	return c, err
}

// eof turns an end of input inside the object into a syntax error.
func (d *decoder) eof(err error) error {
	if err == io.EOF {
		return syntaxErr("unexpected end of input")
	}
	return err
}

func (d *decoder) grow() error {
	if len(d.rest) > d.restMax {
		what := "the request body"
		for i, b := range d.bigs {
			if i == 0 {
				what = "the fields other than " + strconv.Quote(b.key)
			} else {
				what += " and " + strconv.Quote(b.key)
			}
		}
		return &bodyError{status: 413, code: "request_too_large", msg: fmt.Sprintf("%s take more than %d bytes", what, d.restMax)}
	}
	return nil
}

// bigOf is the big field named key (as encoding/json matches names:
// in any case), or nil.
func (d *decoder) bigOf(key string) *bigField {
	for i := range d.bigs {
		if strings.EqualFold(key, d.bigs[i].key) {
			return &d.bigs[i]
		}
	}
	return nil
}

// big reads the value of big field b into its sink, and notes what it
// was and how many bytes it gave.
func (d *decoder) big(key string, b *bigField) error {
	c, err := d.next()
	if err != nil {
		return d.eof(err)
	}
	switch c {
	case '"':
		if err := b.sink.Reset(); err != nil {
			return err
		}
		got, err := d.str(b.sink)
		if err != nil {
			return err
		}
		b.state, b.n = bigString, got
		return nil
	case 'n':
		for _, want := range []byte("ull") {
			if c, err := d.r.ReadByte(); err != nil || c != want {
				return syntaxErr("invalid value of field %q", key)
			}
		}
		if err := b.sink.Reset(); err != nil {
			return err
		}
		b.state, b.n = bigNull, 0
		return nil
	}
	d.r.UnreadByte()
	tok := "a value"
	switch {
	case c == '{':
		tok = "an object"
	case c == '[':
		tok = "an array"
	case c == 't' || c == 'f':
		tok = "a bool"
	case c == '-' || c >= '0' && c <= '9':
		tok = "a number"
	}
	return &bodyError{status: 400, code: "invalid_request", msg: fmt.Sprintf("field %q must be a string, got %s", key, tok)}
}

// value copies one value into rest (c is its first byte, not consumed).
func (d *decoder) value(path string, depth int) error {
	if depth > maxDepth {
		return syntaxErr("field %q nests deeper than %d levels", path, maxDepth)
	}
	c, err := d.next()
	if err != nil {
		return d.eof(err)
	}
	switch c {
	case '"':
		d.rest = append(d.rest, '"')
		return d.rawStr()
	case '{':
		d.rest = append(d.rest, '{')
		for first := true; ; first = false {
			c, err := d.next()
			if err != nil {
				return d.eof(err)
			}
			if c == '}' && first {
				break
			}
			if c != '"' {
				return syntaxErr("expected a field name in %q, found %q", path, c)
			}
			start := len(d.rest) + 1
			d.rest = append(d.rest, '"')
			if err := d.rawStr(); err != nil {
				return err
			}
			sub := path + "." + string(d.rest[start:len(d.rest)-1])
			if c, err = d.next(); err != nil {
				return d.eof(err)
			}
			if c != ':' {
				return syntaxErr("expected ':' in %q, found %q", path, c)
			}
			d.rest = append(d.rest, ':')
			if err := d.value(sub, depth+1); err != nil {
				return err
			}
			if c, err = d.next(); err != nil {
				return d.eof(err)
			}
			if c == '}' {
				break
			}
			if c != ',' {
				return syntaxErr("expected ',' or '}' in %q, found %q", path, c)
			}
			d.rest = append(d.rest, ',')
		}
		d.rest = append(d.rest, '}')
	case '[':
		d.rest = append(d.rest, '[')
		for i := 0; ; i++ {
			if i == 0 {
				if c, err := d.peek(); err != nil {
					return d.eof(err)
				} else if c == ']' {
					d.r.ReadByte()
					break
				}
			}
			if err := d.value(path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
			c, err := d.next()
			if err != nil {
				return d.eof(err)
			}
			if c == ']' {
				break
			}
			if c != ',' {
				return syntaxErr("expected ',' or ']' in %q, found %q", path, c)
			}
			d.rest = append(d.rest, ',')
		}
		d.rest = append(d.rest, ']')
	default:
		// A bare token: number, true, false, null, or junk that
		// encoding/json will name.
		d.r.UnreadByte()
		start := len(d.rest)
		for {
			c, err := d.r.ReadByte()
			if err == io.EOF {
				break
			}
			if err != nil {
				return &readErr{err}
			}
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
				d.r.UnreadByte()
				break
			}
			d.rest = append(d.rest, c)
			if len(d.rest) > d.restMax {
				return d.grow()
			}
		}
		tok := string(d.rest[start:])
		if tok == "" {
			return syntaxErr("expected a value for field %q, found %q", path, c)
		}
		if isNonFinite(tok) && d.nonFinite == "" {
			d.nonFinite, d.nonTok = path, tok
		}
	}
	return d.grow()
}

// isNonFinite reports the spellings of NaN and the infinities that JSON
// writers outside the standard produce (Python: NaN, Infinity, -Infinity).
func isNonFinite(tok string) bool {
	t := strings.ToLower(strings.TrimLeft(tok, "+-"))
	return t == "nan" || t == "inf" || t == "infinity"
}

// rawStr copies a string's bytes as they are, up to and including its
// closing quote (the opening one is consumed). encoding/json checks it.
func (d *decoder) rawStr() error {
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			return d.eof(wrapRead(err))
		}
		d.rest = append(d.rest, c)
		switch c {
		case '"':
			return d.grow()
		case '\\':
			c, err := d.r.ReadByte()
			if err != nil {
				return d.eof(wrapRead(err))
			}
			d.rest = append(d.rest, c)
		}
		if len(d.rest) > d.restMax {
			return d.grow()
		}
	}
}

func wrapRead(err error) error {
	if err == io.EOF {
		return err
	}
	return &readErr{err}
}

// plain8 reports whether the 8 bytes of w are all ASCII a JSON string
// holds as they are: none has its high bit, none is a control character
// (below 0x20), a quote or a backslash. (A borrow that flags a byte above
// one that is flagged can only add to a yes.) A base64 input or a script
// is mostly such runs: 8 bytes a step instead of one.
func plain8(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	if w&hi != 0 {
		return false
	}
	// With no high bit anywhere, x-lo (or x-0x20*lo) sets a byte's high
	// bit where x's byte is 0 (below 0x20).
	q, b := w^(0x22*lo), w^(0x5c*lo) // zero bytes where w has '"', '\\'
	return ((w-0x20*lo)|(q-lo)|(b-lo))&hi == 0
}

// str unescapes a string (the opening quote is consumed) into w, from
// the read buffer: runs of plain bytes are written as they lie there.
func (d *decoder) str(w io.Writer) (int64, error) {
	var n int64
	var esc [utf8.UTFMax]byte
	write := func(p []byte) error {
		if _, err := w.Write(p); err != nil {
			return err
		}
		n += int64(len(p))
		return nil
	}
	for {
		if d.r.Buffered() == 0 {
			if _, err := d.r.Peek(1); err != nil {
				return n, d.eof(wrapRead(err))
			}
		}
		buf, _ := d.r.Peek(d.r.Buffered())
		i := 0
		for i < len(buf) {
			if i+8 <= len(buf) && plain8(binary.LittleEndian.Uint64(buf[i:])) {
				i += 8
				continue
			}
			c := buf[i]
			if c < utf8.RuneSelf {
				if c == '"' || c == '\\' || c < 0x20 {
					break
				}
				i++
				continue
			}
			if !utf8.FullRune(buf[i:]) {
				break
			}
			r, size := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		if i > 0 {
			if err := write(buf[:i]); err != nil {
				return n, err
			}
			d.r.Discard(i)
		}
		if i == len(buf) {
			continue
		}
		switch c := buf[i]; {
		case c == '"':
			d.r.Discard(1)
			return n, nil
		case c == '\\':
			out, used, err := d.escape(esc[:0])
			if err != nil {
				return n, err
			}
			if err := write(out); err != nil {
				return n, err
			}
			d.r.Discard(used)
		case c < 0x20:
			return n, syntaxErr("control character %q in a string", c)
		default:
			// A character cut by the end of the buffer, or bytes that
			// are not UTF-8 (each becomes U+FFFD, as in encoding/json).
			p, err := d.r.Peek(utf8.UTFMax)
			if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
				return n, &readErr{err}
			}
			r, size := utf8.DecodeRune(p)
			out := p[:size]
			if r == utf8.RuneError && size <= 1 {
				size = 1
				out = utf8.AppendRune(esc[:0], unicode.ReplacementChar)
			}
			if err := write(out); err != nil {
				return n, err
			}
			d.r.Discard(size)
		}
	}
}

// escape decodes the escape at the read position into out and says how
// many bytes it took.
func (d *decoder) escape(out []byte) ([]byte, int, error) {
	p, err := d.r.Peek(2)
	if len(p) < 2 {
		return nil, 0, d.eof(wrapRead(err))
	}
	switch p[1] {
	case '"', '\\', '/':
		return append(out, p[1]), 2, nil
	case 'b':
		return append(out, '\b'), 2, nil
	case 'f':
		return append(out, '\f'), 2, nil
	case 'n':
		return append(out, '\n'), 2, nil
	case 'r':
		return append(out, '\r'), 2, nil
	case 't':
		return append(out, '\t'), 2, nil
	case 'u':
	default:
		return nil, 0, syntaxErr("invalid escape \\%c in a string", p[1])
	}
	p, err = d.r.Peek(6)
	if len(p) < 6 {
		if err == io.EOF {
			return nil, 0, syntaxErr("unexpected end of input in a \\u escape")
		}
		return nil, 0, &readErr{err}
	}
	r := hex4(p[2:6])
	if r < 0 {
		return nil, 0, syntaxErr("invalid \\u escape %q", p[:6])
	}
	used := 6
	if utf16.IsSurrogate(r) {
		// A pair is two escapes; a lone half is U+FFFD.
		q, err := d.r.Peek(12)
		if err != nil && err != io.EOF {
			return nil, 0, &readErr{err}
		}
		r1 := rune(-1)
		if len(q) == 12 && q[6] == '\\' && q[7] == 'u' {
			r1 = hex4(q[8:12])
		}
		if dec := utf16.DecodeRune(r, r1); dec != unicode.ReplacementChar {
			r, used = dec, 12
		} else {
			r = unicode.ReplacementChar
		}
	}
	return utf8.AppendRune(out, r), used, nil
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// memSink collects the big string in memory, up to max bytes.
type memSink struct {
	b   []byte
	max int
	// hint: the buffer made on the first write holds this many bytes
	// (the body's length: the string is at most that), so a large one
	// is not copied as it grows; only a sink that is written makes one.
	hint int64
}

func (m *memSink) Write(p []byte) (int, error) {
	if m.max > 0 && len(m.b)+len(p) > m.max {
		return 0, &bodyError{status: 413, code: "request_too_large", msg: fmt.Sprintf("a string of the request is longer than %d bytes", m.max)}
	}
	if m.b == nil && m.hint > int64(len(p)) {
		m.b = make([]byte, 0, m.hint)
	}
	m.b = append(m.b, p...)
	return len(p), nil
}

func (m *memSink) Reset() error { m.b = m.b[:0]; return nil }

// decodeRest decodes the copied fields into v with encoding/json and turns
// its errors into answers: a number out of its field's range is a 422, a
// value of the wrong type a 400.
func decodeRest(rest []byte, v any) error {
	err := json.Unmarshal(rest, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		te.Field = strings.ReplaceAll(te.Field, "waitFields.", "") // an embedded struct, not a field
		if num, ok := strings.CutPrefix(te.Value, "number "); ok && outOfRange(num, te.Type.Kind().String()) {
			return &bodyError{status: 422, code: "validation_error", msg: fmt.Sprintf("field %q: %s is out of range", te.Field, num)}
		}
		return &bodyError{status: 400, code: "invalid_request", msg: fmt.Sprintf("field %q must be %s, got JSON %s", te.Field, jsonKind(te.Type), te.Value)}
	}
	return &bodyError{status: 400, code: "invalid_request", msg: "request body is not valid JSON: " + err.Error()}
}

// jsonKind names a Go type as a JSON value, as the API's users know it
// ("a number", not "float64").
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a JSON " + t.Kind().String()
}

// outOfRange: a number that is valid JSON but does not fit its field (a
// float that overflows to infinity, an integer literal past int64).
func outOfRange(num, kind string) bool {
	switch kind {
	case "float64", "float32":
		_, err := strconv.ParseFloat(num, 64)
		return errors.Is(err, strconv.ErrRange)
	case "int", "int64", "int32", "uint", "uint64":
		for i, c := range num {
			if !(c >= '0' && c <= '9' || c == '-' && i == 0) {
				return false
			}
		}
		return true
	}
	return false
}
