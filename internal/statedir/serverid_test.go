package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ServerID makes a random id of 16 hex digits on first use, keeps it in
// the state dir and gives the same one after; another state dir gets
// another id.
func TestServerIDMadeOnceAndKept(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	id, err := ServerID(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 2*serverIDBytes || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("server id %q: want %d hex digits", id, 2*serverIDBytes)
	}
	again, err := ServerID(a)
	if err != nil || again != id {
		t.Fatalf("second ServerID: %q, %v; want the kept %q", again, err, id)
	}
	if read, err := ReadServerID(a); err != nil || read != id {
		t.Fatalf("ReadServerID: %q, %v; want %q", read, err, id)
	}
	kept, err := os.ReadFile(filepath.Join(a, ServerIDFile))
	if err != nil || strings.TrimSpace(string(kept)) != id {
		t.Fatalf("%s holds %q (%v), want %q", ServerIDFile, kept, err, id)
	}
	other, err := ServerID(b)
	if err != nil {
		t.Fatal(err)
	}
	if other == id {
		t.Fatalf("two state dirs got the same server id %q", id)
	}
}
