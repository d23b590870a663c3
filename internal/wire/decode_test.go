package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

type plainResult JobResult // decoded by encoding/json alone

// serverShape is an answer as shellctl's server writes it (the api package
// tests that its bytes are encoding/json's with HTML escaping off).
func serverShape(t *testing.T, r JobResult) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(plainResult(r)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sameDecode(t *testing.T, data []byte) {
	t.Helper()
	var got JobResult
	var want plainResult
	gerr := json.Unmarshal(data, &got)
	werr := json.Unmarshal(data, &want)
	if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(plainResult(got), want) {
		t.Fatalf("decoding %q:\n got %+v (%v)\nwant %+v (%v)", data, got, gerr, want, werr)
	}
}

// The server's answers are read by the one-pass reader, to the same
// result as encoding/json's.
func TestJobResultFastPathMatchesEncodingJSON(t *testing.T) {
	code, neg := 137, -1
	outs := []string{"", "plain", "quote\" back\\slash /", "ctl \x00\x01\x1f\x7f tab\t nl\n cr\r \b \f", "<html>&amp;</html>",
		"héllo 世界 🙂", "\ufffd from bad bytes", "\u2028 line sep \u2029", strings.Repeat("line of text\n", 40000)}
	for _, out := range outs {
		for _, r := range []JobResult{
			{JobID: "0123456789abcdef", Done: true, Status: "exited", ExitCode: &code, OutputPath: "/s/jobs/x/output.log", Output: out, Offset: 42, Truncated: true},
			{JobID: "0123456789abcdef", Status: "running", OutputPath: "/p\"ath", Output: out, ExitCode: &neg},
			{Output: out, Offset: 1 << 40},
		} {
			data := serverShape(t, r)
			var fast JobResult
			if !decodeJobResult(&fast, data) {
				t.Fatalf("the server's answer %.200q was not read in one pass", data)
			}
			if !reflect.DeepEqual(fast, r) {
				t.Fatalf("one pass read %.200q as %+v, want %+v", data, fast, r)
			}
			sameDecode(t, data)
		}
	}
}

// Anything else (other key orders, spaces, escapes the server does not
// write, bad JSON) decodes exactly as encoding/json decodes it.
func TestJobResultOtherShapesMatchEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{"job_id":"a","done":true,"status":"exited","exit_code":0,"output_path":"p","output":"\ud83d\ude00 \ud800 x","offset":1,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":0,"output_path":"p","output":"bad ` + "\xff\xfe" + ` utf8","offset":1,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":0,"output_path":"p","output":"raw ` + "\x01" + ` ctl","offset":1,"truncated":false}`,
		`{"done":true,"job_id":"a","status":"exited","exit_code":0,"output_path":"p","output":"x","offset":1,"truncated":false}`,
		`{"job_id": "a", "done": true, "status": "exited", "exit_code": 0, "output_path": "p", "output": "x", "offset": 1, "truncated": false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":1.5,"output_path":"p","output":"x","offset":1,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":01,"output_path":"p","output":"x","offset":1,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":-0,"output_path":"p","output":"x","offset":1e3,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":null,"output_path":"p","output":"x","offset":1,"truncated":false,"extra":1}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":null,"output_path":"p","output":"x","offset":1,"truncated":false}garbage`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":null,"output_path":"p","output":"x\q","offset":1,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":null,"output_path":"p","output":"x\u12","offset":1,"truncated":false}`,
		`{"job_id":"a","done":true,"status":"exited","exit_code":99999999999999999999,"output_path":"p","output":"x","offset":1,"truncated":false}`,
		`{"job_id":"a","done":tru,"status":"exited","exit_code":null,"output_path":"p","output":"x","offset":1,"truncated":false}`,
		`{"job_id":"a"`, `null`, `[]`, `{}`, ``,
	} {
		sameDecode(t, []byte(s))
	}
	// Random strings of tricky bytes and escapes inside the server's shape.
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "é", "世", "\\n", "\\\"", "\\\\", "\\/", "\\u0000", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\uzzzz", "\\u00E9", "\\u00Ff", "\\u0g00", "\\u12", "\\x", "\"", "\x01", "\xff", "\\", " "}
	for n := 0; n < 5000; n++ {
		var b strings.Builder
		for k := rng.IntN(12); k > 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		sameDecode(t, []byte(`{"job_id":"a","done":false,"status":"running","exit_code":null,"output_path":"p","output":"`+b.String()+`","offset":7,"truncated":true}`))
	}
	// Into a result that holds values already, as encoding/json would.
	old := JobResult{JobID: "old", Output: "old"}
	if err := json.Unmarshal([]byte(`{"job_id":"new"}`), &old); err != nil || old.JobID != "new" || old.Output != "old" {
		t.Fatalf("partial answer into a filled result: %+v %v", old, err)
	}
}

// BenchmarkDecodeNULWindow: a 512 KiB window of NULs, half a million
// \u0000 escapes.
func BenchmarkDecodeNULWindow(b *testing.B) {
	data, _ := json.Marshal(plainResult{JobID: "0123456789abcdef", Status: "exited", Done: true, OutputPath: "/x", Output: strings.Repeat("\x00", 512<<10), Offset: 1})
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var r JobResult
		if err := r.UnmarshalJSON(data); err != nil || len(r.Output) != 512<<10 {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeWindowDirect(b *testing.B) {
	text := strings.Repeat(strings.Repeat("x", 99)+"\n", 5243)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(plainResult{JobID: "0123456789abcdef", Status: "exited", Done: true, OutputPath: "/x", Output: text, Offset: 1})
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var r JobResult
		if err := r.UnmarshalJSON(data); err != nil || len(r.Output) != len(text) {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeWindow(b *testing.B) {
	text := strings.Repeat(strings.Repeat("x", 99)+"\n", 5243)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(plainResult{JobID: "0123456789abcdef", Status: "exited", Done: true, OutputPath: "/x", Output: text, Offset: 1})
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var r JobResult
		if err := json.Unmarshal(data, &r); err != nil || len(r.Output) != len(text) {
			b.Fatal(err)
		}
	}
}

// FuzzJobResultDecode: whatever the bytes (an answer of the server's shape
// around any output, or anything at all), the one-pass reader and
// encoding/json agree.
func FuzzJobResultDecode(f *testing.F) {
	f.Add([]byte("hello\n"), []byte(`{"job_id":"a"}`))
	f.Add([]byte("\x00\xff\\\"\u2028"), []byte(`{"job_id":"a","done":true,"status":"s","exit_code":-3,"output_path":"p","output":"\u00e9\ud83d\ude00","offset":0,"truncated":false}`))
	f.Fuzz(func(t *testing.T, out, raw []byte) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		code := len(out) - 3
		enc.Encode(plainResult{JobID: "j", Status: "exited", ExitCode: &code, OutputPath: "/p", Output: string(out), Offset: int64(len(out))})
		sameDecode(t, b.Bytes())
		sameDecode(t, raw)
		var direct, want JobResult
		derr := direct.UnmarshalJSON(raw)
		werr := json.Unmarshal(raw, (*plainResult)(&want))
		if (derr == nil) != (werr == nil) || !reflect.DeepEqual(direct, want) {
			t.Fatalf("UnmarshalJSON(%q) = %+v (%v), encoding/json %+v (%v)", raw, direct, derr, want, werr)
		}
	})
}

// plainText's word-at-a-time test says exactly what a byte-by-byte look
// says, whichever byte is where (the 32- and 8-byte steps and the tail).
func TestPlainTextIsExact(t *testing.T) {
	ref := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 {
				return false
			}
		}
		return utf8.Valid(b)
	}
	odd := [][]byte{{0x00}, {0x1f}, {0x20}, {0x7f}, {0x80}, {0xc3, 0xa9}, {0xe4, 0xb8, 0x96}, {0xff}, {'\t'}, {'~'}}
	checked := 0
	for n := 0; n <= 70; n++ {
		for pos := 0; pos < n; pos++ {
			for _, o := range odd {
				b := bytes.Repeat([]byte("a"), n)
				copy(b[pos:], o)
				if got, want := plainText(b), ref(b); got != want {
					t.Fatalf("plainText(%q) = %v, want %v", b, got, want)
				}
				checked++
			}
		}
	}
	if checked < 20000 {
		t.Fatalf("only %d cases checked", checked)
	}
}
