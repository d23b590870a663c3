package api

import (
	"encoding/binary"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

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

// plainWord reports whether none of the eight bytes of x is a control
// character, '"', '\\' or a non-ASCII byte, i.e. all can be copied as they are.
func plainWord(x uint64) bool {
	below := (x - ones*0x20) &^ x // high bit where a byte < 0x20
	q := x ^ ones*'"'
	quote := (q - ones) &^ q // high bit where a byte is '"'
	bs := x ^ ones*'\\'
	slash := (bs - ones) &^ bs // high bit where a byte is '\\'

	return (below|quote|slash|x)&highs == 0
}

// appendString appends s as a JSON string, escaping as encoding/json does
// with HTML escaping off: quote, backslash, control characters, U+2028 and
// U+2029; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none of them needs a look: the
		// common case of a window of plain text.
		for i+8 <= len(s) && plainWord(binary.LittleEndian.Uint64([]byte(s[i:i+8]))) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\\ufffd"...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
