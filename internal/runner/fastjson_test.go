package runner

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/shellctl/shellctl/internal/isolation"
)

var trickySpec = []string{"", "plain", `q " \ `, "<&>", "\n\t\x01", "é 漢字 🙂", "\u2028", "bad \xff", "KEY=a=b"}

func rstr(r *rand.Rand) string { return trickySpec[r.IntN(len(trickySpec))] }

func rlist(r *rand.Rand) []string {
	if r.IntN(3) == 0 {
		return nil
	}
	l := []string{}
	for n := r.IntN(4); n > 0; n-- {
		l = append(l, rstr(r))
	}
	return l
}

// A spec encoding/json wrote is read by hand exactly as encoding/json
// reads it.
func TestDecodeSpecIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 3000; i++ {
		in := Spec{ID: rstr(r), StateDir: rstr(r), Dir: rstr(r), Mode: rstr(r), ControlKey: rstr(r), Argv: rlist(r), Env: rlist(r),
			Cwd: rstr(r), Home: rstr(r), Cols: r.IntN(500), Rows: r.IntN(500),
			Policy:             isolation.Policy{Enabled: r.IntN(2) == 0, RW: rlist(r), RO: rlist(r), RWDev: rlist(r)},
			ForceIsolationFail: rstr(r), MaxOutputBytes: r.Int64N(1 << 40)}
		if r.IntN(2) == 0 {
			in.MaxRuntimeSeconds = r.Float64() * 1e4
		}
		b, err := json.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		var want Spec
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		var got Spec
		if !decodeSpecFast(b, &got) {
			t.Fatalf("%s left to encoding/json", b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", b, got, want)
		}
	}
	// Not the canonical form: encoding/json decides.
	for _, b := range []string{`{"ID":"x"}`, `{"cols":1.5}`, `{"extra":1}`, `{"policy":{"x":1}}`} {
		var s Spec
		if decodeSpecFast([]byte(b), &s) {
			t.Errorf("%s taken by hand", b)
		}
		if got, err := decodeSpec([]byte(b)); err != nil && b != `{"cols":1.5}` {
			t.Errorf("%s: %v", b, err)
		} else if b == `{"ID":"x"}` && got.ID != "x" {
			t.Errorf("%s: id %q, want encoding/json's x", b, got.ID)
		}
	}
}

// The limits and the usage are written as encoding/json writes them.
func TestRecordJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	p := func() *int64 {
		if r.IntN(2) == 0 {
			return nil
		}
		n := r.Int64N(1<<50) - 5
		return &n
	}
	for i := 0; i < 2000; i++ {
		a := AppliedLimits{RuntimeMS: p(), OutputBytes: p(), MemoryBytes: p(), Pids: p(), Why: rstr(r)}
		want, _ := json.Marshal(&a)
		if got := a.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("limits:\n got %s\nwant %s", got, want)
		}
		u := Usage{CPUUserMS: r.Int64N(1 << 40), CPUSystemMS: r.Int64N(9), MaxRSSKiB: r.Int64N(1 << 30), Source: rstr(r)}
		want, _ = json.Marshal(&u)
		if got := u.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("usage:\n got %s\nwant %s", got, want)
		}
	}
}
