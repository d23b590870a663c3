package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// decodeAll runs the scanner over body with "script" as the big field,
// reading through a reader that hands out one byte at a time when slow is
// set (every buffer boundary is then crossed somewhere).
func decodeAll(body []byte, slow bool) (*decoder, *memSink, error) {
	var r io.Reader = bytes.NewReader(body)
	if slow {
		r = iotest.OneByteReader(r)
	}
	sk := &memSink{}
	d := &decoder{r: bufio.NewReaderSize(r, 16), bigs: []bigField{{key: "script", sink: sk}}, restMax: 1 << 20}
	return d, sk, d.decode()
}

func TestDecoderUnescapesLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{
		``, `plain`, `a\nb\tc\r\"q\" \\ \/ \b\f`, `\u0041\u00e9\u4e16\ud83d\ude42`,
		`lone \ud800 high`, `lone \udc00 low`, `\ud800\u0041 pair broken`, `\ud800\ud800\udc00`,
		"raw héllo 世界 🙂", "bad \xff\xfe utf8 \xe4\xb8 x", "cut at end \xe4\xb8",
		"\xed\xa0\x80 surrogate in utf8", "\ufffd literal", strings.Repeat("é", 40),
	} {
		body := []byte(`{"mode":"stdio","script":"` + s + `","timeout":1.5}`)
		var want struct {
			Script *string `json:"script"`
		}
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("%q: encoding/json: %v", s, err)
		}
		for _, slow := range []bool{false, true} {
			d, sk, err := decodeAll(body, slow)
			if err != nil {
				t.Fatalf("%q (slow %v): %v", s, slow, err)
			}
			if string(sk.b) != *want.Script || d.bigs[0].state != bigString || d.bigs[0].n != int64(len(sk.b)) {
				t.Errorf("%q (slow %v): script %q, want %q", s, slow, sk.b, *want.Script)
			}
			if string(d.rest) != `{"mode":"stdio","timeout":1.5}` {
				t.Errorf("%q: rest = %s", s, d.rest)
			}
		}
	}
}

func TestDecoderErrors(t *testing.T) {
	for _, tc := range []struct {
		body   string
		status int
		msg    string
	}{
		{`[1]`, 400, "must be a JSON object"},
		{`{"script":5}`, 400, `field "script" must be a string, got a number`},
		{`{"script":{"a":1}}`, 400, "got an object"},
		{`{"script":"abc`, 400, "unexpected end of input"},
		{`{"script":"a\qb"}`, 400, `invalid escape \q`},
		{`{"script":"a\u12"}`, 400, `\u escape`},
		{"{\"script\":\"a\x01b\"}", 400, "control character"},
		{`{"script":"a"} x`, 400, "after the top-level object"},
		{`{"script":"a",}`, 400, "expected a field name"},
		{`{"script":"a" "b":1}`, 400, "expected ',' or '}'"},
		{`{"a":}`, 400, "expected a value"},
		{`{"a":[1,2}`, 400, "expected ',' or ']'"},
		{`{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400, "nests deeper"},
		{`{"a":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "take more than"},
	} {
		_, _, err := decodeAll([]byte(tc.body), false)
		var be *bodyError
		if !errors.As(err, &be) || be.status != tc.status || !strings.Contains(be.msg, tc.msg) {
			t.Errorf("%.60q: err %v, want %d containing %q", tc.body, err, tc.status, tc.msg)
		}
	}
}

func TestDecoderFindsNonFiniteNumbers(t *testing.T) {
	for body, path := range map[string]string{
		`{"timeout":NaN}`: "timeout",
		`{"script":"x","idle_flush_seconds":Infinity}`: "idle_flush_seconds",
		`{"grace_seconds":-Infinity}`:                  "grace_seconds",
		`{"terminal":{"cols":NaN,"rows":3}}`:           "terminal.cols",
		`{"a":[1,inf]}`:                                "a[1]",
		`{"timeout":1.5}`:                              "",
	} {
		d, _, err := decodeAll([]byte(body), false)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if d.nonFinite != path {
			t.Errorf("%s: non-finite at %q, want %q", body, d.nonFinite, path)
		}
	}
}

func TestDecoderLastDuplicateWinsAndNullClears(t *testing.T) {
	d, sk, err := decodeAll([]byte(`{"script":"first","Script":"second"}`), false)
	if err != nil || string(sk.b) != "second" || d.bigs[0].state != bigString {
		t.Fatalf("duplicate: %q %v", sk.b, err)
	}
	d, sk, err = decodeAll([]byte(`{"script":"first","script":null}`), false)
	if err != nil || len(sk.b) != 0 || d.bigs[0].state != bigNull {
		t.Fatalf("null after a value: %q state %d %v", sk.b, d.bigs[0].state, err)
	}
	d, _, err = decodeAll([]byte("  \n"), false)
	if err != nil || string(d.rest) != "{}" || d.bigs[0].state != bigAbsent {
		t.Fatalf("empty body: %s %v", d.rest, err)
	}
}

func TestDecodeRestRangeIsValidation(t *testing.T) {
	var b runBody
	for body, want := range map[string]int{
		`{"timeout":1e400}`:                           422,
		`{"offset":99999999999999999999}`:             422,
		`{"terminal":{"cols":100000000000000000000}}`: 422,
		`{"offset":1.5}`:                              400,
		`{"offset":"zero"}`:                           400,
	} {
		err := decodeRest([]byte(body), &b)
		var be *bodyError
		if !errors.As(err, &be) || be.status != want {
			t.Errorf("%s: %v, want %d", body, err, want)
		}
	}
}

// FuzzDecoder: on every body, the scanner agrees with encoding/json — the
// same script, the same other fields, and an error where it has one.
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		`{"script":"echo hi\n","mode":"pty","env":{"A":"b"},"terminal":{"cols":80,"rows":24},"timeout":1.5}`,
		`{"script":"\ud83d\ude42 \ud800 \u00e9","x":[1,"two",{"t":true}],"y":null}`,
		"{\"script\":\"bad \xff utf8\",\"k\xff\":\"v\"}",
		`{"Script":"a","SCRIPT":"b","n":-0.5e3}`,
		`{"script":null}`, `{}`, `{"a":{"b":[[]]}}`, `{"script":"x"}}`, `{"script":"\`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var wantScript struct {
			Script *string `json:"script"`
		}
		var wantAll map[string]any
		errScript := json.Unmarshal(body, &wantScript)
		errAll := json.Unmarshal(body, &wantAll)
		for _, slow := range []bool{false, true} {
			d, sk, err := decodeAll(body, slow)
			trimmed := bytes.TrimSpace(body)
			if len(trimmed) == 0 || trimmed[0] != '{' {
				if len(trimmed) > 0 && err == nil {
					t.Fatalf("%q: accepted a body that is not an object", body)
				}
				return
			}
			var be *bodyError
			if errors.As(err, &be) && strings.Contains(be.msg, "nests deeper") {
				return
			}
			if errAll != nil {
				var se *json.SyntaxError
				if errors.As(errAll, &se) && err == nil && d.nonFinite == "" {
					// Syntax errors inside copied fields surface when they
					// are decoded: they must.
					var m map[string]any
					if json.Unmarshal(d.rest, &m) == nil {
						t.Fatalf("%q: encoding/json says %v, the scanner accepted it (rest %s)", body, errAll, d.rest)
					}
				}
				return
			}
			if errScript != nil {
				// A script that is not a string.
				if err == nil {
					t.Fatalf("%q: the scanner accepted a script encoding/json refuses: %v", body, errScript)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: encoding/json accepts it, the scanner says %v", body, err)
			}
			switch {
			case wantScript.Script == nil && d.bigs[0].state == bigString:
				t.Fatalf("%q: scanner found a script %q, encoding/json none", body, sk.b)
			case wantScript.Script != nil && (d.bigs[0].state != bigString || string(sk.b) != *wantScript.Script):
				t.Fatalf("%q: script %q (state %d), want %q", body, sk.b, d.bigs[0].state, *wantScript.Script)
			}
			var gotRest map[string]any
			if err := json.Unmarshal(d.rest, &gotRest); err != nil {
				t.Fatalf("%q: rest %s does not decode: %v", body, d.rest, err)
			}
			for k := range wantAll {
				if strings.EqualFold(k, "script") {
					delete(wantAll, k)
				}
			}
			if len(wantAll) == 0 && len(gotRest) == 0 {
				continue
			}
			if !reflect.DeepEqual(gotRest, wantAll) {
				t.Fatalf("%q: other fields %v, want %v", body, gotRest, wantAll)
			}
		}
	})
}

// TestDecodeRestTypeNamesTheField: a value of the wrong type is named by
// the field the API user wrote and the JSON kind it wants, never by a Go
// struct path (waitFields.timeout) or a Go type (float64).
func TestDecodeRestTypeNamesTheField(t *testing.T) {
	var b runBody
	for body, want := range map[string]string{
		`{"timeout":"x"}`:              `field "timeout" must be a number, got JSON string`,
		`{"offset":1.5}`:               `field "offset" must be a whole number, got JSON number 1.5`,
		`{"terminal":{"cols":"wide"}}`: `field "terminal.cols" must be a whole number, got JSON string`,
		`{"idle_flush_seconds":[1]}`:   `field "idle_flush_seconds" must be a number, got JSON array`,
		`{"env":{"A":1}}`:              `field "env" must be a string, got JSON number`,
	} {
		err := decodeRest([]byte(body), &b)
		var be *bodyError
		if !errors.As(err, &be) || be.msg != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestPlain8: plain8 says yes exactly when none of the 8 bytes would stop
// the scanner's byte-by-byte loop (a quote, a backslash, a control
// character, a byte of a multi-byte character), wherever it lies.
func TestPlain8(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 8; pos++ {
			for _, fill := range []byte{'a', ' ', 0x7f, '0'} {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(b)
				if got, want := plain8(binary.LittleEndian.Uint64(w)), plain(byte(b)); got != want {
					t.Fatalf("byte %#x at %d among %q: plain8 %v, want %v", b, pos, fill, got, want)
				}
			}
		}
	}
}
