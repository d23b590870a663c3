package proto

import (
	"bytes"
	"encoding/json"
	"math"
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

// randMsg sets a random subset of the fields. Raw values are compact and
// HTML-escaped, as the producers (json.Marshal) write them.
func randMsg(r *rand.Rand) *Msg {
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
	if r.IntN(3) == 0 {
		m.Data = []byte(rs(r))
	}
	switch r.IntN(6) {
	case 0:
		m.Grace = r.Float64() * 10
	case 1:
		m.Grace = r.Float64() * 1e-8
	case 2:
		m.Grace = -r.Float64() * 1e25
	}
	if r.IntN(3) == 0 {
		m.Screen = RawJSON(`{"rows":["a","\u003cb\u003e"],"n":1.5e3}`)
	}
	if r.IntN(3) == 0 {
		m.Spec = RawJSON(`{"id":"x","argv":["/bin/sh","-c","echo \u003c"],"n":1.5e3,"o":{"p":[true,false,null]}}`)
	}
	return m
}

// What appendMsg writes is what encoding/json's Encoder writes, byte for
// byte; decodeMsg reads what encoding/json writes as encoding/json reads
// it, and reads back what appendMsg wrote.
func TestMsgJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 5000; i++ {
		m := randMsg(r)
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(m); err != nil {
			t.Fatal(err)
		}
		got, err := appendMsg(nil, m)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("encoded %+v (%v):\n got %s\nwant %s", m, err, got, want.Bytes())
		}
		var wantM Msg
		if err := json.Unmarshal(want.Bytes(), &wantM); err != nil {
			t.Fatal(err)
		}
		var gotM Msg
		if !decodeMsg(want.Bytes(), &gotM) {
			t.Fatalf("refused what encoding/json wrote: %s", want.Bytes())
		}
		if !reflect.DeepEqual(gotM, wantM) {
			t.Fatalf("decoded %s:\n got %+v\nwant %+v", want.Bytes(), gotM, wantM)
		}
	}
}

// Not JSON, or not of the fields' types: refused.
func TestMsgDecodeRefuses(t *testing.T) {
	for _, line := range []string{
		`{"t":"x","pid":1.5}`, `{"t":"x","pid":1e3}`, `{"t":"x","pid":01}`, `{"t":"x"`, `{"t":"x"} {}`,
		`{"t":"a\u00"}`, "{\"t\":\"a\x01\"}", `{"t":"x","pid":99999999999999999999}`, `[1]`, ``,
		`{"t":"x",}`, `{"t":1}`, `{"t":"x","data":"!!"}`, `{"t":"x","keys":[1]}`, `{"t":"x","done":"yes"}`,
		`{"t":"x","other":[1,}`, `{"t":"x","spec":}`,
	} {
		var m Msg
		if decodeMsg([]byte(line), &m) {
			t.Errorf("%s taken (as %+v)", line, m)
		}
	}
	if _, err := appendMsg(nil, &Msg{T: "x", Grace: math.NaN()}); err == nil {
		t.Error("NaN grace written")
	}
	if _, err := appendMsg(nil, &Msg{T: "x", Spec: RawJSON(`{"a":`)}); err == nil {
		t.Error("broken raw spec written")
	}
	// A line end inside a raw value would split the message's line.
	if _, err := appendMsg(nil, &Msg{T: "x", Screen: RawJSON("{\n\"a\": 1}")}); err == nil {
		t.Error("a raw screen with a line end written")
	}
}

// What encoding/json would skip or take in another form is taken the same
// way: unknown keys, nulls, data, grace, white space and escapes.
func TestMsgDecodeTakesOtherForms(t *testing.T) {
	for _, line := range []string{
		`{"t":null}`, `{"t":"x","exit_code":null}`, `{"t":"x","data":"aGk="}`, `{"t":"x","grace":2}`,
		`{"t":"x","other":{"a":[1,"b",null]}}`, `{"t":"x","pid":null,"t":"y"}`, `{"t":"x","data":null,"spec":null}`,
		" {\"t\" : \"x\\ud83d\\ude42\\ud800\\/\" , \"keys\":[ ] }\n",
	} {
		var got, want Msg
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		if !decodeMsg([]byte(line), &got) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", line, got, want)
		}
	}
}

// Whatever decodeMsg takes, encoding/json reads the same way (keys in
// another case aside: encoding/json takes "T" for "t", decodeMsg skips it).
func FuzzFastJSON(f *testing.F) {
	f.Add([]byte(`{"t":"running","pid":12,"started_at":1,"isolation":"{\"enabled\":true}","done":true,"keys":["a"],"exit_code":0}`))
	f.Add([]byte(`{"t":"assign","spec":{"id":"x","argv":["a"],"n":1.5,"o":[null,true,{}]}}`))
	f.Add([]byte(`{"t":"a\ud800\u00e9\\","data":"aGk=","grace":1.5e-7,"other":null}`))
	fields := map[string]bool{}
	for _, fl := range reflect.VisibleFields(reflect.TypeFor[Msg]()) {
		fields[strings.ToLower(strings.Split(fl.Tag.Get("json"), ",")[0])] = true
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Msg
		if !decodeMsg(b, &got) {
			return
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(b, &keys) == nil {
			for k := range keys {
				if fields[strings.ToLower(k)] && !fields[k] {
					return // a key in another case
				}
			}
		}
		var want Msg
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("decodeMsg took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n fast %+v\n json %+v", b, got, want)
		}
	})
}
