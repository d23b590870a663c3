package proto

// The messages' JSON, written and read by hand, so that a runner — a fresh
// process per job — links no encoding/json and builds no reflection caches
// (about a tenth of a short job's runner CPU before; the package itself
// was a tenth of the runner's binary, all of it resident in every running
// job's runner). Both ends use it. What it writes is what encoding/json's
// Encoder writes for a Msg, byte for byte (raw Spec and Screen values are
// written as given: the producers hand compact JSON); what it reads is
// whatever encoding/json writes for one, decoded as encoding/json decodes
// it, and any other valid JSON object with the same keys. Unknown keys are
// skipped; keys are matched exactly. Tests compare both directions with
// encoding/json, on random messages.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math"
	"strconv"

	"github.com/shellctl/shellctl/internal/jsonstr"
)

// RawJSON is a JSON value kept as its bytes, as json.RawMessage is (its
// methods make encoding/json treat it so, for tests and tools).
type RawJSON []byte

// MarshalJSON returns m, or null for nil.
func (m RawJSON) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	return m, nil
}

// UnmarshalJSON keeps a copy of b.
func (m *RawJSON) UnmarshalJSON(b []byte) error {
	*m = append((*m)[:0], b...)
	return nil
}

// decodeMsg decodes line into m; false when it is not a JSON object whose
// fields have the types of Msg's.
func decodeMsg(line []byte, m *Msg) bool {
	r := jsonstr.NewReader(line)
	// null leaves a field as it is, as encoding/json does.
	str := func(p *string) bool {
		if r.Null() {
			return true
		}
		s, ok := r.String()
		*p = s
		return ok
	}
	i64 := func(p *int64) bool {
		if r.Null() {
			return true
		}
		n, ok := r.Int(64)
		*p = n
		return ok
	}
	in := func(p *int) bool {
		if r.Null() {
			return true
		}
		n, ok := r.Int(strconv.IntSize)
		*p = int(n)
		return ok
	}
	boo := func(p *bool) bool {
		if r.Null() {
			return true
		}
		v, ok := r.Bool()
		*p = v
		return ok
	}
	ok := r.Object(func(key string) bool {
		switch key {
		case "t":
			return str(&m.T)
		case "id":
			return i64(&m.ID)
		case "status":
			return str(&m.Status)
		case "pid":
			return in(&m.PID)
		case "started_at":
			return i64(&m.StartedAt)
		case "isolation":
			return str(&m.Isolation)
		case "cgroup":
			return str(&m.Cgroup)
		case "size":
			return i64(&m.Size)
		case "exit_code":
			if r.Null() {
				m.ExitCode = nil
				return true
			}
			var c int
			if !in(&c) {
				return false
			}
			m.ExitCode = &c
			return true
		case "signal":
			return in(&m.Signal)
		case "reason":
			return str(&m.Reason)
		case "ended_at":
			return i64(&m.EndedAt)
		case "done":
			return boo(&m.Done)
		case "pgid":
			return in(&m.Pgid)
		case "limits":
			return str(&m.Limits)
		case "usage":
			return str(&m.Usage)
		case "err_size":
			return i64(&m.ErrSize)
		case "cols":
			return in(&m.Cols)
		case "rows":
			return in(&m.Rows)
		case "target":
			return str(&m.Target)
		case "spec":
			b, ok := r.Raw()
			m.Spec = b
			return ok
		case "key":
			return str(&m.Key)
		case "err":
			return str(&m.Err)
		case "keys":
			l, ok := r.Strings()
			m.Keys = l
			return ok
		case "scrollback":
			return in(&m.Scrollback)
		case "quiet_ms":
			return in(&m.QuietMS)
		case "timeout_ms":
			return in(&m.TimeoutMS)
		case "screen":
			b, ok := r.Raw()
			m.Screen = b
			return ok
		case "data":
			b, ok := r.Bytes()
			m.Data = b
			return ok
		case "grace":
			if r.Null() {
				return true
			}
			f, ok := r.Float()
			m.Grace = f
			return ok
		case "waiting":
			return boo(&m.Waiting)
		case "input_seq":
			return i64(&m.InputSeq)
		case "eof":
			return boo(&m.EOF)
		case "taken":
			return i64(&m.Taken)
		case "raw_size":
			return i64(&m.RawSize)
		case "redraw":
			return boo(&m.Redraw)
		case "block":
			return boo(&m.Block)
		case "frames":
			return boo(&m.Frames)
		}
		return r.Skip() // a key Msg does not have
	})
	return ok && r.End()
}

// errBadGrace: encoding/json cannot write NaN or an infinity either.
var errBadGrace = errors.New("grace is not a finite number")

// errBadRaw: a raw value that is not one JSON value on one line.
var errBadRaw = errors.New("a raw value (spec, screen) is not one JSON value on one line")

// appendMsg appends m as encoding/json's Encoder writes it, with the
// newline.
func appendMsg(b []byte, m *Msg) ([]byte, error) {
	if math.IsNaN(m.Grace) || math.IsInf(m.Grace, 0) {
		return b, errBadGrace
	}
	for _, raw := range [][]byte{m.Spec, m.Screen} {
		if len(raw) > 0 {
			// One value, and no line end: a message is one line.
			r := jsonstr.NewReader(raw)
			if !r.Skip() || !r.End() || bytes.IndexByte(raw, '\n') >= 0 {
				return b, errBadRaw
			}
		}
	}
	raw := func(key string, v []byte) {
		if len(v) > 0 {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = append(b, v...)
		}
	}
	str := func(key, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = jsonstr.Append(b, v)
		}
	}
	num := func(key string, v int64) {
		if v != 0 {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = strconv.AppendInt(b, v, 10)
		}
	}
	boo := func(key string, v bool) {
		if v {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, `":true`...)
		}
	}
	b = append(b, `{"t":`...)
	b = jsonstr.Append(b, m.T)
	num("id", m.ID)
	str("status", m.Status)
	num("pid", int64(m.PID))
	num("started_at", m.StartedAt)
	str("isolation", m.Isolation)
	str("cgroup", m.Cgroup)
	num("size", m.Size)
	if m.ExitCode != nil {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(*m.ExitCode), 10)
	}
	num("signal", int64(m.Signal))
	str("reason", m.Reason)
	num("ended_at", m.EndedAt)
	boo("done", m.Done)
	num("pgid", int64(m.Pgid))
	str("limits", m.Limits)
	str("usage", m.Usage)
	num("err_size", m.ErrSize)
	if len(m.Data) > 0 {
		b = append(b, `,"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, m.Data)
		b = append(b, '"')
	}
	if m.Grace != 0 {
		b = append(b, `,"grace":`...)
		b = appendFloat(b, m.Grace)
	}
	num("cols", int64(m.Cols))
	num("rows", int64(m.Rows))
	str("target", m.Target)
	raw("spec", m.Spec)
	str("key", m.Key)
	str("err", m.Err)
	if len(m.Keys) > 0 {
		b = append(b, `,"keys":`...)
		b = jsonstr.AppendStrings(b, m.Keys)
	}
	num("scrollback", int64(m.Scrollback))
	num("quiet_ms", int64(m.QuietMS))
	num("timeout_ms", int64(m.TimeoutMS))
	raw("screen", m.Screen)
	boo("waiting", m.Waiting)
	num("input_seq", m.InputSeq)
	boo("eof", m.EOF)
	num("taken", m.Taken)
	num("raw_size", m.RawSize)
	boo("redraw", m.Redraw)
	boo("block", m.Block)
	boo("frames", m.Frames)
	return append(b, '}', '\n'), nil
}

// appendFloat writes f as encoding/json does: the shortest form, with an
// exponent below 1e-6 and from 1e21, and no leading zero in it.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
