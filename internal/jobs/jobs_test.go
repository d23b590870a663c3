package jobs

import (
	"errors"
	"testing"
)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"0123456789abcdef":  true,
		NewID():             true,
		"0123456789ABCDEF":  false,
		"0123456789abcde":   false,
		"0123456789abcdef0": false,
		"0123456789abcdeg":  false,
		"../../etc/passwd":  false,
		"":                  false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
	if a, b := NewID(), NewID(); a == b {
		t.Errorf("two ids alike: %s", a)
	}
}

func TestErrorKindsWrapAndSayWhat(t *testing.T) {
	err := errorf(ErrInvalidOffset, "offset %d is past the end of the output (%d bytes)", 10, 3)
	if !errors.Is(err, ErrInvalidOffset) || errors.Is(err, ErrNotFound) {
		t.Fatalf("kind lost: %v", err)
	}
	if err.Error() != "offset 10 is past the end of the output (3 bytes)" {
		t.Fatalf("message %q", err)
	}
}
