package statedir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemovedTellsADeletedDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "job"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "job"))
	if err != nil {
		t.Fatal(err)
	}
	d := FromFD(int(f.Fd()), filepath.Join(root, "job"))
	if d.Removed() {
		t.Fatal("a directory still there is reported removed")
	}
	if err := os.Remove(filepath.Join(root, "job")); err != nil {
		t.Fatal(err)
	}
	if !d.Removed() {
		t.Fatal("a deleted directory is not reported removed")
	}
	f.Close()
}

// Neither a state dir inside a path jobs write nor such a path inside the
// state dir is accepted.
func TestCheckOutside(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(base, "home"), true},
		{base, false},                              // contains it
		{state, false},                             // is it
		{filepath.Join(state, "jobs"), false},      // inside it
		{filepath.Join(base, "state-other"), true}, // a sibling sharing a prefix
	} {
		err := CheckOutside(state, map[string]string{tc.path: "test path"})
		if (err == nil) != tc.ok {
			t.Errorf("CheckOutside(%s, %s) = %v, want ok %v", state, tc.path, err, tc.ok)
		}
	}
}
