package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want float64
	}{{0, 1}, {10, 1}, {11, 2}, {50, 5}, {51, 6}, {99, 10}, {100, 10}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("no samples should be NaN")
	}
}

func TestSummarize(t *testing.T) {
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(200 - i) // descending: Summarize sorts a copy
	}
	s := Summarize(xs)
	if s.N != 200 || s.Min != 1 || s.P50 != 100 || s.P99 != 198 {
		t.Errorf("Summarize = %+v", *s)
	}
	if xs[0] != 200 {
		t.Error("Summarize modified its input")
	}
	if Summarize(nil) != nil {
		t.Error("Summarize(nil) should be nil")
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0.0123, "0.012"}, {1.234, "1.23"}, {12.34, "12.3"}, {123.4, "123"}, {math.NaN(), "n/a"}} {
		if got := FormatValue(c.v); got != c.want {
			t.Errorf("FormatValue(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	if got := FormatStats(&Stats{N: 3, Min: 1, P50: 2, P99: 3}, Millis); got != "1.00 / 2.00 / 3.00 ms" {
		t.Errorf("FormatStats = %q", got)
	}
	if got := FormatStats(One(250), JobsPerSec); got != "250 jobs/s" {
		t.Errorf("FormatStats(One) = %q", got)
	}
	if got := formatNear(1.5034, 1.5); got != "1.5034" {
		t.Errorf("formatNear(1.5034, 1.5) = %q", got)
	}
	if got := formatNear(1.6, 1.5); got != "1.60" {
		t.Errorf("formatNear(1.6, 1.5) = %q", got)
	}
	if got := FormatStats(nil, MBps); got != "—" {
		t.Errorf("FormatStats(nil) = %q", got)
	}
}

func TestVerdicts(t *testing.T) {
	st := func(p50 float64) *Stats { return &Stats{N: 2, Min: p50, P50: p50, P99: p50} }
	for _, c := range []struct {
		name    string
		row     Row
		verdict Verdict
		ratio   string
	}{
		{"latency ratio meets", Row{Unit: Millis, Runtime: st(4), Floor: st(2), Target: Target{RatioAtMost, 2}}, Meets, "2.00×"},
		{"latency ratio misses", Row{Unit: Millis, Runtime: st(4.2), Floor: st(2), Target: Target{RatioAtMost, 2}}, Misses, "2.10×"},
		{"rate ratio meets", Row{Unit: MBps, Runtime: st(800), Floor: st(1000), Target: Target{RatioAtLeast, 0.8}}, Meets, "0.800×"},
		{"rate ratio misses", Row{Unit: MBps, Runtime: st(500), Floor: st(1000), Target: Target{RatioAtLeast, 0.7}}, Misses, "0.500×"},
		{"difference meets", Row{Unit: Millis, Runtime: st(201.5), Floor: st(200), Target: Target{DiffAtMost, 2}}, Meets, "+1.50 ms"},
		{"difference negative", Row{Unit: Millis, Runtime: st(199), Floor: st(200), Target: Target{DiffAtMost, 2}}, Meets, "−1.00 ms"},
		{"difference misses", Row{Unit: Millis, Runtime: st(210), Floor: st(200), Target: Target{DiffAtMost, 2}}, Misses, "+10.0 ms"},
		{"value at most, floor informative", Row{Unit: Millis, Runtime: st(6), Floor: st(0.5), Target: Target{ValueAtMost, 5}}, Misses, "12.0×"},
		{"value at least, no floor", Row{Unit: JobsPerSec, Runtime: One(250), Target: Target{ValueAtLeast, 200}}, Meets, "—"},
		{"floor missing", Row{Unit: MBps, Runtime: st(100), FloorErr: "zstd not installed", Target: Target{RatioAtLeast, 1}}, NotMeasured, "—"},
		{"not measurable", Row{Unit: Millis, Err: "boom", Target: Target{ValueAtMost, 5}}, NotMeasured, "—"},
		{"hidden digit", Row{Unit: Millis, Runtime: st(4.0042), Floor: st(2), Target: Target{RatioAtMost, 2}}, Misses, "2.0021×"},
		{"zero floor", Row{Unit: Millis, Runtime: st(1), Floor: st(0), Target: Target{RatioAtMost, 2}}, NotMeasured, "—"},
	} {
		if got := c.row.Verdict(); got != c.verdict {
			t.Errorf("%s: verdict %v, want %v", c.name, got, c.verdict)
		}
		if got := c.row.CompareText(); got != c.ratio {
			t.Errorf("%s: ratio %q, want %q", c.name, got, c.ratio)
		}
	}
}

func TestTargetText(t *testing.T) {
	for _, c := range []struct {
		t    Target
		u    Unit
		want string
	}{
		{Target{RatioAtMost, 2}, Millis, "p50 ≤ 2.00 × floor"},
		{Target{RatioAtLeast, 0.8}, MBps, "≥ 0.800 × floor"},
		{Target{DiffAtMost, 2}, Millis, "p50 ≤ floor + 2.00 ms"},
		{Target{ValueAtMost, 20}, MiB, "p50 ≤ 20.0 MiB"},
		{Target{ValueAtLeast, 200}, JobsPerSec, "≥ 200 jobs/s"},
	} {
		if got := c.t.String(c.u); got != c.want {
			t.Errorf("%+v: %q, want %q", c.t, got, c.want)
		}
	}
}

func TestTableAndSummary(t *testing.T) {
	rows := []*Row{
		{Figure: "a", Unit: Millis, Runtime: &Stats{N: 2, Min: 1, P50: 2, P99: 3}, Floor: &Stats{N: 2, Min: 1, P50: 1.5, P99: 2}, Target: Target{RatioAtMost, 2}, Notes: []string{"a note"}},
		{Figure: "bb", Unit: MBps, Runtime: One(10), FloorErr: "zstd not installed", Target: Target{RatioAtLeast, 1}},
		{Figure: "c", Unit: JobsPerSec, Runtime: One(100), Target: Target{ValueAtLeast, 200}},
	}
	var b bytes.Buffer
	WriteTable(&b, rows)
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("want header, separator, 3 rows and 1 note:\n%s", out)
	}
	w := len([]rune(lines[0]))
	for _, l := range lines[:5] {
		if len([]rune(l)) != w || !strings.HasPrefix(l, "| ") || !strings.HasSuffix(l, " |") {
			t.Errorf("misaligned line %q", l)
		}
	}
	for _, want := range []string{"| meets ", "floor not measurable: zstd not installed", "| not measured |", "| MISSES ", "  a: a note"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	got := Summary(rows, true, "Test CPU", 2)
	if want := "bench: 1/3 targets met, 1 not measured (quick) on Test CPU, 2 cores"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got := Summary(rows[:1], false, "X", 1); got != "bench: 1/1 targets met (full) on X, 1 core" {
		t.Errorf("Summary = %q", got)
	}
}

func TestSpread(t *testing.T) {
	mk := func(rt, fl float64) *Row {
		return &Row{Figure: "run→done, pty", Unit: Millis, Runtime: One(rt), Floor: One(fl), Target: Target{RatioAtMost, 2}}
	}
	missing := &Row{Figure: "list 200 finished", Unit: Millis, Err: "boom", Target: Target{ValueAtMost, 5}}
	runs := [][]*Row{
		{mk(4, 2), missing},
		{mk(6, 2), {Figure: "list 200 finished", Unit: Millis, Runtime: One(1), Target: Target{ValueAtMost, 5}}},
		{mk(3, 2)},
	}
	sp := Spread(runs)
	if len(sp) != 2 || sp[0].Figure != "run→done, pty" || sp[1].Figure != "list 200 finished" {
		t.Fatalf("Spread figures = %+v", sp)
	}
	lo, hi, ok := Range(sp[0].Compare)
	if !ok || lo != 1.5 || hi != 3 {
		t.Errorf("ratio range = %v–%v (%v), want 1.5–3", lo, hi, ok)
	}
	if *sp[0].P50[1] != 6 {
		t.Errorf("run 2's p50 = %v, want 6", *sp[0].P50[1])
	}
	if sp[0].MetAll() {
		t.Error("run 2 missed (3×), MetAll should be false")
	}
	want := []Verdict{Meets, Misses, Meets}
	for k, v := range want {
		if sp[0].Verdicts[k] != v {
			t.Errorf("run %d verdict %v, want %v", k+1, sp[0].Verdicts[k], v)
		}
	}
	// A figure absent from a run (run 3) or not measured (run 1) has no value there.
	if sp[1].P50[0] != nil || sp[1].P50[2] != nil || sp[1].P50[1] == nil || sp[1].MetAll() {
		t.Errorf("list spread = %+v", sp[1])
	}
	var b bytes.Buffer
	WriteSpread(&b, sp)
	out := b.String()
	for _, s := range []string{"4.00 / 6.00 / 3.00 ms", "2.00 / 3.00 / 1.50", "1.50 – 3.00×", "meets / MISSES / meets", "— / 1.00 / — ms"} {
		if !strings.Contains(out, s) {
			t.Errorf("spread table lacks %q:\n%s", s, out)
		}
	}
	if got := SpreadSummary(sp, 3, false, "CPU", 2); got != "bench: 0/2 targets met in all 3 runs (full) on CPU, 2 cores" {
		t.Errorf("SpreadSummary = %q", got)
	}
}

func TestSpreadDiffRange(t *testing.T) {
	r := func(rt float64) *Row {
		return &Row{Figure: "exit seen, pty", Unit: Millis, Runtime: One(rt), Floor: One(200), Target: Target{DiffAtMost, 2}}
	}
	sp := Spread([][]*Row{{r(201.5)}, {r(203)}})
	var b bytes.Buffer
	WriteSpread(&b, sp)
	if !strings.Contains(b.String(), "+1.50 – +3.00 ms") || !strings.Contains(b.String(), "meets / MISSES") {
		t.Errorf("difference spread:\n%s", b.String())
	}
}

func TestLastStamp(t *testing.T) {
	out := "T1700000000.000001\r\nx> \r\nT1700000001.250000\r\nx> "
	ts, err := lastStamp(out)
	if err != nil || !ts.Equal(time.Unix(1700000001, 250000000)) {
		t.Errorf("lastStamp = %v, %v; want the second stamp", ts, err)
	}
	if _, err := lastStamp("x> \r\nTea\r\n"); err == nil {
		t.Error("no timestamp line: want an error")
	}
	if _, err := parseEpoch("1700000000,000001"); err == nil {
		t.Error("a comma decimal point: want an error")
	}
}

// A figure with no target (CPU per job) shows its ratio and "reported",
// and counts in neither side of the summaries.
func TestReportedFigureIsNotCounted(t *testing.T) {
	rep := &Row{Figure: "CPU per job, server + runner", Unit: Millis, Runtime: One(6), Floor: One(2), Target: Target{Reported, 0}}
	met := &Row{Figure: "a", Unit: Millis, Runtime: One(1), Floor: One(1), Target: Target{RatioAtMost, 2}}
	if v := rep.Verdict(); v != NoTarget || v.String() != "reported" {
		t.Errorf("verdict %v, want reported", v)
	}
	if c := rep.CompareText(); c != "3.00×" {
		t.Errorf("ratio %q, want 3.00×", c)
	}
	if got := Summary([]*Row{met, rep}, false, "X", 2); got != "bench: 1/1 targets met (full) on X, 2 cores" {
		t.Errorf("Summary = %q", got)
	}
	sp := Spread([][]*Row{{met, rep}, {met, rep}})
	if got := SpreadSummary(sp, 2, false, "X", 2); got != "bench: 1/1 targets met in all 2 runs (full) on X, 2 cores" {
		t.Errorf("SpreadSummary = %q", got)
	}
	var b bytes.Buffer
	WriteTable(&b, []*Row{rep})
	if !strings.Contains(b.String(), "reported (the figure to cut)") || !strings.Contains(b.String(), "| reported ") {
		t.Errorf("table:\n%s", b.String())
	}
}
