package api

import (
	"encoding/binary"
	"math/bits"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/wire"
)

// The answer shapes are package wire's. JobResult, which carries output
// windows, is written by hand below (the same bytes; a test compares them).

const timeLayout = "2006-01-02T15:04:05Z"

func apiTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func optTime(t *time.Time) *string {
	if t == nil || t.IsZero() {
		return nil
	}
	s := apiTime(*t)
	return &s
}

func statusJSON(v *jobs.StatusView) wire.JobStatus {
	return wire.JobStatus{JobID: v.JobID, Status: v.Status, Done: v.Done, ExitCode: v.ExitCode,
		CreatedAt: apiTime(v.CreatedAt), StartedAt: optTime(v.StartedAt), EndedAt: optTime(v.EndedAt), Offset: v.Offset}
}

// InputWaitHeader says, on every JobResult answer for a pty job, whether
// the job waits for input at answer time ("1" or "0").
const InputWaitHeader = "X-Shellctl-Input-Wait"

// writeResult answers a JobResult. It is the answer that carries output
// windows of up to 512 KiB, so it is written by hand into a pooled buffer:
// the same bytes encoding/json would produce for wire.JobResult (a test
// compares the two), without its reflection and copies.
func writeResult(w http.ResponseWriter, r *jobs.Result) {
	bp := resultBufs.Get().(*[]byte)
	b := appendResult((*bp)[:0], r)
	r.Release() // its window is copied into b: the buffer can serve the next read
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if r.InputWait != nil {
		// Extended API §4: pty jobs only; a header, so the body stays
		// exactly the compatible JobResult.
		v := "0"
		if *r.InputWait {
			v = "1"
		}
		h.Set(InputWaitHeader, v)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledResult {
		*bp = b
		resultBufs.Put(bp)
	}
}

// maxPooledResult: buffers up to a full window (plus escaping) are kept for
// reuse; a rare bigger one is left to the collector.
const maxPooledResult = 1 << 20

var resultBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func appendResult(b []byte, r *jobs.Result) []byte {
	b = append(b, `{"job_id":`...)
	b = appendString(b, r.JobID)
	b = append(b, `,"done":`...)
	b = strconv.AppendBool(b, r.Done)
	b = append(b, `,"status":`...)
	b = appendString(b, r.Status)
	b = append(b, `,"exit_code":`...)
	if r.ExitCode == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	}
	b = append(b, `,"output_path":`...)
	b = appendString(b, r.OutputPath)
	b = append(b, `,"output":`...)
	b = appendString(b, r.Output)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, r.Truncated)
	return append(b, "}\n"...)
}

const hexDigits = "0123456789abcdef"

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special has the high bit set in each of the eight bytes of x that is a
// control character, '"', '\\' or a non-ASCII byte, i.e. that cannot be
// copied as it is. Bytes above the first such byte may be marked wrongly
// (the borrow of a subtraction carries upward), but the lowest mark is
// always exact: bits.TrailingZeros64(special(x))/8 is the index of the first
// byte that needs a look, and special(x) == 0 says none does.
//
// Below that first byte every byte c is in 0x20..0x7f, so c-0x20, and c^'"'-1
// and c^'\\'-1 unless c is that character, have no high bit and borrow
// nothing; at it, the subtraction that matches it wraps (or c itself has
// the high bit). Nine operations a word.
func special(x uint64) uint64 {
	return ((x - ones*0x20) | ((x ^ ones*'"') - ones) | ((x ^ ones*'\\') - ones) | x) & highs
}

// plainBlocksGo is the index of the first byte of p's whole 16-byte
// blocks that needs an escape, or len(p)&^15 when none does: eight bytes
// at a time, in Go, for the architectures without a plainRun of their own
// in assembly.
func plainBlocksGo(p []byte) int {
	n := len(p) &^ 15
	for i := 0; i < n; i += 16 {
		w := (*[16]byte)(p[i:])
		m0 := special(binary.LittleEndian.Uint64(w[:8]))
		m1 := special(binary.LittleEndian.Uint64(w[8:]))
		if m0|m1 != 0 {
			if m0 != 0 {
				return i + bits.TrailingZeros64(m0)>>3
			}
			return i + 8 + bits.TrailingZeros64(m1)>>3
		}
	}
	return n
}

// appendString appends s as a JSON string, escaping as encoding/json does
// with HTML escaping off: quote, backslash, control characters, U+2028 and
// U+2029; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	// Read only: the bytes are s's own, never written.
	return appendBytes(b, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// plainByte: c goes into a JSON string as it is.
func plainByte(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf }

// appendBytes is appendString of the text in p. Plain text and its
// newlines are copied into b 32 bytes a step (escapeRun, AVX2); from any
// other byte to escape, or a non-ASCII one, plainRun finds the next byte
// that needs a look, and the plain run before it goes in one append. At
// 512 KiB a window, this is a good part of what a page read costs the
// server.
func appendBytes(b []byte, p []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; ; {
		// Plain text and its newlines (a log's lines) go straight into
		// b, 32 bytes a step, without leaving the scan at every line end.
		if start == i && len(p)-i >= 32 && plainByte(p[i]) {
			if cap(b)-len(b) < 64+32 {
				b = slices.Grow(b, len(p)-i+(len(p)-i)/16+64)
			}
			nd, ns := escapeRun(b[len(b):cap(b)], p[i:])
			b = b[:len(b)+nd]
			i += ns
			start = i
		}
		i += plainRun(p[i:])
		if i >= len(p) {
			break
		}
		c := p[i]
		if c < utf8.RuneSelf {
			b = append(b, p[start:i]...)
			// A run of ASCII bytes to escape (a log of NULs, CRLFs) is
			// taken here, without a scan per byte, and with room made
			// for it at once: a window of NULs is six times its size in
			// JSON, which growing by appends would copy over and over.
			j := i + 1
			for j < len(p) && (p[j] < 0x20 || p[j] == '"' || p[j] == '\\') {
				j++
			}
			if j-i > 64 {
				b = slices.Grow(b, 6*(j-i))
			}
			for {
				switch c {
				case '"', '\\':
					b = append(b, '\\', c)
				case '\n':
					b = append(b, '\\', 'n')
				case '\r':
					b = append(b, '\\', 'r')
				case '\t':
					b = append(b, '\\', 't')
				case '\b':
					b = append(b, '\\', 'b')
				case '\f':
					b = append(b, '\\', 'f')
				default:
					b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
				}
				i++
				if i >= len(p) {
					break
				}
				if c = p[i]; c >= 0x20 && c != '"' && c != '\\' {
					break
				}
			}
			start = i
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, p[start:i]...)
			b = append(b, "\\ufffd"...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, p[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, p[start:]...)
	return append(b, '"')
}
