package isolation

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/jsonstr"
)

// trickyStrings are what JSON escaping and the wire's lengths must get
// right.
var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nret\r",
	"\b\f\x00\x01\x1f\x7f", "é ü 漢字 🙂", "\u2028 and \u2029", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate",
	strings.Repeat("long ", 300), "/home/agent/work dir/with spaces", "KEY=va=lue",
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return trickyStrings[r.IntN(len(trickyStrings))]
	}
	b := make([]byte, r.IntN(24))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func randList(r *rand.Rand) []string {
	n := r.IntN(5)
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = randString(r)
	}
	return l
}

func TestStageRequestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		req := &stageRequest{
			Config: JobConfig{
				Argv: randList(r), Env: randList(r), Cwd: randString(r), Home: randString(r),
				Script: randString(r), TTY: randString(r), ForceFail: randString(r),
				Policy: Policy{Enabled: r.IntN(2) == 0, RW: randList(r), RO: randList(r), RWDev: randList(r)},
			},
			TTY: r.IntN(2) == 0, HasHome: r.IntN(2) == 0, Fail: randString(r), FailCode: r.IntN(300) - 10,
		}
		b := encodeStageRequest(req)
		got, err := decodeStageRequest(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", req, err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, req)
		}
		// Every cut of it is refused, never read past its end.
		for _, n := range []int{0, 1, 2, len(b) / 2, len(b) - 1} {
			if _, err := decodeStageRequest(b[:n]); err == nil {
				t.Fatalf("a request cut to %d of %d bytes was taken", n, len(b))
			}
		}
		if _, err := decodeStageRequest(append(b, 0)); err == nil {
			t.Fatal("a request with a byte past its end was taken")
		}
	}
}

// A count no request could carry is refused before anything is made
// for it.
func TestStageRequestHugeCount(t *testing.T) {
	b := encodeStageRequest(&stageRequest{})
	// The first list (Argv) comes after the code and six strings.
	off := 2 + 4 + 6*4
	b[off], b[off+1], b[off+2], b[off+3] = 0xff, 0xff, 0xff, 0x7f
	if _, err := decodeStageRequest(b); err == nil || !strings.Contains(err.Error(), "a list of") {
		t.Fatalf("err = %v, want a refused list", err)
	}
	if _, err := decodeStageRequest([]byte{9, 0}); err == nil || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("another version: err = %v", err)
	}
}

// The stage's replies are what encoding/json writes, byte for byte.
func TestStageRepliesAreEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		want, _ := json.Marshal(s)
		if got := jsonstr.Append(nil, s); string(got) != string(want) {
			t.Errorf("string %q: got %s want %s", s, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		a := &Applied{
			Enabled: r.IntN(2) == 0, ABI: r.IntN(3) * r.IntN(9), Errata: r.IntN(2) * r.IntN(4),
			HandledFS: randList(r), ScopeSignal: r.IntN(2) == 0, ScopeAbstractUnix: r.IntN(2) == 0, IoctlDev: r.IntN(2) == 0,
			Notes: randList(r),
		}
		if r.IntN(2) == 0 {
			a.Reason = randString(r)
		}
		if r.IntN(2) == 0 {
			a.Error = randString(r)
		}
		for n := r.IntN(4); n > 0; n-- {
			a.Rules = append(a.Rules, AppliedRule{Path: randString(r), Access: randList(r)})
		}
		for n := r.IntN(3); n > 0; n-- {
			a.Skipped = append(a.Skipped, SkippedPath{Path: randString(r), Reason: randString(r)})
		}
		want, _ := json.Marshal(map[string]*Applied{"applied": a})
		if got := appendAppliedReply(nil, a); string(got) != string(want)+"\n" {
			t.Fatalf("applied %+v:\n got %s\nwant %s", a, got, want)
		}
		code, msg := r.IntN(256), randString(r)
		want, _ = json.Marshal(struct {
			Code int    `json:"code"`
			Err  string `json:"err"`
		}{code, msg})
		if got := appendFailReply(nil, code, msg); string(got) != string(want)+"\n" {
			t.Fatalf("failure %d %q:\n got %s\nwant %s", code, msg, got, want)
		}
	}
}

func FuzzDecodeStageRequest(f *testing.F) {
	f.Add(encodeStageRequest(&stageRequest{Config: JobConfig{Argv: []string{"/bin/sh"}, Env: []string{"A=1"}}}))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeStageRequest(b)
		if err != nil {
			return
		}
		// What was taken encodes back to the same bytes.
		if got := encodeStageRequest(req); string(got) != string(b) {
			t.Fatalf("re-encoded %x, was %x", got, b)
		}
	})
}
