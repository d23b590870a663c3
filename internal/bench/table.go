// Package bench measures shellctl against the machine's floor, figure by
// figure of the performance spec, and prints one table. The pure
// parts (percentiles, ratios, verdicts, the table) live in this file; the
// measurements in the other files of the package.
package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Stats summarizes the samples of one side of a figure.
type Stats struct {
	N             int
	Min, P50, P99 float64
}

// Percentile returns the p-th percentile (0..100) of sorted samples by the
// nearest-rank method: the smallest sample with at least p % of the
// samples at or below it. It returns NaN for no samples.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if p <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

// Summarize computes min, p50 and p99 of xs (xs is not modified). It
// returns nil for no samples.
func Summarize(xs []float64) *Stats {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return &Stats{N: len(s), Min: s[0], P50: Percentile(s, 50), P99: Percentile(s, 99)}
}

// One is the Stats of a single measured value.
func One(v float64) *Stats { return &Stats{N: 1, Min: v, P50: v, P99: v} }

// Unit is how a figure's values are expressed.
type Unit int

const (
	Millis     Unit = iota // milliseconds
	MBps                   // 10^6 bytes per second
	JobsPerSec             // jobs per second
	MiB                    // 2^20 bytes
)

func (u Unit) String() string {
	switch u {
	case Millis:
		return "ms"
	case MBps:
		return "MB/s"
	case JobsPerSec:
		return "jobs/s"
	case MiB:
		return "MiB"
	}
	return "?"
}

// FormatValue prints v with 3 significant digits at least (no exponent).
func FormatValue(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "n/a"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// formatNear prints v like FormatValue, with more digits when it would
// otherwise print the same as limit while differing from it, so that a
// verdict is never decided by a digit the table hides.
func formatNear(v, limit float64) string {
	out := FormatValue(v)
	for prec := 4; out == FormatValue(limit) && v != limit && prec <= 8; prec++ {
		out = strconv.FormatFloat(v, 'f', prec, 64)
	}
	return out
}

// FormatStats prints "min / p50 / p99 unit", or one value when there is a
// single sample, or "—" for nil.
func FormatStats(s *Stats, u Unit) string {
	if s == nil {
		return "—"
	}
	if s.N == 1 {
		return FormatValue(s.P50) + " " + u.String()
	}
	return FormatValue(s.Min) + " / " + FormatValue(s.P50) + " / " + FormatValue(s.P99) + " " + u.String()
}

// Kind is how a figure is judged.
type Kind int

const (
	RatioAtMost  Kind = iota // runtime p50 / floor p50 ≤ Limit (times)
	RatioAtLeast             // runtime p50 / floor p50 ≥ Limit (rates)
	DiffAtMost               // runtime p50 − floor p50 ≤ Limit (same unit)
	ValueAtMost              // runtime p50 ≤ Limit; a floor, if any, is informative
	ValueAtLeast             // runtime p50 ≥ Limit; a floor, if any, is informative
	Reported                 // no target: the figure and its ratio are shown, never judged
)

// Target is what a figure must reach.
type Target struct {
	Kind  Kind
	Limit float64
}

// String prints the target as in performance.md.
func (t Target) String(u Unit) string {
	switch t.Kind {
	case RatioAtMost:
		return "p50 ≤ " + FormatValue(t.Limit) + " × floor"
	case RatioAtLeast:
		return "≥ " + FormatValue(t.Limit) + " × floor"
	case DiffAtMost:
		return "p50 ≤ floor + " + FormatValue(t.Limit) + " " + u.String()
	case ValueAtMost:
		return "p50 ≤ " + FormatValue(t.Limit) + " " + u.String()
	case ValueAtLeast:
		return "≥ " + FormatValue(t.Limit) + " " + u.String()
	case Reported:
		return "reported (the figure to cut)"
	}
	return "?"
}

// Verdict is the outcome of a figure.
type Verdict int

const (
	NotMeasured Verdict = iota
	Meets
	Misses
	NoTarget // a Reported figure, measured
)

func (v Verdict) String() string {
	switch v {
	case Meets:
		return "meets"
	case Misses:
		return "MISSES"
	case NoTarget:
		return "reported"
	}
	return "not measured"
}

// Row is one figure of the table.
type Row struct {
	Figure  string
	Unit    Unit
	Runtime *Stats
	Floor   *Stats
	Target  Target
	// Err says why the figure could not be measured at all; FloorErr why
	// only its floor could not. Notes are printed under the table.
	Err      string
	FloorErr string
	Notes    []string
}

// Compare returns the comparison of runtime to floor shown in the ratio
// column: the ratio of the p50s, or for DiffAtMost their difference. ok is
// false when a side is missing or the ratio is undefined.
func (r *Row) Compare() (float64, bool) {
	if r.Runtime == nil || r.Floor == nil || r.Err != "" {
		return 0, false
	}
	if r.Target.Kind == DiffAtMost {
		return r.Runtime.P50 - r.Floor.P50, true
	}
	if r.Floor.P50 == 0 || math.IsNaN(r.Floor.P50) || math.IsNaN(r.Runtime.P50) {
		return 0, false
	}
	return r.Runtime.P50 / r.Floor.P50, true
}

// CompareText is the ratio column.
func (r *Row) CompareText() string {
	c, ok := r.Compare()
	if !ok {
		return "—"
	}
	if r.Target.Kind == DiffAtMost {
		sign := "+"
		if c < 0 {
			sign = "−"
		}
		return sign + formatNear(math.Abs(c), r.Target.Limit) + " " + r.Unit.String()
	}
	return formatNear(c, r.Target.Limit) + "×"
}

// Verdict judges the row against its target.
func (r *Row) Verdict() Verdict {
	if r.Err != "" || r.Runtime == nil || math.IsNaN(r.Runtime.P50) {
		return NotMeasured
	}
	var ok bool
	switch r.Target.Kind {
	case Reported:
		return NoTarget
	case RatioAtMost, RatioAtLeast, DiffAtMost:
		c, have := r.Compare()
		if !have {
			return NotMeasured
		}
		switch r.Target.Kind {
		case RatioAtMost, DiffAtMost:
			ok = c <= r.Target.Limit
		default:
			ok = c >= r.Target.Limit
		}
	case ValueAtMost:
		ok = r.Runtime.P50 <= r.Target.Limit
	case ValueAtLeast:
		ok = r.Runtime.P50 >= r.Target.Limit
	}
	if ok {
		return Meets
	}
	return Misses
}

// cells returns the printed cells of r in table order.
func (r *Row) cells() []string {
	rt := FormatStats(r.Runtime, r.Unit)
	if r.Runtime != nil && r.Runtime.N == 1 && (r.Target.Kind == ValueAtMost || r.Target.Kind == ValueAtLeast) {
		rt = formatNear(r.Runtime.P50, r.Target.Limit) + " " + r.Unit.String()
	}
	fl := FormatStats(r.Floor, r.Unit)
	if r.Err != "" {
		rt = "not measurable: " + r.Err
		fl = "—"
	} else if r.Floor == nil && r.FloorErr != "" {
		fl = "floor not measurable: " + r.FloorErr
	}
	return []string{r.Figure, rt, fl, r.CompareText(), r.Target.String(r.Unit), r.Verdict().String()}
}

// header of the table.
var header = []string{"figure", "runtime min / p50 / p99", "floor min / p50 / p99", "ratio", "target", "verdict"}

// WriteTable prints rows as one Markdown-compatible table, then the notes
// of the rows, one per line.
func WriteTable(w io.Writer, rows []*Row) {
	all := [][]string{header}
	for _, r := range rows {
		all = append(all, r.cells())
	}
	writeGrid(w, all)
	for _, r := range rows {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s: %s\n", r.Figure, n)
		}
	}
}

// writeGrid prints rows of cells as a Markdown-compatible table whose
// first row is the header.
func writeGrid(w io.Writer, all [][]string) {
	width := make([]int, len(all[0]))
	for _, c := range all {
		for i, s := range c {
			if n := len([]rune(s)); n > width[i] {
				width[i] = n
			}
		}
	}
	line := func(c []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, s := range c {
			b.WriteString(" ")
			b.WriteString(s)
			b.WriteString(strings.Repeat(" ", width[i]-len([]rune(s))))
			b.WriteString(" |")
		}
		fmt.Fprintln(w, b.String())
	}
	line(all[0])
	sep := make([]string, len(all[0]))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, c := range all[1:] {
		line(c)
	}
}

// Summary is the final one-line summary.
func Summary(rows []*Row, quick bool, cpu string, cores int) string {
	met, notMeasured, targets := 0, 0, 0
	for _, r := range rows {
		if r.Target.Kind == Reported {
			continue // a figure without a target is not counted
		}
		targets++
		switch r.Verdict() {
		case Meets:
			met++
		case NotMeasured:
			notMeasured++
		}
	}
	mode := "full"
	if quick {
		mode = "quick"
	}
	extra := ""
	if notMeasured > 0 {
		extra = fmt.Sprintf(", %d not measured", notMeasured)
	}
	plural := "s"
	if cores == 1 {
		plural = ""
	}
	return fmt.Sprintf("bench: %d/%d targets met%s (%s) on %s, %d core%s", met, targets, extra, mode, cpu, cores, plural)
}

// SpreadRow is one figure across the runs of one invocation: its runtime
// p50 and its comparison (ratio or difference) in each run, nil where a
// run has no such figure or could not compare it.
type SpreadRow struct {
	Figure   string
	Unit     Unit
	Target   Target
	P50      []*float64 // runtime p50 per run
	Compare  []*float64 // ratio (or difference) per run
	Verdicts []Verdict
}

// Spread lines up the figures of several runs (matched by name, in the
// order they first appear).
func Spread(runs [][]*Row) []*SpreadRow {
	var out []*SpreadRow
	idx := map[string]*SpreadRow{}
	for k, rows := range runs {
		for _, r := range rows {
			s := idx[r.Figure]
			if s == nil {
				s = &SpreadRow{Figure: r.Figure, Unit: r.Unit, Target: r.Target,
					P50: make([]*float64, len(runs)), Compare: make([]*float64, len(runs)), Verdicts: make([]Verdict, len(runs))}
				idx[r.Figure] = s
				out = append(out, s)
			}
			if r.Err == "" && r.Runtime != nil && !math.IsNaN(r.Runtime.P50) {
				v := r.Runtime.P50
				s.P50[k] = &v
			}
			if c, ok := r.Compare(); ok {
				s.Compare[k] = &c
			}
			s.Verdicts[k] = r.Verdict()
		}
	}
	return out
}

// Range returns the smallest and largest of the values present.
func Range(xs []*float64) (lo, hi float64, ok bool) {
	for _, x := range xs {
		if x == nil {
			continue
		}
		if !ok || *x < lo {
			lo = *x
		}
		if !ok || *x > hi {
			hi = *x
		}
		ok = true
	}
	return lo, hi, ok
}

// MetAll reports whether the figure met its target in every run.
func (s *SpreadRow) MetAll() bool {
	for _, v := range s.Verdicts {
		if v != Meets {
			return false
		}
	}
	return len(s.Verdicts) > 0
}

func (s *SpreadRow) compareText(c float64) string {
	if s.Target.Kind == DiffAtMost {
		sign := "+"
		if c < 0 {
			sign = "−"
		}
		return sign + formatNear(math.Abs(c), s.Target.Limit)
	}
	return formatNear(c, s.Target.Limit)
}

// cells of a spread row: figure, p50 per run, ratio per run, ratio range,
// target, verdicts per run.
func (s *SpreadRow) cells() []string {
	var p50, cmp, ver []string
	for k := range s.P50 {
		if s.P50[k] == nil {
			p50 = append(p50, "—")
		} else {
			p50 = append(p50, FormatValue(*s.P50[k]))
		}
		if s.Compare[k] == nil {
			cmp = append(cmp, "—")
		} else {
			cmp = append(cmp, s.compareText(*s.Compare[k]))
		}
		ver = append(ver, s.Verdicts[k].String())
	}
	rng := "—"
	if lo, hi, ok := Range(s.Compare); ok {
		suffix := "×"
		if s.Target.Kind == DiffAtMost {
			suffix = " " + s.Unit.String()
		}
		rng = s.compareText(lo) + " – " + s.compareText(hi) + suffix
	}
	return []string{s.Figure, strings.Join(p50, " / ") + " " + s.Unit.String(), strings.Join(cmp, " / "), rng,
		s.Target.String(s.Unit), strings.Join(ver, " / ")}
}

var spreadHeader = []string{"figure", "runtime p50, run 1 / 2 / …", "ratio, run 1 / 2 / …", "ratio range", "target", "verdict per run"}

// WriteSpread prints the figures of several runs side by side.
func WriteSpread(w io.Writer, spread []*SpreadRow) {
	all := [][]string{spreadHeader}
	for _, s := range spread {
		all = append(all, s.cells())
	}
	writeGrid(w, all)
}

// SpreadSummary is the final line of a multi-run invocation.
func SpreadSummary(spread []*SpreadRow, runs int, quick bool, cpu string, cores int) string {
	met, targets := 0, 0
	for _, s := range spread {
		if s.Target.Kind == Reported {
			continue
		}
		targets++
		if s.MetAll() {
			met++
		}
	}
	mode := "full"
	if quick {
		mode = "quick"
	}
	return fmt.Sprintf("bench: %d/%d targets met in all %d runs (%s) on %s, %d cores", met, targets, runs, mode, cpu, cores)
}
