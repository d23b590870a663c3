package outputlog

// Chunks: the byte-exact cut of output.log the stream sends
// (spec/extended-api.md §1). Unlike Window, nothing is replaced: every
// byte of the file goes out exactly once, as text where it is valid UTF-8
// and as raw bytes (sent base64) where it is not, so concatenating the
// chunks a reader got from offset 0 gives the file byte for byte.

import "unicode/utf8"

// Chunk is one run of a byte window: Data is either valid UTF-8 (Text) or
// bytes to be sent as they are (base64) because they are not.
type Chunk struct {
	Offset int64 // file offset of Data[0]
	Data   []byte
	Text   bool
}

// minTextRun is the shortest run of valid UTF-8 that is sent as a text
// chunk of its own between two runs of invalid bytes: shorter ones join
// the raw run, so a window of mixed bytes does not become one event per
// byte. Text at either end of the window is always its own chunk.
const minTextRun = 16

// Split cuts b, the bytes of the file from offset, into chunks of valid
// UTF-8 and of raw bytes, appended to dst, and returns them with n, the
// number of bytes of b they cover (chunks tile b[:n] in order).
//
// Text chunks end on character boundaries. When final is false (more bytes
// may follow b: the job still writes, or b is a window short of what is on
// disk), an incomplete character at the end of b (a valid prefix that b
// cuts) is not consumed: n stops before it, and the next window, starting
// at offset+n, sees it whole. When final is true every byte is consumed;
// such a tail goes raw.
//
// The chunks' Data alias b.
func Split(dst []Chunk, b []byte, offset int64, final bool) ([]Chunk, int) {
	end := len(b)
	if !final {
		end = completeUpTo(b)
	}
	if end > 0 && utf8.Valid(b[:end]) {
		// The common case, checked at the speed of utf8.Valid.
		return append(dst, Chunk{Offset: offset, Data: b[:end], Text: true}), end
	}
	start := len(dst)
	pos := 0
	for pos < end {
		// A run of valid UTF-8.
		t := pos
		for t < end {
			c := b[t]
			if c < utf8.RuneSelf {
				t++
				continue
			}
			r, sz := utf8.DecodeRune(b[t:end])
			if r == utf8.RuneError && sz == 1 {
				break
			}
			t += sz
		}
		if t > pos {
			dst = appendRun(dst, start, b, offset, pos, t, true)
			pos = t
		}
		// A run of bytes that are not valid UTF-8.
		for t < end {
			if b[t] < utf8.RuneSelf {
				break
			}
			if r, sz := utf8.DecodeRune(b[t:end]); r != utf8.RuneError || sz > 1 {
				break
			}
			t++
		}
		if t > pos {
			dst = appendRun(dst, start, b, offset, pos, t, false)
			pos = t
		}
	}
	return dst, end
}

// appendRun adds b[from:to] as a chunk, merging a short text run between
// two raw runs into the raw ones: when a raw run follows a short text run
// that itself follows a raw run, the three become one raw chunk.
func appendRun(dst []Chunk, start int, b []byte, offset int64, from, to int, text bool) []Chunk {
	n := len(dst)
	if !text && n-start >= 2 && dst[n-1].Text && len(dst[n-1].Data) < minTextRun && !dst[n-2].Text {
		// raw, short text, raw: one raw chunk (contiguous in b).
		first := int(dst[n-2].Offset - offset)
		dst = dst[:n-1]
		dst[n-2].Data = b[first:to]
		return dst
	}
	return append(dst, Chunk{Offset: offset + int64(from), Data: b[from:to], Text: text})
}

// completeUpTo is len(b) less an incomplete character at its end: the
// bytes of a valid prefix of a multi-byte character that b cuts short.
func completeUpTo(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		l := len(b) - k
		if !utf8.RuneStart(b[l]) {
			continue
		}
		if !utf8.FullRune(b[l:]) {
			return l
		}
		break
	}
	return len(b)
}
