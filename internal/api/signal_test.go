package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseSignal(t *testing.T) {
	good := map[string]int{`"INT"`: 2, `"SIGINT"`: 2, `"int"`: 2, `"sigterm"`: 15, `9`: 9, `"9"`: 9, `"HUP"`: 1, `"WINCH"`: 28, `64`: 64}
	for in, want := range good {
		got, err := parseSignal(json.RawMessage(in))
		if err != nil || got != want {
			t.Errorf("parseSignal(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{`"NOPE"`: "NOPE", `0`: "signal 0", `65`: "signal 65", `-1`: "signal -1", `""`: "not a signal", ``: "required", `null`: "required", `"SIG"`: "not a signal", `true`: "true", `1.5`: "1.5"}
	for in, want := range bad {
		_, err := parseSignal(json.RawMessage(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseSignal(%s) = %v; want an error naming %q", in, err, want)
		}
	}
}
