package sanitize

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

type goldenCase struct {
	Name      string   `json:"name"`
	ChunksHex []string `json:"chunks_hex"`
	Want      string   `json:"want"`
}

// goldenPath is the repository's copy of the shared golden cases
// (shared/testdata/sanitize-golden.json): the golden tests always run from
// it, wherever the checkout sits.
const goldenPath = "testdata/sanitize-golden.json"

// sharedGoldenPath is where the shared specs sit when the checkout is beside
// them (../shared); TestGoldenCopyIsCurrent compares the copy with it.
var sharedGoldenPath = filepath.Join("..", "..", "..", "shared", "testdata", "sanitize-golden.json")

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("the golden cases must be in the repository: %v", err)
	}
	cases, err := parseGolden(data)
	if err != nil {
		t.Fatalf("%s: %v", goldenPath, err)
	}
	return cases
}

func parseGolden(data []byte) ([]goldenCase, error) {
	var doc struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse golden cases: %w", err)
	}
	if len(doc.Cases) == 0 {
		return nil, errors.New("no golden cases")
	}
	return doc.Cases, nil
}

// TestGoldenCopyIsCurrent: when the shared specs sit beside the checkout,
// the repository's copy of the golden cases must equal theirs (copy it
// again when the shared file changes). Without ../shared there is nothing
// to compare, and TestGolden still runs from the copy.
func TestGoldenCopyIsCurrent(t *testing.T) {
	shared, err := os.ReadFile(sharedGoldenPath)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no shared specs at %s to compare the copy with (TestGolden runs from %s)", sharedGoldenPath, goldenPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, shared) {
		t.Fatalf("%s differs from %s: copy the shared file into the repository", goldenPath, sharedGoldenPath)
	}
}

// run feeds chunks as separate Writes, then closes, and returns the output.
func run(t testing.TB, chunks ...[]byte) string {
	t.Helper()
	var out bytes.Buffer
	s := New(&out)
	for _, c := range chunks {
		n, err := s.Write(c)
		if err != nil || n != len(c) {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(c))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func bytewise(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

func TestGolden(t *testing.T) {
	for _, tc := range loadGolden(t) {
		t.Run(tc.Name, func(t *testing.T) {
			var chunks [][]byte
			var whole []byte
			for _, h := range tc.ChunksHex {
				b, err := hex.DecodeString(h)
				if err != nil {
					t.Fatalf("bad hex %q: %v", h, err)
				}
				chunks = append(chunks, b)
				whole = append(whole, b...)
			}
			if got := run(t, chunks...); got != tc.Want {
				t.Errorf("chunks: got %q, want %q", got, tc.Want)
			}
			if got := run(t, bytewise(whole)...); got != tc.Want {
				t.Errorf("byte by byte: got %q, want %q", got, tc.Want)
			}
			if got := run(t, whole); got != tc.Want {
				t.Errorf("one write: got %q, want %q", got, tc.Want)
			}
		})
	}
}

func TestCases(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"CR CR LF is one line end", "a\r\r\nb\n", "a\nb\n"},
		{"CR then escape then LF keeps the line", "abc\r\x1b[0m\n", "abc\n"},
		{"CR restarts on text", "hello\rHi\n", "Hi\n"},
		{"CR at end of input keeps the line", "50%\r", "50%"},
		{"spinner cleared", "\r\x1b[K| 1\r\x1b[K/ 2\r\x1b[Kdone\n", "done\n"},
		{"C0 and DEL dropped", "\x00\x01\x08a\x7fb\x0e\x0f\n", "ab\n"},
		{"ESC inside OSC ends it", "\x1b]0;title\x1b[31mX\n", "X\n"},
		{"CAN aborts CSI", "\x1b[12\x18x\n", "x\n"},
		{"newline inside CSI is executed", "a\x1b[1\n2mb\n", "a\nb\n"},
		{"ESC ESC", "\x1b\x1b[31mx\n", "x\n"},
		{"APC PM SOS removed", "\x1b_apc\x1b\\\x1b^pm\x07\x1bXsos\x1b\\ok\n", "ok\n"},
		{"ESC with intermediates", "\x1b#8\x1b%Gz\n", "z\n"},
		{"escape then UTF-8 abandons escape", "\x1b\xc3\xa9\n", "\u00e9\n"},
		{"UTF-8 in OSC is swallowed", "\x1b]2;\xe4\xb8\x96\x07v\n", "v\n"},
		{"invalid split char", "\xe4\xb8A\n", "\ufffd\ufffdA\n"},
		{"incomplete at end", "ok\xe4\xb8", "ok\ufffd\ufffd"},
		{"C1 CSI is invalid UTF-8", "\x9b31mx\n", "\ufffd31mx\n"},
		{"lone continuation", "\x80\xbf\n", "\ufffd\ufffd\n"},
		{"overlong", "\xc0\xaf\n", "\ufffd\ufffd\n"},
		{"surrogate", "\xed\xa0\x80\n", "\ufffd\ufffd\ufffd\n"},
		{"4-byte char", "\xf0\x9f\x98\x80\n", "\U0001F600\n"},
		{"tab in escape executed", "\x1b[\t1mx\n", "\tx\n"},
		{"unterminated CSI at end dropped", "ab\x1b[3", "ab"},
		{"CRLF only", "\r\n\r\n", "\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			if got := run(t, in); got != tc.want {
				t.Errorf("whole: got %q, want %q", got, tc.want)
			}
			if got := run(t, bytewise(in)...); got != tc.want {
				t.Errorf("bytewise: got %q, want %q", got, tc.want)
			}
			for cut := 1; cut < len(in); cut++ {
				if got := run(t, in[:cut], in[cut:]); got != tc.want {
					t.Errorf("cut at %d: got %q, want %q", cut, got, tc.want)
				}
			}
		})
	}
}

func TestFlushContinues(t *testing.T) {
	var out bytes.Buffer
	s := New(&out)
	s.Write([]byte("line\nPass"))
	if out.String() != "line\n" {
		t.Fatalf("before flush: %q", out.String())
	}
	if !s.Pending() {
		t.Fatal("Pending = false with a held partial line")
	}
	s.Write([]byte("word: "))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "line\nPassword: " {
		t.Fatalf("after flush: %q", out.String())
	}
	if s.Pending() {
		t.Fatal("Pending = true after Flush")
	}
	if err := s.Flush(); err != nil || out.String() != "line\nPassword: " {
		t.Fatalf("second flush changed output: %q %v", out.String(), err)
	}
	s.Write([]byte("ok\r"))
	s.Write([]byte("\nnext\n"))
	s.Close()
	if want := "line\nPassword: ok\nnext\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

func TestCRAfterFlushStartsNewLine(t *testing.T) {
	var out bytes.Buffer
	s := New(&out)
	s.Write([]byte("10%"))
	s.Flush()
	s.Write([]byte("\r20%\r30%"))
	s.Flush()
	s.Write([]byte("\r"))
	s.Write([]byte("40%\r50%\n"))
	s.Close()
	if want := "10%\n30%\n50%\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// capWriter records the largest single write.
type capWriter struct {
	bytes.Buffer
	maxWrite int
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.maxWrite = max(c.maxWrite, len(p))
	return c.Buffer.Write(p)
}

func TestLineCap(t *testing.T) {
	var out capWriter
	s := New(&out)
	chunk := bytes.Repeat([]byte("x"), 1000)
	total := 0
	for total < 1<<20 {
		s.Write(chunk)
		total += len(chunk)
		if cap(s.buf) > 2*LineCap {
			t.Fatalf("buffer grew to %d", cap(s.buf))
		}
	}
	if out.Len() < total-LineCap {
		t.Fatalf("only %d of %d bytes written while the line grew", out.Len(), total)
	}
	// The line was written in part, so a CR followed by text starts a new line.
	s.Write([]byte("\rnew\n"))
	s.Close()
	want := strings.Repeat("x", total) + "\nnew\n"
	if out.String() != want {
		t.Fatalf("output differs (len %d, want %d)", out.Len(), len(want))
	}
}

func TestHugeWriteBounded(t *testing.T) {
	for _, name := range []string{"no newline", "short lines", "multibyte"} {
		t.Run(name, func(t *testing.T) {
			var in []byte
			switch name {
			case "no newline":
				in = bytes.Repeat([]byte("y"), 16<<20)
			case "short lines":
				in = bytes.Repeat([]byte("ab\n"), 16<<20/3)
			case "multibyte":
				in = bytes.Repeat([]byte("\u4e16"), 16<<20/3)
			}
			var out capWriter
			s := New(&out)
			s.Write(in)
			s.Close()
			if !bytes.Equal(out.Bytes(), in) {
				t.Fatal("output differs from input")
			}
			if cap(s.buf) > 2*(LineCap+outHigh) || out.maxWrite > LineCap+outHigh {
				t.Fatalf("buffer %d, largest write %d", cap(s.buf), out.maxWrite)
			}
			if !utf8.Valid(out.Bytes()) {
				t.Fatal("invalid UTF-8")
			}
		})
	}
}

func TestCapSplitsOnCharBoundary(t *testing.T) {
	var writes [][]byte
	w := writerFunc(func(p []byte) (int, error) {
		writes = append(writes, append([]byte(nil), p...))
		return len(p), nil
	})
	s := New(w)
	in := bytes.Repeat([]byte("\u4e16"), LineCap) // 3 bytes each: crosses the cap mid-char
	for _, b := range bytewise(append([]byte("a"), in...)) {
		s.Write(b)
	}
	s.Close()
	var all []byte
	for _, p := range writes {
		if !utf8.Valid(p) {
			t.Fatalf("a write of %d bytes is not valid UTF-8", len(p))
		}
		all = append(all, p...)
	}
	if !bytes.Equal(all, append([]byte("a"), in...)) {
		t.Fatal("output differs")
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestWriteError(t *testing.T) {
	boom := errors.New("boom")
	s := New(writerFunc(func(p []byte) (int, error) { return 0, boom }))
	if _, err := s.Write([]byte("a\n")); err != boom {
		t.Fatalf("Write err = %v", err)
	}
	if _, err := s.Write([]byte("b\n")); err != boom {
		t.Fatalf("second Write err = %v", err)
	}
	if err := s.Close(); err != boom {
		t.Fatalf("Close err = %v", err)
	}
}

func TestWriteAfterClose(t *testing.T) {
	s := New(io.Discard)
	s.Close()
	if _, err := s.Write([]byte("x")); err != ErrClosed {
		t.Fatalf("err = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNoAllocsSteadyState(t *testing.T) {
	s := New(io.Discard)
	line := []byte(strings.Repeat("z", 99) + "\r\n\x1b[1mhi\x1b[0m \u00e9\n")
	s.Write(line)
	allocs := testing.AllocsPerRun(100, func() { s.Write(line) })
	if allocs != 0 {
		t.Fatalf("%v allocations per Write", allocs)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, buf *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for buf.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("output %q, want %q", buf.String(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestPumpFlushesPromptAfterIdle(t *testing.T) {
	pr, pw := io.Pipe()
	var out syncBuffer
	var mu sync.Mutex
	counted := 0
	done := make(chan error, 1)
	go func() {
		done <- Pump(pr, &out, 20*time.Millisecond, func(n int) {
			mu.Lock()
			counted += n
			mu.Unlock()
		})
	}()
	pw.Write([]byte("\x1b[1mlogin\x1b[0m\nPassword: "))
	waitFor(t, &out, "login\nPassword: ")
	pw.Write([]byte("\r\n"))
	waitFor(t, &out, "login\nPassword: \n")
	pw.Write([]byte("retry: "))
	waitFor(t, &out, "login\nPassword: \nretry: ")
	pw.Write([]byte("\rretry: "))
	waitFor(t, &out, "login\nPassword: \nretry: \nretry: ")
	pw.Write([]byte("x\xe4\xb8"))
	pw.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Pump = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pump did not return at EOF")
	}
	want := "login\nPassword: \nretry: \nretry: x\ufffd\ufffd"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	mu.Lock()
	defer mu.Unlock()
	if counted != len(want) {
		t.Fatalf("onWrite counted %d bytes, want %d", counted, len(want))
	}
}

func TestPumpNoEarlyFlush(t *testing.T) {
	pr, pw := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- Pump(pr, &out, time.Hour, nil) }()
	pw.Write([]byte("a\npartial"))
	waitFor(t, &out, "a\n")
	time.Sleep(30 * time.Millisecond)
	if got := out.String(); got != "a\n" {
		t.Fatalf("partial line written before idle: %q", got)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a\npartial" {
		t.Fatalf("got %q", got)
	}
}

// TestPumpIdleCountsFromLastInput: input that keeps coming on the same line
// holds the flush back; it happens once the input stops.
func TestPumpIdleCountsFromLastInput(t *testing.T) {
	pr, pw := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- Pump(pr, &out, 250*time.Millisecond, nil) }()
	start := time.Now()
	want := ""
	for i := 0; i < 20; i++ {
		pw.Write([]byte("."))
		want += "."
		time.Sleep(10 * time.Millisecond)
	}
	if got := out.String(); got != "" && time.Since(start) < 450*time.Millisecond {
		t.Fatalf("flushed %q while input kept coming", got)
	}
	waitFor(t, &out, want)
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestPumpEnds(t *testing.T) {
	var out bytes.Buffer
	err := Pump(&errReader{data: []byte("a\r\nb"), err: syscall.EIO}, &out, 0, nil)
	if err != nil || out.String() != "a\nb" {
		t.Fatalf("EIO: %v %q", err, out.String())
	}
	out.Reset()
	wrapped := &os.PathError{Op: "read", Path: "/dev/ptmx", Err: syscall.EIO}
	if err := Pump(&errReader{data: []byte("x"), err: wrapped}, &out, 0, nil); err != nil || out.String() != "x" {
		t.Fatalf("wrapped EIO: %v %q", err, out.String())
	}
	out.Reset()
	boom := errors.New("boom")
	if err := Pump(&errReader{data: []byte("y"), err: boom}, &out, 0, nil); err != boom || out.String() != "y" {
		t.Fatalf("other error: %v %q", err, out.String())
	}
	werr := errors.New("disk full")
	err = Pump(strings.NewReader("line\n"), writerFunc(func([]byte) (int, error) { return 0, werr }), 0, nil)
	if err != werr {
		t.Fatalf("write error: %v", err)
	}
}

// checkClean asserts the sanitizer's output invariants.
func checkClean(t *testing.T, out []byte) {
	t.Helper()
	if !utf8.Valid(out) {
		t.Fatalf("output is not valid UTF-8: %q", out)
	}
	for i, c := range out {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			t.Fatalf("output has control byte %#x at %d: %q", c, i, out)
		}
	}
}

// FuzzSanitize: for any input, split into Writes at any points (cuts gives
// the length of each Write, 0 an empty Write, cycling), the output equals
// that of one Write and of byte-by-byte Writes; it is valid UTF-8 with no
// control byte but \n and \t; it is at most three bytes per input byte
// (U+FFFD per invalid byte); and printable ASCII passes unchanged.
func FuzzSanitize(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{3})
	f.Add([]byte("\x1b[31mred\x1b[0m\r\n10%\r50%\r100%\n"), []byte{1, 0, 2})
	f.Add([]byte("\x1b]0;t\x07\x1bP1\x1b\\\x1b(B\xe4\xb8\x96\xff\xfe\r"), []byte{2, 5})
	f.Add([]byte("a\xe4\xb8\x1b[1mb\tc\x00\x7f"), []byte{5, 1})
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		whole := run(t, in)
		checkClean(t, []byte(whole))
		if len(whole) > 3*len(in) {
			t.Fatalf("%d bytes of output for %d of input", len(whole), len(in))
		}
		var chunks [][]byte
		for rest, k := in, 0; len(rest) > 0; k++ {
			n := 1
			if len(cuts) > 0 {
				n = min(int(cuts[k%len(cuts)]), len(rest))
				if n == 0 && k > 4*len(in)+len(cuts) {
					n = 1 // only zeros: make progress
				}
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		if got := run(t, chunks...); got != whole {
			t.Fatalf("split %v: %q != whole %q", chunkLens(chunks), got, whole)
		}
		if got := run(t, bytewise(in)...); got != whole {
			t.Fatalf("bytewise %q != whole %q", got, whole)
		}
		if !bytes.ContainsFunc(in, func(r rune) bool { return r < 0x20 || r >= 0x7f }) && whole != string(in) {
			t.Fatalf("plain text changed: %q -> %q", in, whole)
		}
	})
}

func chunkLens(chunks [][]byte) []int {
	n := make([]int, len(chunks))
	for i, c := range chunks {
		n[i] = len(c)
	}
	return n
}

// flushBuffer is a syncBuffer that takes Pump's on-demand flush.
type flushBuffer struct {
	syncBuffer
	mu    sync.Mutex
	flush func() bool
	reads int
}

func (f *flushBuffer) SetFlush(fn func() bool) {
	f.mu.Lock()
	f.flush = fn
	f.mu.Unlock()
}

func (f *flushBuffer) ObserveRead(p []byte) {
	n := len(p)
	f.mu.Lock()
	f.reads += n
	f.mu.Unlock()
}

func (f *flushBuffer) readBytes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *flushBuffer) hasFlush() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flush != nil
}

func (f *flushBuffer) flushNow() bool {
	f.mu.Lock()
	fn := f.flush
	f.mu.Unlock()
	return fn()
}

// TestPumpFlushOnDemand: a writer that implements FlushSetter can have the
// held partial line (a prompt) written at once, long before idle passes;
// after Pump returns the function does nothing.
func TestPumpFlushOnDemand(t *testing.T) {
	pr, pw := io.Pipe()
	out := &flushBuffer{}
	done := make(chan error, 1)
	go func() { done <- Pump(pr, out, time.Hour, nil) }()
	pw.Write([]byte("a\nName: "))
	waitFor(t, &out.syncBuffer, "a\n")
	// The held prompt was observed as read (ReadObserver), though not
	// written.
	for deadline := time.Now().Add(5 * time.Second); out.readBytes() != len("a\nName: "); {
		if time.Now().After(deadline) {
			t.Fatalf("ObserveRead counted %d bytes, want %d", out.readBytes(), len("a\nName: "))
		}
		time.Sleep(time.Millisecond)
	}
	// The pump has taken the whole write once Write returned on the pipe,
	// but may not yet have passed it to the sanitizer: flush until the
	// prompt shows, each flush writing at once what is held.
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "a\nName: " {
		if time.Now().After(deadline) {
			t.Fatalf("the held prompt was not written by the on-demand flush: %q", out.String())
		}
		out.flushNow()
	}
	pw.Write([]byte("bob\n"))
	waitFor(t, &out.syncBuffer, "a\nName: bob\n")
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out.flushNow() // after Pump returned: nothing, and no panic
	if got := out.String(); got != "a\nName: bob\n" {
		t.Fatalf("got %q", got)
	}
}

// TestPumpFlushOnDemandRawFile: with a descriptor as input (an *os.File, as
// a pty master is), Pump reads it raw under its lock; the on-demand flush
// writes the held prompt, output is whole and end of file ends Pump.
func TestPumpFlushOnDemandRawFile(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	out := &flushBuffer{}
	done := make(chan error, 1)
	go func() { done <- Pump(pr, out, time.Hour, nil) }()
	pw.Write([]byte("a\nName: "))
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "a\nName: " {
		if time.Now().After(deadline) {
			t.Fatalf("the held prompt was not written by the on-demand flush: %q", out.String())
		}
		if out.hasFlush() {
			out.flushNow()
		}
		time.Sleep(time.Millisecond)
	}
	if !out.flushNow() {
		t.Fatalf("flush reports input waiting in an empty pipe")
	}
	pw.Write([]byte("bob\n" + strings.Repeat("x", 100000) + "\n"))
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "a\nName: bob\n"+strings.Repeat("x", 100000)+"\n"; got != want {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
	if out.readBytes() != len("a\nName: bob\n")+100001 {
		t.Fatalf("ObserveRead counted %d", out.readBytes())
	}
}

// TestPumpFlushOnDemandBlockingFile: a descriptor in blocking mode (as a
// pty master is once Fd() was called on it) is read on one thread; the
// on-demand flush writes the held prompt once that thread is asleep in
// its read, so nothing can be between the input and the sanitizer.
func TestPumpFlushOnDemandBlockingFile(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pr.Fd() // blocking mode from here on
	out := &flushBuffer{}
	done := make(chan error, 1)
	go func() { done <- Pump(pr, out, time.Hour, nil) }()
	pw.Write([]byte("a\nName: "))
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "a\nName: " {
		if time.Now().After(deadline) {
			t.Fatalf("the held prompt was not written by the on-demand flush: %q", out.String())
		}
		if out.hasFlush() && out.flushNow() != (out.String() == "a\nName: ") {
			t.Fatalf("flush reported done but the prompt is not written: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	pw.Write([]byte("bob\n"))
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a\nName: bob\n" {
		t.Fatalf("got %q", got)
	}
}
