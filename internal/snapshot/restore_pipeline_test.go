package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// progressReader counts the bytes read from it and closes reachedEnd once
// the whole archive has been read.
type progressReader struct {
	r          io.Reader
	total      int
	mu         sync.Mutex
	n          int
	reachedEnd chan struct{}
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.mu.Lock()
	p.n += n
	if p.n == p.total && p.reachedEnd != nil {
		close(p.reachedEnd)
		p.reachedEnd = nil
	}
	p.mu.Unlock()
	return n, err
}

func randomBody(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// While the writer stage holds its first batch, the archive goes on being
// read and decoded: the two stages overlap. Done in one goroutine, the
// hold would keep the rest of the archive unread.
func TestRestoreReadsAheadWhileWriting(t *testing.T) {
	home := t.TempDir()
	bodies := []string{"a", randomBody(t, 200<<10), randomBody(t, 200<<10), randomBody(t, 200<<10)}
	var ents []ent
	for i, b := range bodies {
		ents = append(ents, file(fmt.Sprintf("f%d", i), b))
	}
	data := makeArchive(t, ents...)
	// The contents fit in the batches the reading stage can fill while
	// the writer holds the first one.
	if sum := 3 * (200 << 10); sum > (restoreBatches-1)*restoreBatchBytes {
		t.Fatalf("test archive of %d bytes of contents is larger than the read-ahead", sum)
	}
	src := &progressReader{r: bytes.NewReader(data), total: len(data), reachedEnd: make(chan struct{})}
	reachedEnd := src.reachedEnd

	var once sync.Once
	var readAhead bool
	testHookApply = func() {
		once.Do(func() {
			select {
			case <-reachedEnd:
				readAhead = true
			case <-time.After(20 * time.Second):
			}
		})
	}
	t.Cleanup(func() { testHookApply = nil })

	st, err := Restore(context.Background(), src, home, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !readAhead {
		t.Error("the archive was not read to its end while the first batch was held in the writer")
	}
	if st.Entries != int64(len(bodies)) {
		t.Errorf("entries %d, want %d", st.Entries, len(bodies))
	}
	for i, b := range bodies {
		got, err := os.ReadFile(filepath.Join(home, fmt.Sprintf("f%d", i)))
		if err != nil || string(got) != b {
			t.Errorf("f%d: %d bytes, want %d (%v)", i, len(got), len(b), err)
		}
	}
}

// Files larger than a batch, many entries per batch, and a large file in
// the state dir (its contents skipped across batches) restore exactly.
func TestRestoreAcrossBatches(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, "state")
	writeFile(t, filepath.Join(state, "db"), "live", 0o600)
	big := randomBody(t, 3*restoreBatchBytes+17)
	ents := []ent{
		file("state/db", randomBody(t, 2*restoreBatchBytes+5)),
		file("big", big),
		file("empty", ""),
	}
	for i := range 3 * restoreBatchEntries {
		ents = append(ents, file(fmt.Sprintf("many/e%04d", i), fmt.Sprint(i)))
	}
	ents = append(ents, file("last", "end"))
	st, err := Restore(context.Background(), bytes.NewReader(makeArchive(t, ents...)), home, RestoreOptions{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(ents) - 1); st.Entries != want {
		t.Errorf("entries %d, want %d (all but the state dir's file)", st.Entries, want)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "db")); string(b) != "live" {
		t.Errorf("state dir file overwritten: %d bytes", len(b))
	}
	if b, _ := os.ReadFile(filepath.Join(home, "big")); string(b) != big {
		t.Errorf("big: %d bytes, want %d", len(b), len(big))
	}
	if fi, err := os.Stat(filepath.Join(home, "empty")); err != nil || fi.Size() != 0 {
		t.Errorf("empty: %v %v", fi, err)
	}
	for i := range 3 * restoreBatchEntries {
		name := fmt.Sprintf("many/e%04d", i)
		if b, _ := os.ReadFile(filepath.Join(home, name)); string(b) != fmt.Sprint(i) {
			t.Errorf("%s: %q", name, b)
			break
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, "last")); string(b) != "end" {
		t.Errorf("last: %q", b)
	}
}

// An entry refused while reading (here a device node) still leaves the
// entries before it restored, as when one goroutine did both.
func TestRestoreAppliesEntriesBeforeARefusal(t *testing.T) {
	home := t.TempDir()
	data := makeArchive(t,
		file("before", "kept"),
		ent{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev", Mode: 0o644}},
		file("after", "never"),
	)
	st, err := Restore(context.Background(), bytes.NewReader(data), home, RestoreOptions{})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v, want ErrMalformed", err)
	}
	if st.Entries != 1 {
		t.Errorf("entries %d, want 1", st.Entries)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "before")); string(b) != "kept" {
		t.Errorf("before: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(home, "after")); err == nil {
		t.Error("the entry after the refused one was restored")
	}
}

// A failure of the writer stage (a path through a symlink) is the error
// returned, and the reading stage stops: nothing after it is restored.
func TestRestoreWriterErrorStopsReading(t *testing.T) {
	home := t.TempDir()
	ents := []ent{
		{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "."}},
		file("link/x", "through the link"),
	}
	for i := range 2 * restoreBatchEntries {
		ents = append(ents, file(fmt.Sprintf("later%d", i), "no"))
	}
	_, err := Restore(context.Background(), bytes.NewReader(makeArchive(t, ents...)), home, RestoreOptions{})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v, want ErrMalformed for the path through a link", err)
	}
	if _, err := os.Lstat(filepath.Join(home, "x")); err == nil {
		t.Error("written through the symlink")
	}
	if _, err := os.Lstat(filepath.Join(home, fmt.Sprintf("later%d", 2*restoreBatchEntries-1))); err == nil {
		t.Error("entries after the failed one were restored")
	}
}

// The body is read ahead of the decoder: without a single Read of the
// consumer, the prefetcher fills its chunks from the source.
func TestPrefetcherReadsAhead(t *testing.T) {
	body := randomBody(t, 2*prefetchChunks*prefetchChunk)
	want := prefetchChunks * prefetchChunk
	src := &progressReader{r: bytes.NewReader([]byte(body)), total: want, reachedEnd: make(chan struct{})}
	reached := src.reachedEnd
	p := newPrefetcher(src)
	defer p.stop()
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatalf("the prefetcher read %d bytes ahead, want %d", src.n, want)
	}
	got, err := io.ReadAll(p)
	if err != nil || string(got) != body {
		t.Errorf("read %d bytes (%v), want the %d of the source", len(got), err, len(body))
	}
}

// flakyReader returns its data in uneven pieces, then err.
type flakyReader struct {
	data []byte
	step int
	err  error
}

func (f *flakyReader) Read(b []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	f.step = f.step%7 + 1
	n := min(len(b), len(f.data), f.step*9973)
	copy(b, f.data[:n])
	f.data = f.data[n:]
	return n, nil
}

// The prefetcher serves the bytes in order whatever the sizes of the reads
// on either side, then the source's own error.
func TestPrefetcherServesInOrderThenTheError(t *testing.T) {
	body := randomBody(t, 3*prefetchChunks*prefetchChunk+123)
	cut := errors.New("connection reset by peer")
	p := newPrefetcher(&flakyReader{data: []byte(body), err: cut})
	defer p.stop()
	var got []byte
	buf := make([]byte, 70000)
	for i := 1; ; i++ {
		n, err := p.Read(buf[:1+i*7919%len(buf)])
		got = append(got, buf[:n]...)
		if err != nil {
			if err != cut {
				t.Errorf("error %v, want the source's", err)
			}
			break
		}
	}
	if string(got) != body {
		t.Errorf("served %d bytes, want the %d of the source in order", len(got), len(body))
	}
}

// A body cut in the middle is the transport's fault, not the archive's:
// the error wraps the read error and not ErrMalformed.
func TestRestoreCutBodyIsNotMalformed(t *testing.T) {
	home := t.TempDir()
	data := makeArchive(t, file("a", randomBody(t, 600<<10)), file("b", "x"))
	cut := errors.New("connection reset by peer")
	_, err := Restore(context.Background(), &flakyReader{data: data[:len(data)/2], err: cut}, home, RestoreOptions{})
	if !errors.Is(err, cut) || errors.Is(err, ErrMalformed) {
		t.Errorf("err %v, want the read error and not ErrMalformed", err)
	}
}
