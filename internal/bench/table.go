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
	}
	return "?"
}

// Verdict is the outcome of a figure.
type Verdict int

const (
	NotMeasured Verdict = iota
	Meets
	Misses
)

func (v Verdict) String() string {
	switch v {
	case Meets:
		return "meets"
	case Misses:
		return "MISSES"
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
	width := make([]int, len(header))
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
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, c := range all[1:] {
		line(c)
	}
	for _, r := range rows {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s: %s\n", r.Figure, n)
		}
	}
}

// Summary is the final one-line summary.
func Summary(rows []*Row, quick bool, cpu string, cores int) string {
	met, notMeasured := 0, 0
	for _, r := range rows {
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
	return fmt.Sprintf("bench: %d/%d targets met%s (%s) on %s, %d core%s", met, len(rows), extra, mode, cpu, cores, plural)
}
