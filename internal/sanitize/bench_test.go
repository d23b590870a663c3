package sanitize

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// lines100 returns about size bytes of 100-byte lines (99 characters and a
// line end; crlf as a pty with ONLCR would deliver them).
func lines100(size int, crlf bool) []byte {
	line := make([]byte, 0, 101)
	for i := 0; i < 99; i++ {
		line = append(line, byte('!'+i%90))
	}
	if crlf {
		line = append(line, '\r')
	}
	line = append(line, '\n')
	return bytes.Repeat(line, size/100)
}

func benchSanitize(b *testing.B, data []byte, chunk int) {
	s := New(io.Discard)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for p := data; len(p) > 0; {
			k := min(chunk, len(p))
			s.Write(p[:k])
			p = p[k:]
		}
	}
}

// BenchmarkSanitize100ByteLines feeds 100-byte lines in 4 KiB reads, the
// size a pty master typically returns.
func BenchmarkSanitize100ByteLines(b *testing.B) {
	benchSanitize(b, lines100(1<<20, false), 4096)
}

func BenchmarkSanitize100ByteLinesCRLF(b *testing.B) {
	benchSanitize(b, lines100(1<<20, true), 4096)
}

func BenchmarkSanitizeColoredUTF8(b *testing.B) {
	line := []byte("\x1b[32m ok \x1b[0m h\u00e9llo w\u00f6rld \u4e16\u754c \u2014 some text here\r\n")
	benchSanitize(b, bytes.Repeat(line, (1<<20)/len(line)), 4096)
}

// ptyBytes is what the pty benchmarks push through a real pty per op.
const ptyBytes = 64 << 20

// benchPTY writes ptyBytes of 100-byte lines into a pty's slave side and
// reads them from the master with read, until EIO after the slave closed.
func benchPTY(b *testing.B, read func(master *os.File) error) {
	data := lines100(ptyBytes, false)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		master, slave, err := pty.Open()
		if err != nil {
			b.Skipf("no pty: %v", err)
		}
		werr := make(chan error, 1)
		go func() {
			_, err := slave.Write(data)
			slave.Close()
			werr <- err
		}()
		if err := read(master); err != nil {
			b.Fatal(err)
		}
		master.Close()
		if err := <-werr; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPTYBare is the floor: 64 MiB of 100-byte lines read from a bare pty.
func BenchmarkPTYBare(b *testing.B) {
	benchPTY(b, func(master *os.File) error {
		buf := make([]byte, readSize)
		for {
			_, err := master.Read(buf)
			if err != nil {
				if err == io.EOF || errors.Is(err, syscall.EIO) {
					return nil
				}
				return err
			}
		}
	})
}

// BenchmarkPTYSanitized is the same through Pump; the target is ≥ 0.7× the
// floor's MB/s.
func BenchmarkPTYSanitized(b *testing.B) {
	benchPTY(b, func(master *os.File) error {
		return Pump(master, io.Discard, DefaultIdle, nil)
	})
}

// TestPumpRealPTY runs Pump on a real pty master: ONLCR line ends, a prompt
// flushed while the terminal stays open, and EIO after the slave closed.
func TestPumpRealPTY(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- Pump(master, &out, 20*time.Millisecond, nil) }()
	slave.Write([]byte("\x1b[31mhello\x1b[0m\nPassword: "))
	waitFor(t, &out, "hello\nPassword: ")
	slave.Write([]byte("\nbye\n"))
	slave.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Pump = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pump did not end after the slave closed")
	}
	if got, want := out.String(), "hello\nPassword: \nbye\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
