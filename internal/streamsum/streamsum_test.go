package streamsum

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
)

// Both writers count and hash exactly what went through, in order; the
// async one copies each write, so a caller reusing its buffer (as bufio
// does) changes nothing of the sum.
func TestCountAndHash(t *testing.T) {
	for _, async := range []bool{false, true} {
		var out bytes.Buffer
		w := New(&out)
		if async {
			w = NewAsync(&out)
		}
		buf := make([]byte, 4096)
		for i := range 100 {
			for j := range buf {
				buf[j] = byte(i + j)
			}
			if _, err := w.Write(buf[:i*37]); err != nil {
				t.Fatal(err)
			}
		}
		want := sha256.Sum256(out.Bytes())
		if got := w.Sum(); got != hex.EncodeToString(want[:]) || w.Len() != int64(out.Len()) {
			t.Errorf("async=%v: sum %s, len %d; want %x, %d", async, got, w.Len(), want, out.Len())
		}
		w.Close()
		w.Close() // twice is fine
	}
}

func TestDeclare(t *testing.T) {
	h := http.Header{}
	Declare(h, "X-A-Status", "X-A-Bytes", "X-A-Sha256")
	if got := h.Get("Trailer"); got != "X-A-Status, X-A-Bytes, X-A-Sha256" {
		t.Errorf("Trailer: %q", got)
	}
}
