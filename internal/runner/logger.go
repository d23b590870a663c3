package runner

// The runner's log: lines of key=value pairs on stderr, which the server
// keeps with its own log. Written here rather than with log/slog: slog
// and what it links (its JSON handler among it) are about a tenth of the
// runner's binary, and every byte of that binary is resident in every
// running job's runner.

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// logger writes the runner's log lines: time, level, message, then the
// logger's own pairs (With) and the call's.
type logger struct {
	w     io.Writer
	mu    *sync.Mutex
	attrs []byte // " key=value" pairs of With
}

func newLogger(w io.Writer) *logger { return &logger{w: w, mu: &sync.Mutex{}} }

// With is a logger that adds the pairs kv to every line.
func (l *logger) With(kv ...any) *logger {
	return &logger{w: l.w, mu: l.mu, attrs: appendPairs(append([]byte(nil), l.attrs...), kv)}
}

func (l *logger) Info(msg string, kv ...any)  { l.log("INFO", msg, kv) }
func (l *logger) Warn(msg string, kv ...any)  { l.log("WARN", msg, kv) }
func (l *logger) Error(msg string, kv ...any) { l.log("ERROR", msg, kv) }

func (l *logger) log(level, msg string, kv []any) {
	b := make([]byte, 0, 128)
	b = append(b, "time="...)
	b = time.Now().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, " level="...)
	b = append(b, level...)
	b = append(b, " msg="...)
	b = appendLogValue(b, msg)
	b = append(b, l.attrs...)
	b = appendPairs(b, kv)
	b = append(b, '\n')
	l.mu.Lock()
	_, _ = l.w.Write(b)
	l.mu.Unlock()
}

// appendPairs appends " key=value" for each pair of kv: a value that is
// not after a string key is logged under !BADKEY, a key without a value
// as <nil>.
func appendPairs(b []byte, kv []any) []byte {
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		var v any
		switch {
		case !ok:
			key, v = "!BADKEY", kv[i]
			i--
		case i+1 < len(kv):
			v = kv[i+1]
		}
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, '=')
		b = appendLogValue(b, valueString(v))
	}
	return b
}

func valueString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case error:
		return errorString(v)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "<nil>"
	}
	return fmt.Sprint(v)
}

// errorString is e's message; a nil error, typed or not, is <nil> (a
// typed nil's Error may panic).
func errorString(e error) (s string) {
	defer func() {
		if recover() != nil {
			s = "<nil>"
		}
	}()
	if e == nil {
		return "<nil>"
	}
	return e.Error()
}

// appendLogValue appends s, quoted when it is empty or holds a space, a
// quote, an equals sign, anything not printable (controls, bidi
// overrides, line separators) or invalid UTF-8: a value never passes for
// another key or another line.
func appendLogValue(b []byte, s string) []byte {
	if s != "" && utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return r == '"' || r == '=' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	}) {
		return append(b, s...)
	}
	return strconv.AppendQuoteToASCII(b, s)
}
