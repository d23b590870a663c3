package jsonstr

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// Append writes what encoding/json writes for a string, byte for byte.
func TestAppendIsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a&b>", "\x00\x01\x1f\x7f", "tab\tnl\ncr\rbs\bff\f",
		"é 日本 😀", "\u2028\u2029", "\xff\xfe bad", "\xe6\x97", "a\xc0\x80z"} {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s want %s", s, got, want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		want, _ := json.Marshal(string(b))
		if got := Append([]byte("x"), string(b)); string(got[1:]) != string(want) {
			t.Fatalf("%q: got %s want %s", b, got[1:], want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	f.Add("<x>\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}

// Bytes decodes a []byte as encoding/json does: the base64 strings it
// writes (read where they lie), and the other forms of the same string
// (escapes), null, and what is not base64 (refused).
func TestBytesIsEncodingJSON(t *testing.T) {
	inputs := []string{`""`, `null`, `"AA=="`, `"\u0041A=="`, `"QUJD\/w=="`, `"QUJD"`, `"QUJ"`, `"QU=D"`, `"QUJD`, `"QUJD\n"`, `"Q\nUJD"`, ` "QUJD"`, `"QU JD"`, "\"QU\nJD\"", "\"QU\rJD\"", "\"QU\tJD\"", "\"QUJD\xff\""}
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		enc, _ := json.Marshal(b)
		inputs = append(inputs, string(enc))
	}
	for _, in := range inputs {
		var want []byte
		werr := json.Unmarshal([]byte(in), &want)
		got, ok := NewReader([]byte(in)).Bytes()
		if ok != (werr == nil) || ok && (string(got) != string(want) || (got == nil) != (want == nil)) {
			t.Errorf("%s: got %q (ok %v), encoding/json %q (%v)", in, got, ok, want, werr)
		}
	}
}
