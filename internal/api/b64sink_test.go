package api

import (
	"bytes"
	"encoding/base64"
	"math/rand"
	"testing"
)

// b64Sink takes what base64.StdEncoding.DecodeString takes, and gives the
// same bytes, whatever pieces the text comes in; it refuses what that
// refuses.
func TestB64SinkIsStdEncoding(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	enc := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return []byte(base64.StdEncoding.EncodeToString(b))
	}
	// Texts: valid ones of every length mod 3, with line ends put in,
	// and ones made wrong in each way a text can be.
	var texts [][]byte
	for n := 0; n < 40; n++ {
		texts = append(texts, enc(n), enc(n*97))
	}
	texts = append(texts, []byte(""), []byte("\r\n"), []byte("="), []byte("QQ"), []byte("QQ="), []byte("QQ=="),
		[]byte("QQ==QQ=="), []byte("QQ==\nQQ=="), []byte("QQ==\n"), []byte("QUJD"), []byte("QUJ"), []byte("Q=Q="),
		[]byte("QQ=\n="), []byte("QU JD"), []byte("QUJD!"), []byte("-_-_"), []byte("QQ==A"))
	for i := 0; i < 300; i++ {
		b := enc(rng.Intn(3000))
		switch rng.Intn(6) {
		case 0: // line ends anywhere
			for k := rng.Intn(10); k > 0; k-- {
				at := rng.Intn(len(b) + 1)
				b = append(b[:at], append([]byte([]string{"\n", "\r\n", "\r"}[rng.Intn(3)]), b[at:]...)...)
			}
		case 1: // a character that is not base64
			if len(b) > 0 {
				b[rng.Intn(len(b))] = "!*- .\x00"[rng.Intn(6)]
			}
		case 2: // cut short
			if len(b) > 0 {
				b = b[:rng.Intn(len(b))]
			}
		case 3: // two texts run together (padding in the middle)
			b = append(b, enc(rng.Intn(50))...)
		case 4: // something after the end
			b = append(b, "QUJD="[rng.Intn(5)])
		}
		texts = append(texts, b)
	}
	for i, text := range texts {
		want, wantErr := base64.StdEncoding.DecodeString(string(text))
		for split := 0; split < 4; split++ {
			s := &b64Sink{hint: int64(len(text))}
			if split == 3 {
				// A field given twice: the first one's bytes are dropped.
				s.Write([]byte("QUJD===="))
				s.Reset()
			}
			for p := text; len(p) > 0; {
				k := len(p)
				if split > 0 {
					k = 1 + rng.Intn(min(len(p), []int{0, 3, 17, 4096}[split%4]+1))
					k = min(k, len(p))
				}
				if n, err := s.Write(p[:k]); n != k || err != nil {
					t.Fatalf("text %d: Write = %d, %v", i, n, err)
				}
				p = p[k:]
			}
			got, err := s.Bytes()
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("text %d %q (split %d): error %v, DecodeString's %v", i, trim(text), split, err, wantErr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("text %d %q (split %d): %d bytes, want %d", i, trim(text), split, len(got), len(want))
			}
		}
	}
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// The sink holds the decoded bytes, never the text: what it holds is made
// once, for three quarters of the body.
func TestB64SinkHoldsOnlyTheBytes(t *testing.T) {
	raw := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), 1<<16)
	text := []byte(base64.StdEncoding.EncodeToString(raw))
	s := &b64Sink{hint: int64(len(text)) + 100}
	for p := text; len(p) > 0; {
		k := min(len(p), 4093)
		s.Write(p[:k])
		p = p[k:]
	}
	got, err := s.Bytes()
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("decoded %d bytes, %v", len(got), err)
	}
	if c := cap(s.out); c > (len(text)+100)/4*3+3 {
		t.Fatalf("the sink holds %d bytes for %d decoded (text %d)", c, len(raw), len(text))
	}
}
