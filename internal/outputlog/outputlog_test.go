package outputlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// unit is one decoding unit of a file: a valid character or one invalid byte.
type unit struct {
	start, end int
	text       string
}

// units decodes data the way Go's utf8.DecodeRune walks it from 0.
func units(data []byte) []unit {
	var us []unit
	for i := 0; i < len(data); {
		r, sz := utf8.DecodeRune(data[i:])
		t := string(data[i : i+sz])
		if r == utf8.RuneError && sz == 1 {
			t = "\uFFFD"
		}
		us = append(us, unit{i, i + sz, t})
		i += sz
	}
	return us
}

func decodeAll(data []byte) string {
	var sb strings.Builder
	for _, u := range units(data) {
		sb.WriteString(u.text)
	}
	return sb.String()
}

// heldStart returns where a non-final window must stop: the start of an
// incomplete but possibly valid character at the end of data, or len(data).
func heldStart(data []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(data); k++ {
		l := len(data) - k
		if utf8.RuneStart(data[l]) {
			if !utf8.FullRune(data[l:]) {
				return l
			}
			break
		}
	}
	return len(data)
}

// model is the reference Window.
func model(data []byte, offset, limit int, final bool) (string, int, bool) {
	if limit < 1 {
		limit = 1
	}
	end := len(data)
	if !final {
		end = heldStart(data)
		if offset >= end {
			return "", offset, false
		}
	}
	var sb strings.Builder
	next := offset
	first := -1
	for _, u := range units(data[:end]) {
		if u.start < offset {
			continue
		}
		if first < 0 {
			first = u.start
			next = u.start
		} else if u.end-first > limit {
			break
		}
		sb.WriteString(u.text)
		next = u.end
	}
	if first < 0 {
		next = end
	}
	return sb.String(), next, next < end
}

// countingReader records the largest read.
type countingReader struct {
	r       *bytes.Reader
	maxRead int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.maxRead = max(c.maxRead, len(p))
	return c.r.ReadAt(p, off)
}

func check(t *testing.T, data []byte, offset, limit int, final bool) {
	t.Helper()
	cr := &countingReader{r: bytes.NewReader(data)}
	text, next, trunc, err := Window(cr, int64(offset), int64(len(data)), limit, final)
	if err != nil {
		t.Fatalf("Window(%q, off %d, limit %d, final %v): %v", data, offset, limit, final, err)
	}
	wt, wn, wtr := model(data, offset, limit, final)
	if text != wt || next != int64(wn) || trunc != wtr {
		t.Fatalf("Window(%q, off %d, limit %d, final %v) = %q, %d, %v; want %q, %d, %v",
			data, offset, limit, final, text, next, trunc, wt, wn, wtr)
	}
	if !utf8.ValidString(text) {
		t.Fatalf("window text not valid UTF-8: %q", text)
	}
	if cr.maxRead > max(limit, 1)+3*(utf8.UTFMax-1) {
		t.Fatalf("read %d bytes for limit %d", cr.maxRead, limit)
	}
}

func TestWindowTable(t *testing.T) {
	cases := []struct {
		name      string
		data      string
		offset    int
		limit     int
		final     bool
		text      string
		next      int
		truncated bool
	}{
		{"empty file", "", 0, 10, true, "", 0, false},
		{"at end", "abc", 3, 10, false, "", 3, false},
		{"all", "abc", 0, 10, true, "abc", 3, false},
		{"limit cuts", "abcdef", 1, 3, true, "bcd", 4, true},
		{"ends on boundary", "a\u4e16b", 0, 2, true, "a", 1, true},
		{"limit smaller than a char", "\u4e16b", 0, 1, true, "\u4e16", 3, true},
		{"start inside char skips it", "\u4e16bc", 1, 10, true, "bc", 5, false},
		{"start inside char, limit from char start", "\u4e16bcd", 2, 2, true, "bc", 5, true},
		{"invalid bytes consumed", "a\xff\xfeb", 0, 10, true, "a\uFFFD\uFFFDb", 4, false},
		{"invalid at start", "\xffb", 0, 1, true, "\uFFFD", 1, true},
		{"stray continuation at offset is a unit", "a\x80b", 1, 10, true, "\uFFFDb", 3, false},
		{"continuation after valid char", "\u4e16\x80", 3, 10, true, "\uFFFD", 4, false},
		{"incomplete tail held when running", "ab\xe4\xb8", 0, 10, false, "ab", 2, false},
		{"incomplete tail held, limit reached", "ab\xe4\xb8", 0, 2, false, "ab", 2, false},
		{"incomplete tail only", "\xe4\xb8", 0, 10, false, "", 0, false},
		{"inside incomplete tail", "\xe4\xb8", 1, 10, false, "", 1, false},
		{"incomplete tail consumed when final", "ab\xe4\xb8", 0, 10, true, "ab\uFFFD\uFFFD", 4, false},
		{"inside incomplete tail, final", "\xe4\xb8", 1, 10, true, "\uFFFD", 2, false},
		{"broken char mid-file", "\xe4\xb8ab", 0, 10, false, "\uFFFD\uFFFDab", 4, false},
		{"4-byte char, limit 3", "\U0001F600x", 0, 3, true, "\U0001F600", 4, true},
		{"4-byte char from inside", "\U0001F600x", 3, 1, true, "x", 5, false},
		{"limit 0 means 1", "xy", 0, 0, true, "x", 1, true},
		{"invalid unit would exceed limit", "ab\xff", 0, 2, true, "ab", 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			text, next, trunc, err := Window(bytes.NewReader(data), int64(tc.offset), int64(len(data)), tc.limit, tc.final)
			if err != nil {
				t.Fatal(err)
			}
			if text != tc.text || next != int64(tc.next) || trunc != tc.truncated {
				t.Fatalf("got %q, %d, %v; want %q, %d, %v", text, next, trunc, tc.text, tc.next, tc.truncated)
			}
			check(t, data, tc.offset, tc.limit, tc.final)
		})
	}
}

func TestWindowErrors(t *testing.T) {
	r := bytes.NewReader([]byte("abc"))
	if _, _, _, err := Window(r, 4, 3, 10, true); !errors.Is(err, ErrOffset) {
		t.Fatalf("offset past size: %v", err)
	}
	if _, _, _, err := Window(r, -1, 3, 10, true); !errors.Is(err, ErrOffset) {
		t.Fatalf("negative offset: %v", err)
	}
	// size larger than the file: a short read is an error, not a silent cut.
	if _, _, _, err := Window(r, 0, 10, 10, true); err == nil {
		t.Fatal("no error when the file is shorter than size")
	}
	// Never reads past size even when the file is longer.
	text, next, trunc, err := Window(r, 0, 2, 10, true)
	if err != nil || text != "ab" || next != 2 || trunc {
		t.Fatalf("size bound: %q %d %v %v", text, next, trunc, err)
	}
}

// randData mixes ASCII, valid multi-byte characters and invalid sequences.
func randData(rng *rand.Rand, n int) []byte {
	var b []byte
	pieces := []string{"a", "z", "\n", " ", "\u00e9", "\u4e16", "\U0001F600", "\u07ff", "\uffff"}
	bad := []string{"\xff", "\x80", "\xbf", "\xc3", "\xe4\xb8", "\xf0\x9f\x98", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe0\x80"}
	for len(b) < n {
		switch x := rng.IntN(10); {
		case x < 6:
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		case x < 8:
			b = append(b, bad[rng.IntN(len(bad))]...)
		default:
			b = append(b, byte(rng.IntN(256)))
		}
	}
	return b
}

func TestWindowMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		data := randData(rng, rng.IntN(60))
		for _, limit := range []int{1, 2, 3, 4, 5, 6, 7, 16, 1000} {
			for off := 0; off <= len(data); off++ {
				check(t, data, off, limit, true)
				check(t, data, off, limit, false)
			}
		}
	}
}

// follow reads data from 0 following next, as a client does.
func follow(t *testing.T, data []byte, limit int, final bool) (string, int) {
	t.Helper()
	r := bytes.NewReader(data)
	var sb strings.Builder
	off := int64(0)
	for calls := 0; ; calls++ {
		if calls > len(data)+1 {
			t.Fatalf("no progress at offset %d", off)
		}
		text, next, trunc, err := Window(r, off, int64(len(data)), limit, final)
		if err != nil {
			t.Fatal(err)
		}
		if next < off {
			t.Fatalf("next %d went back from %d", next, off)
		}
		if next-off > int64(max(limit, utf8.UTFMax)) {
			t.Fatalf("window of %d bytes for limit %d", next-off, limit)
		}
		sb.WriteString(text)
		if !trunc {
			if final && next != int64(len(data)) {
				t.Fatalf("not truncated but stopped at %d of %d", next, len(data))
			}
			return sb.String(), int(next)
		}
		if next == off {
			t.Fatalf("truncated window made no progress at %d", off)
		}
		off = next
	}
}

func TestFollowReassembles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 500; iter++ {
		data := randData(rng, rng.IntN(400))
		limit := 1 + rng.IntN(8)
		if iter%3 == 0 {
			limit = 1 + rng.IntN(200)
		}
		got, end := follow(t, data, limit, true)
		if want := decodeAll(data); got != want || end != len(data) {
			t.Fatalf("limit %d: reassembled %q (end %d), want %q (end %d)", limit, got, end, want, len(data))
		}
		got, end = follow(t, data, limit, false)
		h := heldStart(data)
		if want := decodeAll(data[:h]); got != want || end != h {
			t.Fatalf("running, limit %d: reassembled %q (end %d), want %q (end %d)", limit, got, end, want, h)
		}
	}
}

func TestSeqLines(t *testing.T) {
	var b bytes.Buffer
	for i := 1; i <= 100000; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	data := b.Bytes()
	got, end := follow(t, data, 1024, true)
	if got != string(data) || end != len(data) {
		t.Fatalf("reassembled %d bytes, want %d", len(got), len(data))
	}
}

func TestLimit4MultibyteNeverSplits(t *testing.T) {
	text := strings.Repeat("a\u00e9\u4e16\U0001F600\u4e16\u4e16b", 200)
	data := []byte(text)
	r := bytes.NewReader(data)
	var sb strings.Builder
	for off := int64(0); off < int64(len(data)); {
		w, next, _, err := Window(r, off, int64(len(data)), 4, false)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.RuneStart(data[off]) || (next < int64(len(data)) && !utf8.RuneStart(data[next])) {
			t.Fatalf("window [%d,%d) splits a character", off, next)
		}
		if w != string(data[off:next]) || next-off > 4 || next == off {
			t.Fatalf("window [%d,%d) = %q", off, next, w)
		}
		sb.WriteString(w)
		off = next
	}
	if sb.String() != text {
		t.Fatal("reassembled text differs")
	}
}

func TestInvalidReachesEnd(t *testing.T) {
	data := bytes.Repeat([]byte{0xff, 0xe4, 0xb8, 0x80, 0xf0, 0x9f}, 1000)
	for _, limit := range []int{1, 2, 3, 4, 100} {
		got, end := follow(t, data, limit, true)
		if end != len(data) || got != decodeAll(data) {
			t.Fatalf("limit %d: stopped at %d of %d", limit, end, len(data))
		}
	}
}

func tailModel(data []byte, limit int) string {
	start := max(0, len(data)-max(limit, 1))
	var sb strings.Builder
	for _, u := range units(data) {
		if u.start >= start {
			sb.WriteString(u.text)
		}
	}
	return sb.String()
}

func TestTail(t *testing.T) {
	data := []byte("line one\nline \u4e16\u754c\n")
	for limit := 0; limit <= len(data)+2; limit++ {
		got, err := Tail(bytes.NewReader(data), int64(len(data)), limit)
		if err != nil {
			t.Fatal(err)
		}
		if want := tailModel(data, limit); got != want {
			t.Fatalf("limit %d: %q, want %q", limit, got, want)
		}
		if !strings.HasSuffix(string(data), got) {
			t.Fatalf("limit %d: %q is not a suffix", limit, got)
		}
		if len(got) > max(limit, 1) {
			t.Fatalf("limit %d: %d bytes", limit, len(got))
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 300; iter++ {
		data := randData(rng, rng.IntN(80))
		limit := rng.IntN(20)
		got, err := Tail(bytes.NewReader(data), int64(len(data)), limit)
		if err != nil {
			t.Fatal(err)
		}
		if want := tailModel(data, limit); got != want {
			t.Fatalf("Tail(%q, %d) = %q, want %q", data, limit, got, want)
		}
	}
	if got, err := Tail(bytes.NewReader(nil), 0, 10); err != nil || got != "" {
		t.Fatalf("empty: %q %v", got, err)
	}
}

func TestWindowAllocs(t *testing.T) {
	data := bytes.Repeat([]byte("hello w\u00f6rld\n"), 10000)
	r := bytes.NewReader(data)
	Window(r, 0, int64(len(data)), 16384, true)
	allocs := testing.AllocsPerRun(100, func() {
		Window(r, 1, int64(len(data)), 16384, true)
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per valid window", allocs)
	}
}

// ReadWindow leaves a valid window in the buffer it was read into (no copy,
// no allocation once the pool holds one), and the text is Window's.
func TestReadWindowDoesNotCopy(t *testing.T) {
	data := bytes.Repeat([]byte("hello w\u00f6rld\n"), 50000)
	r := bytes.NewReader(data)
	for _, off := range []int64{0, 7, 8, 100001} {
		want, wnext, wtrunc, err := Window(r, off, int64(len(data)), 1<<19, false)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ReadWindow(r, off, int64(len(data)), 1<<19, false)
		if err != nil {
			t.Fatal(err)
		}
		if v.String() != want || string(v.Text) != want || v.Next != wnext || v.Truncated != wtrunc {
			t.Fatalf("offset %d: ReadWindow gave %d bytes, next %d, truncated %v; Window %d, %d, %v", off, len(v.Text), v.Next, v.Truncated, len(want), wnext, wtrunc)
		}
		v.Release()
		if v.Text != nil || v.String() != "" {
			t.Fatalf("offset %d: text still there after Release", off)
		}
		v.Release() // twice is fine
	}
	allocs := testing.AllocsPerRun(100, func() {
		v, _ := ReadWindow(r, 1, int64(len(data)), 1<<19, true)
		v.Release()
	})
	// Under the race detector the pool drops some of what is put back;
	// without it, nothing is allocated at all.
	if allocs != 0 && !(raceEnabled && allocs <= 1) {
		t.Fatalf("%v allocations per valid 512 KiB window read", allocs)
	}
	// ReadTail is Tail, without the copy.
	for _, limit := range []int{1, 7, 100, 1 << 19, 1 << 22} {
		want, err := Tail(r, int64(len(data)), limit)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ReadTail(r, int64(len(data)), limit)
		if err != nil || v.String() != want || v.Next != int64(len(data)) {
			t.Fatalf("ReadTail limit %d: %d bytes, next %d, err %v; Tail %d bytes", limit, len(v.Text), v.Next, err, len(want))
		}
		v.Release()
	}
	// An invalid window is decoded into text of its own: still right.
	bad := []byte("a\xffb\xe4\xb8")
	v, err := ReadWindow(bytes.NewReader(bad), 0, int64(len(bad)), 10, true)
	if err != nil || string(v.Text) != "a\ufffdb\ufffd\ufffd" || v.Next != int64(len(bad)) || v.Truncated {
		t.Fatalf("invalid window: %q next %d truncated %v err %v", v.Text, v.Next, v.Truncated, err)
	}
	v.Release()
}

func FuzzWindow(f *testing.F) {
	f.Add([]byte("hello \u4e16\u754c\n"), uint16(1), uint16(4), true)
	f.Add([]byte("a\xff\xe4\xb8"), uint16(0), uint16(1), false)
	f.Add([]byte("\xf0\x9f\x98\x80\x80"), uint16(3), uint16(2), true)
	f.Fuzz(func(t *testing.T, data []byte, off, limit uint16, final bool) {
		o := int(off) % (len(data) + 1)
		check(t, data, o, int(limit%300), final)
		got, err := Tail(bytes.NewReader(data), int64(len(data)), int(limit%300))
		if err != nil {
			t.Fatal(err)
		}
		if want := tailModel(data, int(limit%300)); got != want {
			t.Fatalf("Tail = %q, want %q", got, want)
		}
	})
}

func BenchmarkWindow16K(b *testing.B) {
	data := bytes.Repeat([]byte("hello w\u00f6rld, some log output\n"), 1<<15)
	r := bytes.NewReader(data)
	b.SetBytes(16384)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		_, next, trunc, _ := Window(r, off, int64(len(data)), 16384, true)
		off = next
		if !trunc {
			off = 0
		}
	}
}
