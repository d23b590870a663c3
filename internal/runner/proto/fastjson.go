package proto

// A hand-written JSON path for the messages a runner reads and writes, so
// that a runner — a fresh process per job — never builds encoding/json's
// reflection caches for Msg (about a tenth of a short job's runner CPU, in
// a fresh process's page faults as much as in instructions). It takes
// only the canonical form encoding/json itself writes (the server's
// messages); anything else — an unknown key, a null, a number with a
// fraction, base64 data — makes the caller fall back to encoding/json,
// which decides. So what it accepts decodes exactly as encoding/json
// would (tests compare the two).

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/shellctl/shellctl/internal/jsonstr"
)

// Reader reads one JSON value in encoding/json's canonical form. Its
// methods return false when the input is anything else; the caller then
// decodes with encoding/json.
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
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
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
	r.i += 4
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

// decodeMsgFast decodes line into m if it is in the canonical form and
// holds no field the fast path leaves to encoding/json (Data, Grace).
func decodeMsgFast(line []byte, m *Msg) bool {
	r := NewReader(line)
	str := func(p *string) bool {
		s, ok := r.String()
		*p = s
		return ok
	}
	i64 := func(p *int64) bool {
		n, ok := r.Int(64)
		*p = n
		return ok
	}
	in := func(p *int) bool {
		n, ok := r.Int(strconv.IntSize)
		*p = int(n)
		return ok
	}
	boo := func(p *bool) bool {
		v, ok := r.Bool()
		*p = v
		return ok
	}
	ok := r.Object(func(key string) bool {
		switch key {
		case "t":
			return str(&m.T)
		case "id":
			return i64(&m.ID)
		case "status":
			return str(&m.Status)
		case "pid":
			return in(&m.PID)
		case "started_at":
			return i64(&m.StartedAt)
		case "isolation":
			return str(&m.Isolation)
		case "cgroup":
			return str(&m.Cgroup)
		case "size":
			return i64(&m.Size)
		case "exit_code":
			var c int
			if !in(&c) {
				return false
			}
			m.ExitCode = &c
			return true
		case "signal":
			return in(&m.Signal)
		case "reason":
			return str(&m.Reason)
		case "ended_at":
			return i64(&m.EndedAt)
		case "done":
			return boo(&m.Done)
		case "pgid":
			return in(&m.Pgid)
		case "limits":
			return str(&m.Limits)
		case "usage":
			return str(&m.Usage)
		case "err_size":
			return i64(&m.ErrSize)
		case "cols":
			return in(&m.Cols)
		case "rows":
			return in(&m.Rows)
		case "target":
			return str(&m.Target)
		case "spec":
			b, ok := r.Raw()
			m.Spec = b
			return ok
		case "key":
			return str(&m.Key)
		case "err":
			return str(&m.Err)
		case "keys":
			l, ok := r.Strings()
			m.Keys = l
			return ok
		case "scrollback":
			return in(&m.Scrollback)
		case "quiet_ms":
			return in(&m.QuietMS)
		case "timeout_ms":
			return in(&m.TimeoutMS)
		case "screen":
			b, ok := r.Raw()
			m.Screen = b
			return ok
		case "waiting":
			return boo(&m.Waiting)
		case "input_seq":
			return i64(&m.InputSeq)
		}
		return false // data, grace, or a key Msg does not have
	})
	return ok && r.End()
}

// appendMsgFast appends m as encoding/json's Encoder writes it (with the
// newline); false when m has a field left to encoding/json (Data, Grace,
// or a raw Spec or Screen, which the Encoder compacts and escapes).
func appendMsgFast(b []byte, m *Msg) ([]byte, bool) {
	if len(m.Data) > 0 || m.Grace != 0 || len(m.Spec) > 0 || len(m.Screen) > 0 {
		return b, false
	}
	str := func(key, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = jsonstr.Append(b, v)
		}
	}
	num := func(key string, v int64) {
		if v != 0 {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = strconv.AppendInt(b, v, 10)
		}
	}
	boo := func(key string, v bool) {
		if v {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, `":true`...)
		}
	}
	b = append(b, `{"t":`...)
	b = jsonstr.Append(b, m.T)
	num("id", m.ID)
	str("status", m.Status)
	num("pid", int64(m.PID))
	num("started_at", m.StartedAt)
	str("isolation", m.Isolation)
	str("cgroup", m.Cgroup)
	num("size", m.Size)
	if m.ExitCode != nil {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(*m.ExitCode), 10)
	}
	num("signal", int64(m.Signal))
	str("reason", m.Reason)
	num("ended_at", m.EndedAt)
	boo("done", m.Done)
	num("pgid", int64(m.Pgid))
	str("limits", m.Limits)
	str("usage", m.Usage)
	num("err_size", m.ErrSize)
	num("cols", int64(m.Cols))
	num("rows", int64(m.Rows))
	str("target", m.Target)
	str("key", m.Key)
	str("err", m.Err)
	if len(m.Keys) > 0 {
		b = append(b, `,"keys":[`...)
		for i, k := range m.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, k)
		}
		b = append(b, ']')
	}
	num("scrollback", int64(m.Scrollback))
	num("quiet_ms", int64(m.QuietMS))
	num("timeout_ms", int64(m.TimeoutMS))
	boo("waiting", m.Waiting)
	num("input_seq", m.InputSeq)
	return append(b, '}', '\n'), true
}
