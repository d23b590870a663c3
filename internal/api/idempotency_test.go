package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestIdempotencyKeyRule(t *testing.T) {
	for _, ok := range [][]string{{"a"}, {strings.Repeat("k", 255)}, {"550e8400-e29b-41d4-a716-446655440000"}, {"!~{}"}} {
		if err := checkIdempotencyKey(ok); err != nil {
			t.Errorf("key %q refused: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{""}, {strings.Repeat("k", 256)}, {"a b"}, {"tab\t"}, {"é"}, {"a", "b"}, {"nul\x00"}} {
		err := checkIdempotencyKey(bad)
		if err == nil {
			t.Errorf("key %q taken", bad)
			continue
		}
		if !strings.Contains(err.Error(), "Idempotency-Key") {
			t.Errorf("error %q does not name the header", err)
		}
	}
}

// The script's hash is of the bytes the job gets: a field given twice
// (the last wins) starts the hash over with the sink.
func TestHashSinkFollowsItsSink(t *testing.T) {
	mem := &memSink{}
	h := newHashSink(mem)
	h.Write([]byte("first"))
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	h.Write([]byte("sec"))
	h.Write([]byte("ond"))
	want := sha256.Sum256([]byte("second"))
	if string(mem.b) != "second" || h.sum() != hex.EncodeToString(want[:]) {
		t.Fatalf("sink %q, hash %s; want %q and %x", mem.b, h.sum(), "second", want)
	}
}
