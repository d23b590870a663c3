package proto

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

var tricky = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnl\nret\r", "\b\f\x00\x01\x1f\x7f",
	"é ü 漢字 🙂", "\u2028 and \u2029", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate", strings.Repeat("long ", 200),
	`{"json":"inside"}`,
}

func rs(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	if r.IntN(3) == 0 {
		return tricky[r.IntN(len(tricky))]
	}
	b := make([]byte, r.IntN(20))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func rn(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return -r.Int64N(1 << 40)
	case 2:
		return r.Int64()
	}
	return r.Int64N(1000)
}

// randMsg sets a random subset of the fields; fast leaves out those the
// fast path hands to encoding/json.
func randMsg(r *rand.Rand, fast bool) *Msg {
	m := &Msg{T: rs(r), ID: rn(r), Status: rs(r), PID: int(rn(r)), StartedAt: rn(r), Isolation: rs(r), Cgroup: rs(r),
		Size: rn(r), Signal: int(rn(r)), Reason: rs(r), EndedAt: rn(r), Done: r.IntN(2) == 0, Pgid: int(rn(r)),
		Limits: rs(r), Usage: rs(r), ErrSize: rn(r), Cols: int(rn(r)), Rows: int(rn(r)), Target: rs(r), Key: rs(r),
		Err: rs(r), Scrollback: int(rn(r)), QuietMS: int(rn(r)), TimeoutMS: int(rn(r)), Waiting: r.IntN(2) == 0, InputSeq: rn(r)}
	if r.IntN(2) == 0 {
		c := int(rn(r))
		m.ExitCode = &c
	}
	for n := r.IntN(4); n > 0; n-- {
		m.Keys = append(m.Keys, rs(r))
	}
	if !fast {
		if r.IntN(3) == 0 {
			m.Data = []byte(rs(r))
		}
		if r.IntN(3) == 0 {
			m.Grace = r.Float64() * 10
		}
		if r.IntN(3) == 0 {
			m.Screen = json.RawMessage(`{"rows": ["a", "<b>"] }`)
		}
	}
	if r.IntN(3) == 0 {
		m.Spec = json.RawMessage(`{"id":"x","argv":["/bin/sh","-c","echo \u003c"],"n":1.5e3,"o":{"p":[true,false,null]}}`)
	}
	return m
}

// What the fast path writes is what encoding/json's Encoder wrote, byte
// for byte; what it reads is what encoding/json reads.
func TestFastJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fastSent, fastRead := 0, 0
	for i := 0; i < 5000; i++ {
		m := randMsg(r, i%2 == 0)
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(m); err != nil {
			t.Fatal(err)
		}
		if got, ok := appendMsgFast(nil, m); ok {
			fastSent++
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("encoded %+v:\n got %s\nwant %s", m, got, want.Bytes())
			}
		} else if len(m.Data) == 0 && m.Grace == 0 && len(m.Spec) == 0 && len(m.Screen) == 0 {
			t.Fatalf("%+v left to encoding/json", m)
		}
		var wantM Msg
		if err := json.Unmarshal(want.Bytes(), &wantM); err != nil {
			t.Fatal(err)
		}
		var gotM Msg
		if decodeMsgFast(want.Bytes(), &gotM) {
			fastRead++
			if !reflect.DeepEqual(gotM, wantM) {
				t.Fatalf("decoded %s:\n got %+v\nwant %+v", want.Bytes(), gotM, wantM)
			}
		} else if len(m.Data) == 0 && m.Grace == 0 {
			t.Fatalf("%s left to encoding/json", want.Bytes())
		}
	}
	if fastSent < 2000 || fastRead < 2000 {
		t.Fatalf("fast path taken for %d sends and %d reads of 5000: the test proves little", fastSent, fastRead)
	}
}

// Forms encoding/json does not write are left to it.
func TestFastJSONLeavesTheRest(t *testing.T) {
	for _, line := range []string{
		`{"T":"running"}`, `{"t":null}`, `{"t":"x","exit_code":null}`, `{"t":"x","pid":1.5}`, `{"t":"x","pid":1e3}`,
		`{"t":"x","pid":01}`, `{"t":"x","data":"aGk="}`, `{"t":"x","grace":2}`, `{"t":"x","other":1}`, `{"t":"x"`,
		`{"t":"x"} {}`, `{"t":"a\u00"}`, "{\"t\":\"a\x01\"}", `{"t":"x","pid":99999999999999999999}`,
		`[1]`, ``, `{"t":"x",}`,
	} {
		var m Msg
		if decodeMsgFast([]byte(line), &m) {
			t.Errorf("%s taken by the fast path (as %+v)", line, m)
		}
	}
	var m Msg
	if !decodeMsgFast([]byte(" {\"t\" : \"x\\ud83d\\ude42\\ud800\\/\" , \"keys\":[ ] }\n"), &m) || m.T != "x🙂\ufffd/" || m.Keys == nil {
		t.Errorf("canonical with white space, escapes and an empty list: %+v", m)
	}
}

// Whatever the fast path takes, encoding/json reads the same way.
func FuzzFastJSON(f *testing.F) {
	f.Add([]byte(`{"t":"running","pid":12,"started_at":1,"isolation":"{\"enabled\":true}","done":true,"keys":["a"],"exit_code":0}`))
	f.Add([]byte(`{"t":"assign","spec":{"id":"x","argv":["a"],"n":1.5,"o":[null,true,{}]}}`))
	f.Add([]byte(`{"t":"a\ud800\u00e9\\"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Msg
		if !decodeMsgFast(b, &got) {
			return
		}
		var want Msg
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("the fast path took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n fast %+v\n json %+v", b, got, want)
		}
	})
}
