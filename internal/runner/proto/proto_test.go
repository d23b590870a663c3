package proto

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func pair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return NewConn(a), NewConn(b)
}

func TestRoundTripKeepsBytesAndNullExitCode(t *testing.T) {
	a, b := pair(t)
	code := 0
	data := []byte("line\r\n\x00\xff\x1b[31m")
	go func() {
		a.Send(&Msg{T: TInput, ID: 7, Data: data})
		a.Send(&Msg{T: TExit, ExitCode: &code, Status: "exited"})
		a.Send(&Msg{T: TExit, Status: "lost"})
	}()
	m, err := b.Recv()
	if err != nil || m.T != TInput || m.ID != 7 || !bytes.Equal(m.Data, data) {
		t.Fatalf("input = %+v %v", m, err)
	}
	m, _ = b.Recv()
	if m.ExitCode == nil || *m.ExitCode != 0 {
		t.Fatalf("exit code 0 lost: %+v", m)
	}
	m, _ = b.Recv()
	if m.ExitCode != nil {
		t.Fatalf("absent exit code became %d", *m.ExitCode)
	}
}

func TestLargeInputFitsAndOversizedLineIsRefused(t *testing.T) {
	a, b := pair(t)
	big := bytes.Repeat([]byte("x"), 1<<20) // the API's input limit
	go a.Send(&Msg{T: TInput, Data: big})
	m, err := b.Recv()
	if err != nil || len(m.Data) != len(big) {
		t.Fatalf("1 MiB input: %v (%d bytes)", err, len(m.Data))
	}
	go a.c.Write([]byte(strings.Repeat("y", maxLine+10) + "\n"))
	if _, err := b.Recv(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("oversized line: %v", err)
	}
}

func TestEOFAndTruncatedMessage(t *testing.T) {
	a, b := pair(t)
	go func() { a.c.Write([]byte(`{"t":"out"`)); a.Close() }()
	if _, err := b.Recv(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated: %v", err)
	}
	c, d := pair(t)
	c.Close()
	if _, err := d.Recv(); err != io.EOF {
		t.Fatalf("closed: %v", err)
	}
}

// A state dir deeper than sockaddr_un allows still gets its socket, reached
// through /proc/self/fd.
func TestListenAndDialWithALongPath(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	if len(filepath.Join(long, "ctl.sock")) <= maxSunPath {
		t.Fatal("path not long enough for the test")
	}
	l, err := Listen(long, "ctl.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Send(&Msg{T: TState, Size: 42})
		}
	}()
	p, done, err := ShortPath(long, "ctl.sock")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
	done()
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(raw)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	m, err := c.Recv()
	if err != nil || m.Size != 42 {
		t.Fatalf("recv over long path: %+v %v", m, err)
	}
	if _, err := os.Stat(filepath.Join(long, "ctl.sock")); err != nil {
		t.Fatalf("socket file not at its path: %v", err)
	}
}

// Long messages are made and read in buffers kept for reuse (longBufs):
// what one message decoded to is its own, whatever the messages after it
// (longer, shorter, written from several goroutines at once) do with the
// buffers. Every message is kept and compared only after all were read.
func TestLongMessagesKeepTheirBytes(t *testing.T) {
	a, b := pair(t)
	const n = 60
	want := make(map[int64][]byte, n)
	for i := range n {
		size := (i%7 + 1) * 37 << 10 // 37 KiB … 259 KiB, up and down
		d := bytes.Repeat([]byte{byte(i)}, size)
		d[0], d[len(d)-1] = 0xff, byte(size)
		want[int64(i)] = d
	}
	go func() {
		done := make(chan struct{})
		for w := range 3 {
			go func() {
				for i := w; i < n; i += 3 {
					a.Send(&Msg{T: TInput, ID: int64(i), Data: want[int64(i)], Screen: RawJSON(`{"s":"` + strings.Repeat("z", i*100) + `"}`)})
				}
				done <- struct{}{}
			}()
		}
		for range 3 {
			<-done
		}
	}()
	got := make([]*Msg, 0, n)
	for range n {
		m, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	for _, m := range got {
		if !bytes.Equal(m.Data, want[m.ID]) {
			t.Errorf("message %d: %d bytes, not the %d sent (changed after it was read?)", m.ID, len(m.Data), len(want[m.ID]))
		}
		if s := string(m.Screen); s != `{"s":"`+strings.Repeat("z", int(m.ID)*100)+`"}` {
			t.Errorf("message %d: screen changed after it was read: %.40q…", m.ID, s)
		}
	}
}

// BenchmarkRecvInput: 64 KiB inputs (attach's messages) over a real Unix
// socket, sent and read: what one costs the two ends of the channel.
func BenchmarkRecvInput(b *testing.B) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	fa, fb := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer fa.Close()
	defer fb.Close()
	a, c := NewConn(fa), NewConn(fb)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<10)
	b.SetBytes(int64(len(data)))
	go func() {
		for range b.N {
			if err := a.Send(&Msg{T: TInput, Data: data, TimeoutMS: 5000}); err != nil {
				return
			}
		}
	}()
	for range b.N {
		m, err := c.Recv()
		if err != nil || len(m.Data) != len(data) {
			b.Fatal(err)
		}
	}
}
