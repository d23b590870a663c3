package runner

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestLoggerLines: the runner's log lines carry the level, the message
// and the pairs, quoted where a value would be ambiguous, With's pairs on
// every line.
func TestLoggerLines(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	l := newLogger(f).With("job", "abc123")
	l.Warn("copy terminal output", "err", errors.New("read /dev/ptmx: input/output error"), "n", 3)
	l.Info("plain", "k", "v=1", "empty", "", "ok", true)
	l.Error("odd", "dangling")
	var typedNil *os.PathError
	l.Warn("bidi \u202e", "err", error(typedNil), "v", "a\u2028b")
	f.Close()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %q", len(lines), b)
	}
	want := []string{
		` level=WARN msg="copy terminal output" job=abc123 err="read /dev/ptmx: input/output error" n=3`,
		` level=INFO msg=plain job=abc123 k="v=1" empty="" ok=true`,
		` level=ERROR msg=odd job=abc123 dangling=<nil>`,
		` level=WARN msg="bidi \u202e" job=abc123 err=<nil> v="a\u2028b"`,
	}
	stamp := regexp.MustCompile(`^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)`)
	for i, line := range lines {
		loc := stamp.FindStringIndex(line)
		if loc == nil {
			t.Errorf("line %d has no time: %q", i, line)
			continue
		}
		if got := line[loc[1]:]; got != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, got, want[i])
		}
	}
}
