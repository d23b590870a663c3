package screen

// Plain lines: the output a screen can follow without an emulator while
// it floods (internal/screen/emu's fast path, and Lines in the runner).

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// Printable: the bytes of plain text (printable ASCII).
var Printable = func() (t [256]bool) {
	for b := 0x20; b <= 0x7e; b++ {
		t[b] = true
	}
	return t
}()

// Printable8 reports whether the 8 bytes of w are all printable ASCII:
// none has its high bit, none is below 0x20 (a borrow reaches the high bit
// of a byte below), and none is 0x7f (adding one carries into the high bit).
func Printable8(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	return w&hi == 0 && (w-0x20*lo)&^w&hi == 0 && (w+lo)&hi == 0
}

// PlainLines returns the ends (just past CR LF) of the plain lines at
// the start of p, stopping at the first byte that is not part of one.
//
// An erase to the end of the row right after a row's last column is
// filled is not plain: there it erases that column's character, and the
// next character takes its place instead of wrapping.
func PlainLines(p []byte, cols int, ends []int) []int {
	ends = ends[:0]
	i := 0
	for {
		j := i
		n := 0
		for j < len(p) {
			if j+8 <= len(p) && Printable8(binary.LittleEndian.Uint64(p[j:])) {
				j += 8
				n += 8
				continue
			}
			b := p[j]
			if Printable[b] {
				j++
				n++
				continue
			}
			if b == 0x1b {
				k := SGREnd(p, j)
				if k < 0 || (p[k-1] == 'K' && n > 0 && n%cols == 0) {
					return ends
				}
				j = k
				continue
			}
			break
		}
		if j+1 < len(p) && p[j] == '\r' && p[j+1] == '\n' {
			i = j + 2
			ends = append(ends, i)
			continue
		}
		return ends
	}
}

// SGREnd is the end of the sequence at p[i] that a plain line may hold
// (SGR: ESC [ digits ; : m; erase to the end of the row: ESC [ K or
// ESC [ 0 K, which on a row written from its start erases nothing), or -1
// when there is none.
func SGREnd(p []byte, i int) int {
	if i+1 >= len(p) || p[i+1] != '[' {
		return -1
	}
	for j := i + 2; j < len(p) && j < i+2+64; j++ {
		b := p[j]
		switch {
		case b == 'm':
			return j + 1
		case b == 'K':
			if j == i+2 || (j == i+3 && p[i+2] == '0') {
				return j + 1
			}
			return -1
		case (b >= '0' && b <= '9') || b == ';' || b == ':':
		default:
			return -1
		}
	}
	return -1
}

// Span is one screen row's bytes in the input: p[A:B].
type Span struct{ A, B int }

// SplitRows cuts the line p[a:b] (its CR LF excluded) into screen rows of
// cols characters.
func SplitRows(p []byte, a, b, cols int, rows []Span) []Span {
	if b-a <= cols {
		// At most cols bytes: one row, whatever SGRs it holds.
		return append(rows, Span{a, b})
	}
	start, n := a, 0
	for i := a; i < b; {
		if p[i] == 0x1b {
			i = SGREnd(p, i)
			continue
		}
		if n == cols {
			rows = append(rows, Span{start, i})
			start, n = i, 0
		}
		n++
		i++
	}
	return append(rows, Span{start, b})
}

// Text is the row's characters without its SGR sequences, trailing
// blanks trimmed.
func Text(p []byte) string {
	if bytes.IndexByte(p, 0x1b) < 0 {
		return string(bytes.TrimRight(p, " "))
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); {
		if p[i] == 0x1b {
			i = SGREnd(p, i)
			continue
		}
		b.WriteByte(p[i])
		i++
	}
	return strings.TrimRight(b.String(), " ")
}

// SGRs appends the SGR sequences of p to out, starting over at one that
// resets the pen (its first parameter empty or 0): what came before it no
// longer matters.
func SGRs(p []byte, out []byte) []byte {
	for i := 0; i < len(p); {
		j := bytes.IndexByte(p[i:], 0x1b)
		if j < 0 {
			break
		}
		i += j
		k := SGREnd(p, i)
		seq := p[i:k]
		if seq[len(seq)-1] != 'm' {
			i = k
			continue
		}
		first := seq[2:]
		if j := strings.IndexAny(string(first), ";:m"); j >= 0 {
			first = first[:j]
		}
		if len(first) == 0 || string(first) == "0" {
			out = out[:0]
		}
		out = append(out, seq...)
		i = k
	}
	return out
}

// PlainPrefix reports whether p could be the start of a plain line: what
// a flood's read ends with.
func PlainPrefix(p []byte) bool {
	for j := 0; j < len(p); {
		b := p[j]
		switch {
		case b >= 0x20 && b <= 0x7e:
			j++
		case b == 0x1b:
			k := SGREnd(p, j)
			if k < 0 {
				// An SGR cut short by the end of p.
				for i := j + 1; i < len(p); i++ {
					c := p[i]
					if !(i == j+1 && c == '[') && !((c >= '0' && c <= '9') || c == ';' || c == ':') {
						return false
					}
				}
				return len(p)-j <= 66
			}
			j = k
		case b == '\r' && j == len(p)-1:
			return true
		default:
			return false
		}
	}
	return true
}

// MaxFrag bounds the start of a plain line held back while a flood is
// followed without an emulator, waiting for its CR LF.
const MaxFrag = 16 << 10
