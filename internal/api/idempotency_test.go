package api

import (
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
