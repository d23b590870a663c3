package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/shellctl/shellctl/internal/jsonstr"
)

// UnmarshalJSON decodes a JobResult. An answer of the exact shape
// shellctl's server writes (its keys in order, no spaces, the escapes it
// uses) is read in one pass; anything else is left to encoding/json, so
// the result is always what encoding/json gives. An output window is up to
// 512 KiB of text, which encoding/json unescapes a byte at a time: about
// five times the cost of reading it off the socket.
func (r *JobResult) UnmarshalJSON(data []byte) error {
	if decodeJobResult(r, data) {
		return nil
	}
	type plain JobResult // without this method
	return json.Unmarshal(data, (*plain)(r))
}

// resultReader reads the fields of one answer in order; ok turns false at
// the first thing it does not expect.
type resultReader struct {
	d  []byte
	ok bool
}

func (p *resultReader) lit(s string) {
	if !p.ok || !bytes.HasPrefix(p.d, []byte(s)) {
		p.ok = false
		return
	}
	p.d = p.d[len(s):]
}

func (p *resultReader) boolean() bool {
	switch {
	case !p.ok:
	case bytes.HasPrefix(p.d, []byte("true")):
		p.d = p.d[4:]
		return true
	case bytes.HasPrefix(p.d, []byte("false")):
		p.d = p.d[5:]
	default:
		p.ok = false
	}
	return false
}

// integer reads an optionally negative run of digits (what strconv's
// AppendInt writes).
func (p *resultReader) integer() int64 {
	if !p.ok {
		return 0
	}
	i := 0
	if i < len(p.d) && p.d[i] == '-' {
		i++
	}
	for i < len(p.d) && p.d[i] >= '0' && p.d[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(string(p.d[:i]), 10, 64)
	if err != nil || (i > 1 && p.d[0] == '0') || (i > 2 && p.d[0] == '-' && p.d[1] == '0') {
		p.ok = false // not a number encoding/json would read as we do
		return 0
	}
	p.d = p.d[i:]
	return n
}

// str reads a JSON string: plain runs are copied whole, escapes decoded as
// encoding/json does; a surrogate escape, a raw control byte or bytes that
// are not UTF-8 are left to encoding/json.
func (p *resultReader) str() string {
	if !p.ok || len(p.d) == 0 || p.d[0] != '"' {
		p.ok = false
		return ""
	}
	s := p.d[1:]
	end := bytes.IndexByte(s, '"')
	if end < 0 {
		p.ok = false
		return ""
	}
	if bytes.IndexByte(s[:end], '\\') < 0 {
		// No escape: the common short string.
		if !plainText(s[:end]) {
			p.ok = false
			return ""
		}
		p.d = s[end+1:]
		return string(s[:end])
	}
	var b strings.Builder
	b.Grow(len(s))
	// q is where the next quote is: the one found above, and looked for
	// again only when an escape took it (\"); the string's end is far in a
	// long window, and looking for it up to each escape cost a pass over
	// every run.
	q := end
	for {
		if q < 0 {
			p.ok = false
			return ""
		}
		// The next escape, before the quote: the string ends first if
		// there is none.
		k := bytes.IndexByte(s[:q], '\\')
		if k < 0 {
			if !plainText(s[:q]) {
				p.ok = false
				return ""
			}
			b.Write(s[:q])
			p.d = s[q+1:]
			return b.String()
		}
		if !plainText(s[:k]) || k+1 >= len(s) {
			p.ok = false
			return ""
		}
		b.Write(s[:k])
		s, q = s[k:], q-k
		switch s[1] {
		case '"', '\\', '/':
			b.WriteByte(s[1])
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if len(s) < 6 {
				p.ok = false
				return ""
			}
			v, ok := jsonstr.Hex4(s[2:6])
			if !ok || utf16.IsSurrogate(v) {
				p.ok = false // pairs and lone halves: encoding/json's rules
				return ""
			}
			b.WriteRune(v)
			// Four hex digits held no quote: the next is further on.
			s, q = s[6:], q-6
			continue
		default:
			p.ok = false
			return ""
		}
		if s[1] == '"' { // the quote looked at was this escape's
			s = s[2:]
			q = bytes.IndexByte(s, '"')
			continue
		}
		s, q = s[2:], q-2
	}
}

// plainText: bytes a JSON string holds as they are and that decode to
// themselves (valid UTF-8, no control byte). Text of printable ASCII, the
// common case, is told in one pass of eight bytes at a time; anything else
// is checked byte by byte and as UTF-8.
func plainText(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// A byte below 0x20 borrows into its high bit, one of 0x80 or more
	// has it: nothing set in a word means its eight bytes are 0x20..0x7f.
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w0 := binary.LittleEndian.Uint64(b[i:])
		w1 := binary.LittleEndian.Uint64(b[i+8:])
		w2 := binary.LittleEndian.Uint64(b[i+16:])
		w3 := binary.LittleEndian.Uint64(b[i+24:])
		if ((w0-ones*0x20)|w0|(w1-ones*0x20)|w1|(w2-ones*0x20)|w2|(w3-ones*0x20)|w3)&highs != 0 {
			return plainSlow(b)
		}
	}
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if ((x-ones*0x20)|x)&highs != 0 {
			return plainSlow(b)
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 || b[i] >= utf8.RuneSelf {
			return plainSlow(b)
		}
	}
	return true
}

// plainSlow is plainText for text with a control byte or non-ASCII bytes.
func plainSlow(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}

func decodeJobResult(r *JobResult, data []byte) bool {
	p := &resultReader{d: bytes.TrimRight(data, " \t\r\n"), ok: true}
	var v JobResult
	p.lit(`{"job_id":`)
	v.JobID = p.str()
	p.lit(`,"done":`)
	v.Done = p.boolean()
	p.lit(`,"status":`)
	v.Status = p.str()
	p.lit(`,"exit_code":`)
	if p.ok && bytes.HasPrefix(p.d, []byte("null")) {
		p.d = p.d[4:]
	} else {
		n := p.integer()
		if int64(int(n)) != n {
			p.ok = false
		}
		c := int(n)
		v.ExitCode = &c
	}
	p.lit(`,"output_path":`)
	v.OutputPath = p.str()
	p.lit(`,"output":`)
	v.Output = p.str()
	p.lit(`,"offset":`)
	v.Offset = p.integer()
	p.lit(`,"truncated":`)
	v.Truncated = p.boolean()
	p.lit(`}`)
	if !p.ok || len(p.d) != 0 {
		return false
	}
	*r = v
	return true
}
