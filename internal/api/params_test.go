package api

import (
	"testing"
	"time"
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
