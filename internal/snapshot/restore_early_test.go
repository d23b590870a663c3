package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// answerBound is how long a restore that failed early may take to answer
// a client that stalls: generous, against an answer that comes at once
// (before the fix it came only with the client's next bytes).
const answerBound = 5 * time.Second

// prefetchersRunning counts the goroutines reading a restore's body ahead.
func prefetchersRunning() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "snapshot.(*prefetcher).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A restore that fails early answers at once, even when the client then
// stalls with the connection open (the broken start of the stream is all
// it sends), and releases the gate. The goroutine reading its body ends
// when the client closes, or at the deadline when it does not.
func TestRestoreEarlyFailureAnswersStalledClient(t *testing.T) {
	escaping := makeArchive(t, file("../evil", "x"))
	throughLink := throughLinkArchive(t)
	notZstd := []byte(strings.Repeat("this is not a zstd stream\n", 200))
	cases := []struct {
		name    string
		sent    []byte
		chunked bool
		code    string
	}{
		// refused by the reading stage at its first bytes
		{"not zstd", notZstd, false, "archive_malformed"},
		{"not zstd, chunked", notZstd, true, "archive_malformed"},
		// refused by the reading stage at an entry
		{"escaping path", escaping, false, "archive_malformed"},
		// refused by the writer stage while the reading stage waits for
		// the rest of the body (as a full disk would be)
		{"path through a link", throughLink, false, "archive_malformed"},
		{"path through a link, chunked", throughLink, true, "archive_malformed"},
	}
	for _, c := range cases {
		for _, end := range []string{"client closes", "deadline"} {
			t.Run(c.name+", "+end, func(t *testing.T) {
				waitFor(t, 5*time.Second, "no body reader left by an earlier test", func() bool { return prefetchersRunning() == 0 })
				timeout := time.Hour
				if end == "deadline" {
					timeout = 2 * time.Second
				}
				svc, srv, _ := newServer(t, Config{Home: t.TempDir(), Timeout: timeout})
				u, _ := url.Parse(srv.URL)
				conn, err := net.Dial("tcp", u.Host)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				head := fmt.Sprintf("POST /v1/snapshot/restore HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", u.Host, testToken)
				start := time.Now()
				if c.chunked {
					// one chunk, and no last chunk: the body goes on
					fmt.Fprintf(conn, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", head, len(c.sent), c.sent)
				} else {
					// a length far beyond what is sent
					fmt.Fprintf(conn, "%sContent-Length: %d\r\n\r\n%s", head, len(c.sent)+64<<20, c.sent)
				}
				conn.SetReadDeadline(start.Add(answerBound))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("no answer within %s of a stalled client's broken start: %v", answerBound, err)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("answer's body: %v", err)
				}
				answered := time.Since(start)
				t.Logf("answered %d in %s", resp.StatusCode, answered)
				if got := errCode(t, b); got != c.code {
					t.Errorf("answer %d %s, want %s", resp.StatusCode, b, c.code)
				}
				if !resp.Close {
					t.Error("the connection is kept after a body that was not read to its end")
				}
				if svc.busy.Load() {
					t.Error("the gate is still taken after the answer")
				}
				if end == "client closes" {
					conn.Close()
				}
				el := waitFor(t, timeout+answerBound, "the body's reader ended", func() bool { return prefetchersRunning() == 0 })
				if end == "deadline" && answered+el < timeout-100*time.Millisecond {
					// No read was under way when the restore stopped (the
					// prefetcher had not gone back to the body yet): the
					// handler did not wait, and the server must have closed
					// the stalled client's connection, not left it open.
					conn.SetReadDeadline(time.Now().Add(answerBound))
					if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
						t.Errorf("the body's reader ended %s after the start, before the deadline %s, and the connection is still open (%v)", answered+el, timeout, err)
					}
				}
			})
		}
	}
}

// blockingReader serves data, then blocks in Read until release is
// closed, after closing blocked; it counts the Reads begun.
type blockingReader struct {
	data    []byte
	blocked chan struct{}
	once    sync.Once
	release chan struct{}
	reads   atomic.Int32
}

func newBlockingReader(data []byte) *blockingReader {
	return &blockingReader{data: data, blocked: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	b.reads.Add(1)
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	b.once.Do(func() { close(b.blocked) })
	<-b.release
	return copy(p, "more bytes that nobody wants"), nil
}

// failWhileBlocked restores an archive the writer stage refuses (a path
// through a link), the writer failing only once the body's reader is
// blocked in a read of src, as with a client that stalls.
func failWhileBlocked(t *testing.T, src *blockingReader, opts RestoreOptions) (error, time.Duration) {
	t.Helper()
	testHookApply = func() { <-src.blocked }
	t.Cleanup(func() { testHookApply = nil })
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := Restore(context.Background(), src, t.TempDir(), opts)
		done <- err
	}()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(answerBound):
		close(src.release)
		<-done
		t.Fatalf("Restore did not return within %s of a failure while its source blocked", answerBound)
	}
	return nil, 0
}

func throughLinkArchive(t *testing.T) []byte {
	return makeArchive(t,
		ent{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "."}},
		file("link/x", "through the link"))
}

// Without a way to interrupt the read under way, Restore still returns at
// once on an early failure (here the writer stage's, while the reading
// stage waits for more of the body): it does not wait for that read. The
// goroutine doing it ends when it returns, its bytes dropped, and the
// source is not read again.
func TestRestoreEarlyFailureDoesNotWaitForTheRead(t *testing.T) {
	waitFor(t, 5*time.Second, "no body reader left by an earlier test", func() bool { return prefetchersRunning() == 0 })
	src := newBlockingReader(throughLinkArchive(t))
	err, el := failWhileBlocked(t, src, RestoreOptions{})
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("err %v, want ErrMalformed (the path through a link)", err)
	}
	t.Logf("returned in %s", el)
	if n := prefetchersRunning(); n != 1 {
		t.Errorf("%d body readers while the read is under way, want 1", n)
	}
	close(src.release)
	waitFor(t, 5*time.Second, "the body reader ended", func() bool { return prefetchersRunning() == 0 })
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads of the source, want 2 (none after the one under way)", n)
	}
}

// A client still sending a body of unknown length (chunked, as from a
// pipe) when the restore refuses it reads the refusal, not a reset: the
// server reads on after the answer before it closes the connection.
// (Stopping the read at once, by the connection's deadline, made 9 of 20
// such clients see "connection reset by peer".)
func TestRestoreEarlyRefusalReachesChunkedSender(t *testing.T) {
	_, srv, _ := newServer(t, Config{Home: t.TempDir()})
	data := []byte(randomBody(t, 64<<20))
	for i := range 10 {
		// io.MultiReader hides the length: the body goes chunked
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/snapshot/restore", io.MultiReader(bytes.NewReader(data)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("attempt %d: %v, want the answer archive_malformed", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || errCode(t, b) != "archive_malformed" {
			t.Fatalf("attempt %d: answer %d %s, want 400 archive_malformed", i, resp.StatusCode, b)
		}
	}
}

// A restore whose body stalls returns when its context ends (the server
// stopping, the request gone), with the context's error, and does not wait
// for the read under way.
func TestRestoreStopsWhenItsContextEnds(t *testing.T) {
	waitFor(t, 5*time.Second, "no body reader left by an earlier test", func() bool { return prefetchersRunning() == 0 })
	// A whole first entry, then the body stalls.
	arch := makeArchive(t, file("a", strings.Repeat("x", 1000)), file("b", "y"))
	src := newBlockingReader(arch[:len(arch)/2])
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Restore(ctx, src, t.TempDir(), RestoreOptions{})
		done <- err
	}()
	<-src.blocked
	select {
	case err := <-done:
		t.Fatalf("Restore returned before its context ended, with the body stalled: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want one that wraps context.Canceled", err)
		}
	case <-time.After(answerBound):
		close(src.release)
		<-done
		t.Fatalf("Restore did not return within %s of its context's end", answerBound)
	}
	close(src.release)
	waitFor(t, 5*time.Second, "the body reader ended", func() bool { return prefetchersRunning() == 0 })
}
