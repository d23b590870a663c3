package runner

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/screen"
	"github.com/shellctl/shellctl/internal/screen/emu"
)

func snap(t *testing.T, f *screenFeed) screen.Snapshot {
	t.Helper()
	now := time.Now()
	f.settle(now, 0, now.Add(5*time.Second), f.done, nil)
	b, why := f.snapshot(0)
	if why != "" {
		t.Fatalf("snapshot: %s", why)
	}
	var s screen.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScreenFeedCold: a job that prints a line and ends never makes the
// emulator, and its last screen (what saveScreen writes) is that line.
func TestScreenFeedCold(t *testing.T) {
	f := newScreenFeed(200, 50, inProcScreen(t))
	f.put([]byte("hi\r\n"))
	f.close()
	b, why := f.snapshot(screen.ScrollbackLines)
	if why != "" {
		t.Fatalf("snapshot: %s", why)
	}
	var s screen.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Lines[0] != "hi" || s.Cursor != (screen.Cursor{Row: 1, Col: 0, Visible: true}) || s.Scrollback == nil || len(*s.Scrollback) != 0 {
		t.Fatalf("last screen %s", b)
	}
	if f.term.Emulating() {
		t.Fatal("the emulator was made for a screen of one plain line")
	}
}

// TestScreenFeedResizeInOrder: a resize applies between the bytes read
// before it and those after.
func TestScreenFeedResizeInOrder(t *testing.T) {
	f := newScreenFeed(20, 3, inProcScreen(t))
	defer f.close()
	f.put([]byte(strings.Repeat("x", 15)))
	f.resize(10, 4)
	f.put([]byte("\r\nab"))
	s := snap(t, f)
	if s.Cols != 10 || s.Rows != 4 || s.Lines[0] != strings.Repeat("x", 10) || s.Lines[1] != "ab" {
		t.Fatalf("after resize: %+v", s)
	}
	f.resize(1000, 1000)
	now := time.Now()
	f.settle(now, 0, now.Add(5*time.Second), f.done, nil)
	if _, why := f.snapshot(0); !strings.HasPrefix(why, screenErrTooLarge) {
		t.Fatalf("a 1000x1000 screen: %q", why)
	}
	f.resize(8, 2)
	f.put([]byte("again"))
	if s := snap(t, f); s.Cols != 8 || s.Lines[0] != "again" {
		t.Fatalf("emulated again: %+v", s)
	}
}

// TestScreenFeedBounded: the output waits for the emulator only once it is
// screenQueue behind, and no byte is lost.
func TestScreenFeedBounded(t *testing.T) {
	f := newScreenFeed(40, 5, inProcScreen(t))
	defer f.close()
	f.tmu.Lock() // the emulator cannot feed
	f.put([]byte("first\r\n"))
	f.kick()
	// Wait until the emulator took that batch and is stuck feeding it.
	for {
		f.mu.Lock()
		n := len(f.buf)
		f.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	chunk := []byte(strings.Repeat("0123456789abcdef", 4095/16) + "\r\n")
	done := make(chan int)
	go func() {
		n := 0
		for range 2 * screenQueue / len(chunk) {
			f.put(chunk)
			n++
		}
		f.put([]byte("last line\r\n"))
		done <- n
	}()
	// The queue fills to its bound, then the writer waits.
	for {
		f.mu.Lock()
		n := len(f.buf)
		f.mu.Unlock()
		if n > screenQueue-len(chunk) {
			if n > screenQueue {
				t.Fatalf("queue holds %d bytes, over its bound %d", n, screenQueue)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the writer did not wait for an emulator 4 MiB behind")
	case <-time.After(200 * time.Millisecond):
	}
	f.tmu.Unlock()
	<-done
	s := snap(t, f)
	if s.Lines[3] != "last line" {
		t.Fatalf("after the queue drained: %q", s.Lines)
	}
}

// TestScreenFeedSettle: keys are answered after the terminal went quiet.
func TestScreenFeedSettle(t *testing.T) {
	f := newScreenFeed(40, 5, inProcScreen(t))
	defer f.close()
	start := time.Now()
	go func() {
		for i := range 5 {
			time.Sleep(30 * time.Millisecond)
			f.put([]byte{'a' + byte(i)})
		}
	}()
	f.settle(start, 100*time.Millisecond, start.Add(5*time.Second), f.done, nil)
	b, _ := f.snapshot(0)
	if !strings.Contains(string(b), `"abcde"`) || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("settled after %v with %s", time.Since(start), b)
	}
}

// inProcScreen starts screens served in the test's own process (emu.Serve
// over pipes): the frames are the screen process's, without its binary.
func inProcScreen(tb testing.TB) screenStarter { return fakeScreen(tb, emu.Serve, screen.Protocol) }

// fakeScreen starts "screen processes" over pipes: serve (nil: one that
// never reads nor answers, as a stopped one) with a start frame of
// protocol.
func fakeScreen(tb testing.TB, serve func(io.Reader, io.Writer) error, protocol int) screenStarter {
	return func(cols, rows int) (*screenConn, error) {
		inR, inW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		if serve == nil {
			tb.Cleanup(func() { inR.Close(); outW.Close() })
			return &screenConn{in: inW, out: outR}, nil
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = serve(inR, outW)
			inR.Close()
			outW.Close()
		}()
		tb.Cleanup(func() { inW.Close(); <-done })
		if _, err := inW.Write(screen.AppendInts(nil, screen.FrameStart, protocol, cols, rows)); err != nil {
			return nil, err
		}
		return &screenConn{in: inW, out: outR}, nil
	}
}
