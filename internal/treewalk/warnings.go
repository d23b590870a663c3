package treewalk

// Warning kinds the walker itself reports.
const (
	// KindTooDeep: an entry more than MaxDepth levels below the top, left
	// out (not visited, not opened).
	KindTooDeep = "too_deep"
	// KindBudget: the entries-visited budget is spent; the path is the
	// first entry not read. Reported once.
	KindBudget = "max_entries_visited"
)

// Warning is one thing a walk left out or found odd: its kind, the path
// (relative to the top) and, in List, how many warnings of that kind there
// were in all.
type Warning struct {
	Kind  string `json:"kind"`
	Path  string `json:"path,omitempty"`
	Count int    `json:"count"`
}

// Warnings collects a walk's warnings within bounds: the first Max are
// kept one by one, the rest only counted by kind, so a tree of millions of
// odd entries costs no more memory than one of Max. The zero value keeps
// none one by one; a nil *Warnings drops everything.
type Warnings struct {
	// Max is how many warnings are kept one by one.
	Max int
	// Shorten, when set, cuts each path kept (a path can be a chain of
	// 255-byte names 64 KiB long).
	Shorten func(string) string

	list   []Warning
	counts map[string]int
	first  map[string]string
	order  []string // kinds, in the order first met
}

// Add records a warning of kind about path.
func (ws *Warnings) Add(kind, path string) {
	if ws == nil {
		return
	}
	if ws.counts == nil {
		ws.counts, ws.first = map[string]int{}, map[string]string{}
	}
	keep := len(ws.list) < ws.Max
	if ws.counts[kind] == 0 || keep {
		if ws.Shorten != nil {
			path = ws.Shorten(path)
		}
	}
	if ws.counts[kind] == 0 {
		ws.order = append(ws.order, kind)
		ws.first[kind] = path
	}
	ws.counts[kind]++
	if keep {
		ws.list = append(ws.list, Warning{Kind: kind, Path: path})
	}
}

// Count is how many warnings of kind there were.
func (ws *Warnings) Count(kind string) int {
	if ws == nil {
		return 0
	}
	return ws.counts[kind]
}

// First is the path of the first warning of kind (shortened), "" when
// none.
func (ws *Warnings) First(kind string) string {
	if ws == nil {
		return ""
	}
	return ws.first[kind]
}

// Total is how many warnings there were, of every kind.
func (ws *Warnings) Total() int {
	if ws == nil {
		return 0
	}
	n := 0
	for _, c := range ws.counts {
		n += c
	}
	return n
}

// List is the warnings kept, each with its kind's count, followed, for
// each kind with more warnings than kept, by one entry of kind
// "<kind>_more" counting those not listed. Never nil.
func (ws *Warnings) List() []Warning {
	if ws == nil {
		return []Warning{}
	}
	out := make([]Warning, 0, len(ws.list)+len(ws.order))
	listed := map[string]int{}
	for _, w := range ws.list {
		w.Count = ws.counts[w.Kind]
		listed[w.Kind]++
		out = append(out, w)
	}
	for _, k := range ws.order {
		if n := ws.counts[k]; n > listed[k] {
			out = append(out, Warning{Kind: k + "_more", Count: n - listed[k]})
		}
	}
	return out
}
