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

func rports(r *rand.Rand) []uint16 {
	if r.IntN(3) == 0 {
		return nil
	}
	l := []uint16{}
	for n := r.IntN(4); n > 0; n-- {
		l = append(l, uint16(r.IntN(65536)))
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
			Policy: isolation.Policy{Enabled: r.IntN(2) == 0, RW: rlist(r), RO: rlist(r), RWDev: rlist(r),
				NetRestrict: r.IntN(2) == 0, NetConnectTCP: rports(r)},
			ForceIsolationFail: rstr(r), BenchNoScreen: r.IntN(2) == 0, MaxOutputBytes: r.Int64N(1 << 40),
			Walls: isolation.Walls{LimitCaps: r.IntN(2) == 0, KeepCaps: uint64(r.Int64N(1 << 62)), NewIPC: r.IntN(2) == 0}}
		if p := rstr(r); p != "" {
			in.Walls.Seccomp = []byte(p)
		}
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
		got, err := decodeSpec(b)
		if err != nil {
			t.Fatalf("%s refused: %v", b, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", b, *got, want)
		}
	}
	// Other forms encoding/json takes: the same result.
	for _, b := range []string{`{"extra":1}`, `{"policy":{"x":[1,{}]}}`, `{"id":null,"policy":null,"cols":null}`,
		` { "id" : "a\u00e9" , "max_runtime_seconds" : 1e2 } `} {
		var want Spec
		if err := json.Unmarshal([]byte(b), &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeSpec([]byte(b))
		if err != nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: got %+v (%v), want %+v", b, got, err, want)
		}
	}
	// Not a spec: refused, with an error that says so.
	for _, b := range []string{`{"cols":1.5}`, `{"argv":"sh"}`, `{"id":"x"`, `[]`, `{"policy":{"enabled":"yes"}}`} {
		if _, err := decodeSpec([]byte(b)); err == nil {
			t.Errorf("%s taken", b)
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
