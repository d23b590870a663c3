package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/wire"
)

func f(v float64) *float64 { return &v }
func i(v int64) *int64     { return &v }

func TestWaitParamDefaultsAndCaps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        waitFields
		defT      time.Duration
		nonPosDef bool
		timeout   time.Duration
		limit     int
		idle      time.Duration
	}{
		{"wait defaults", waitFields{}, 0, false, 0, 16384, 500 * time.Millisecond},
		{"run defaults", waitFields{}, 30 * time.Second, true, 30 * time.Second, 16384, 500 * time.Millisecond},
		{"run timeout 0 is the default", waitFields{Timeout: f(0)}, 30 * time.Second, true, 30 * time.Second, 16384, 500 * time.Millisecond},
		{"run negative timeout is the default", waitFields{Timeout: f(-5)}, 30 * time.Second, true, 30 * time.Second, 16384, 500 * time.Millisecond},
		{"wait timeout 0 looks once", waitFields{Timeout: f(0)}, 0, false, 0, 16384, 500 * time.Millisecond},
		{"input timeout 0 looks once", waitFields{Timeout: f(0)}, 30 * time.Second, false, 0, 16384, 500 * time.Millisecond},
		{"timeout capped", waitFields{Timeout: f(9999)}, 0, false, 600 * time.Second, 16384, 500 * time.Millisecond},
		{"fractional timeout", waitFields{Timeout: f(0.25)}, 0, false, 250 * time.Millisecond, 16384, 500 * time.Millisecond},
		{"limit ≤ 0 is the default", waitFields{OutputLimit: i(0)}, 0, false, 0, 16384, 500 * time.Millisecond},
		{"limit capped", waitFields{OutputLimit: i(1 << 30)}, 0, false, 0, 524288, 500 * time.Millisecond},
		{"limit kept", waitFields{OutputLimit: i(1024)}, 0, false, 0, 1024, 500 * time.Millisecond},
		{"idle ≤ 0 is the default", waitFields{IdleFlush: f(-1)}, 0, false, 0, 16384, 500 * time.Millisecond},
		{"idle capped", waitFields{IdleFlush: f(99)}, 0, false, 0, 16384, 30 * time.Second},
		{"idle kept", waitFields{IdleFlush: f(0.1)}, 0, false, 0, 16384, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.in.params(tc.defT, tc.nonPosDef)
			if p.Timeout != tc.timeout || p.Limit != tc.limit || p.Idle != tc.idle {
				t.Fatalf("params = %+v, want timeout %v limit %d idle %v", p, tc.timeout, tc.limit, tc.idle)
			}
		})
	}
}

func TestSessionIDRule(t *testing.T) {
	long := make([]byte, 129)
	for k := range long {
		long[k] = 'a'
	}
	for id, want := range map[string]bool{
		"":                 true,
		"abc-DEF_123":      true,
		string(long[:128]): true,
		string(long):       false,
		"a b":              false,
		"a/b":              false,
		"é":                false,
	} {
		if got := validSessionID(id); got != want {
			t.Errorf("validSessionID(%q) = %v", id, got)
		}
	}
}

func TestTimesAreWholeSecondsUTC(t *testing.T) {
	ts := time.Date(2026, 11, 29, 23, 59, 58, 999_000_000, time.FixedZone("X", 3600))
	if got := apiTime(ts); got != "2026-11-29T22:59:58Z" {
		t.Fatalf("apiTime = %q", got)
	}
	if optTime(nil) != nil {
		t.Fatal("nil time must stay null")
	}
}

// The hand-written JobResult encoding is byte for byte what encoding/json
// writes for wire.JobResult (HTML escaping off).
func TestResultEncodingMatchesEncodingJSON(t *testing.T) {
	code := 137
	strs := []string{"", "plain", "quote\" back\\slash", "ctl \x00\x01\x1f\x7f tab\t nl\n cr\r", "<html>&amp;</html>",
		"héllo 世界 🙂", "bad \xff\xfe utf8 \xe4\xb8", "\u2028 line sep \u2029", "\ufffd literal"}
	for _, out := range strs {
		for _, r := range []*jobs.Result{
			{JobID: "0123456789abcdef", Done: true, Status: "exited", ExitCode: &code, OutputPath: "/s/jobs/x/output.log", Output: out, Offset: 42, Truncated: true},
			{JobID: "0123456789abcdef", Status: "running", OutputPath: "/p\"ath", Output: out},
		} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			enc.Encode(wire.JobResult{JobID: r.JobID, Done: r.Done, Status: r.Status, ExitCode: r.ExitCode,
				OutputPath: r.OutputPath, Output: r.Output, Offset: r.Offset, Truncated: r.Truncated})
			if got := appendResult(nil, r); string(got) != want.String() {
				t.Errorf("output %q:\n got %s\nwant %s", out, got, want.String())
			}
		}
	}
}

// special marks exactly the first byte that needs a look (the encoder jumps
// to it), and marks none when no byte does.
func TestSpecialFindsTheFirstByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 0x1f, 0x20, '!', '"', '#', '[', '\\', ']', 'a', 0x7e, 0x7f, 0x80, 0xc3, 0xff}
	for n := 0; n < 200000; n++ {
		var w [8]byte
		// Mostly plain text, so both answers come up often.
		for k := range w {
			switch rng.IntN(16) {
			case 0:
				w[k] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				w[k] = byte(rng.IntN(256))
			default:
				w[k] = byte(0x20 + rng.IntN(0x5f))
				if w[k] == '"' || w[k] == '\\' {
					w[k] = 'x'
				}
			}
		}
		want := 8 // none
		for k, c := range w {
			if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				want = k
				break
			}
		}
		if got := bits.TrailingZeros64(special(binary.LittleEndian.Uint64(w[:]))) / 8; got != want {
			t.Fatalf("special(%q) marks byte %d first, want %d", w, got, want)
		}
	}
	// And whole strings against encoding/json.
	for n := 0; n < 2000; n++ {
		// Past 16 bytes, so every path of the scan is taken.
		b := make([]byte, rng.IntN(80))
		for k := range b {
			b[k] = alphabet[rng.IntN(len(alphabet))]
		}
		want, _ := json.Marshal(string(b))
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(string(b))
		if got := appendString(nil, string(b)); string(got)+"\n" != buf.String() {
			t.Fatalf("appendString(%q) = %s, want %s (%s)", b, got, buf.String(), want)
		}
	}
}
