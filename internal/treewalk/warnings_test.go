package treewalk

import (
	"strings"
	"testing"
)

// The first Max warnings are kept one by one, each with its kind's count;
// the rest are only counted, summarised once per kind; the first path of
// each kind is kept, shortened, even past Max.
func TestWarningsBounded(t *testing.T) {
	ws := &Warnings{Max: 3, Shorten: func(p string) string {
		if len(p) > 8 {
			return p[:8] + "…"
		}
		return p
	}}
	for range 10 {
		ws.Add("changed", "some/long/path")
	}
	ws.Add("too_deep", "d/d/d/d/d/d")
	ws.Add("too_deep", "d/d/d/d/d/e")

	got := ws.List()
	if len(got) != 3+2 {
		t.Fatalf("%d entries, want 3 listed and 2 summaries: %+v", len(got), got)
	}
	for _, w := range got[:3] {
		if w.Kind != "changed" || w.Count != 10 || w.Path != "some/lon…" {
			t.Errorf("listed %+v, want changed, 10, shortened", w)
		}
	}
	if got[3] != (Warning{Kind: "changed_more", Count: 7}) || got[4] != (Warning{Kind: "too_deep_more", Count: 2}) {
		t.Errorf("summaries %+v", got[3:])
	}
	if ws.Count("too_deep") != 2 || ws.First("too_deep") != "d/d/d/d/…" || ws.Total() != 12 {
		t.Errorf("count %d, first %q, total %d", ws.Count("too_deep"), ws.First("too_deep"), ws.Total())
	}
	if len(ws.list) > ws.Max || strings.Contains(ws.First("changed"), "path") {
		t.Errorf("kept %d, first %q", len(ws.list), ws.First("changed"))
	}
}

// A nil *Warnings drops everything and lists nothing (an empty list, not
// null, in JSON).
func TestWarningsNil(t *testing.T) {
	var ws *Warnings
	ws.Add("x", "y")
	if ws.Count("x") != 0 || ws.First("x") != "" || ws.Total() != 0 || ws.List() == nil || len(ws.List()) != 0 {
		t.Errorf("nil Warnings: %d %q %d %v", ws.Count("x"), ws.First("x"), ws.Total(), ws.List())
	}
	if got := (&Warnings{}).List(); got == nil || len(got) != 0 {
		t.Errorf("empty Warnings lists %v", got)
	}
}
