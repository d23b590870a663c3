package outputlog

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzWindowFollow plays a client following a growing output.log: the file
// grows by fuzz-chosen steps (so characters are cut at any point), the
// client asks from the offset it was last given with a fuzz-chosen limit,
// and once the writer is done it keeps asking with final set. Every window
// must be valid UTF-8; the offset never goes back and never past the file;
// a window that consumed nothing while more bytes exist must be an
// incomplete character held back (not final); the client reaches the end;
// and what it read equals the whole file decoded from 0.
func FuzzWindowFollow(f *testing.F) {
	f.Add([]byte("hello \u4e16\u754c\n"), []byte{3, 1, 2}, []byte{1, 4, 0})
	f.Add([]byte("a\xff\xe4\xb8\x80\xf0\x9f\x98"), []byte{2, 1, 1, 1}, []byte{1})
	f.Add([]byte("\xe4\xb8\xe4\xb8\x96"), []byte{1}, []byte{2, 1})
	f.Fuzz(func(t *testing.T, data, steps, limits []byte) {
		r := bytes.NewReader(data)
		size, off := 0, 0
		var got strings.Builder
		step, ask := 0, 0
		next := func(b []byte, i int) int {
			if len(b) == 0 {
				return 1
			}
			return int(b[i%len(b)])
		}
		for calls := 0; ; calls++ {
			if calls > 4*len(data)+8 {
				t.Fatalf("no end after %d windows: at %d of %d", calls, off, len(data))
			}
			final := size == len(data)
			limit := next(limits, ask)
			ask++
			text, n, trunc, err := Window(r, int64(off), int64(size), limit, final)
			if err != nil {
				t.Fatalf("Window(off %d, size %d, limit %d, final %v): %v", off, size, limit, final, err)
			}
			if !utf8.ValidString(text) {
				t.Fatalf("window at %d is not valid UTF-8: %q", off, text)
			}
			if n < int64(off) || n > int64(size) {
				t.Fatalf("Window(off %d, size %d) moved the offset to %d", off, size, n)
			}
			if n == int64(off) && int(n) < size {
				// Nothing consumed though bytes exist: only an incomplete
				// trailing character may be held, and only before the end.
				if final || utf8.FullRune(data[off:size]) || trunc {
					t.Fatalf("window at %d of %d (final %v) consumed nothing: %q, truncated %v", off, size, final, data[off:size], trunc)
				}
			}
			got.WriteString(text)
			off = int(n)
			if final && off == size {
				break
			}
			if !trunc {
				// Caught up with the writer: let the file grow.
				size = min(len(data), size+max(1, next(steps, step)))
				step++
			}
		}
		if want := decodeAll(data); got.String() != want {
			t.Fatalf("followed %q, want %q", got.String(), want)
		}
	})
}

// FuzzSplit plays a stream following a growing output.log with Split: the
// file grows by fuzz-chosen steps, the stream reads fuzz-sized windows from
// where it stopped (final once the writer is done and the window reaches
// the end). Chunks must tile each window's consumed bytes in order, text
// chunks be valid UTF-8 and neighbours differ in kind; a window may hold
// back only an incomplete character at its end, and only when not final;
// and the stream must end with exactly the file's bytes.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("hello \u4e16\u754c\n"), []byte{3, 1, 2}, []byte{1, 4, 0})
	f.Add([]byte("\xff\xfeok\n\xe4\xb8\x96\xf0\x9f\x98"), []byte{2, 1, 1, 1}, []byte{1})
	f.Add([]byte("a\xffbc\xfe0123456789abcdefg\xe4\xb8"), []byte{5}, []byte{7, 2})
	f.Fuzz(func(t *testing.T, data, steps, windows []byte) {
		next := func(b []byte, i int) int {
			if len(b) == 0 {
				return 1
			}
			return int(b[i%len(b)])
		}
		size, off, step, ask := 0, 0, 0, 0
		var got []byte
		var cs []Chunk
		for calls := 0; ; calls++ {
			if calls > 8*len(data)+16 {
				t.Fatalf("no end after %d windows: at %d of %d", calls, off, len(data))
			}
			w := max(utf8.UTFMax, next(windows, ask))
			ask++
			hi := min(size, off+w)
			final := size == len(data) && hi == size
			var n int
			cs, n = Split(cs[:0], data[off:hi], int64(off), final)
			checkChunks(t, cs, data[off:hi], int64(off), n)
			for i := 1; i < len(cs); i++ {
				if cs[i].Text == cs[i-1].Text {
					t.Fatalf("neighbouring chunks of one kind: %s", chunkString(cs))
				}
			}
			if held := data[off+n : hi]; len(held) > 0 {
				if final || len(held) >= utf8.UTFMax || utf8.FullRune(held) {
					t.Fatalf("window [%d,%d) final %v held %q", off, hi, final, held)
				}
			}
			for _, c := range cs {
				got = append(got, c.Data...)
			}
			off += n
			if off == len(data) {
				break
			}
			if hi == size && off+utf8.UTFMax > size {
				// Caught up with the writer: let the file grow.
				size = min(len(data), size+max(1, next(steps, step)))
				step++
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("followed %q, want %q", got, data)
		}
	})
}
