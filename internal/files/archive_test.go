package files

import "testing"

// The warnings of an archive are bounded: at most maxWarnings listed,
// each with its kind's count, and one summary per kind with more.
func TestArchiveWarningsAreBounded(t *testing.T) {
	a := &archiver{warnings: newWarnings()}
	for range 250 {
		a.warn("changed", "some/file")
	}
	for range 3 {
		a.warn("nfc_duplicate", "x | y")
	}
	got := a.warnings.List()
	if len(got) != maxWarnings+2 {
		t.Fatalf("%d entries, want %d listed and a summary of each kind", len(got), maxWarnings)
	}
	for _, w := range got[:maxWarnings] {
		if w.Kind != "changed" || w.Count != 250 || w.Path != "some/file" {
			t.Fatalf("listed entry %+v, want changed with count 250", w)
		}
	}
	if s := got[maxWarnings]; s.Kind != "changed_more" || s.Count != 150 {
		t.Errorf("summary %+v, want changed_more with 150", s)
	}
	// A kind first seen after the list is full is still counted.
	for _, w := range got {
		if w.Kind == "nfc_duplicate_more" && w.Count == 3 {
			return
		}
	}
	t.Errorf("nfc_duplicate's 3 warnings are not summarised: %+v", got[maxWarnings:])
}
