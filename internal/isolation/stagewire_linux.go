package isolation

// The stage's wire format, written by hand so that a stage — a process
// that lives for a few system calls — never pays encoding/json's
// reflection over its types (in a fresh process: the type caches built,
// the heap grown, every page of it faulted in).
//
// A request is the protocol byte (StageProtocol), a flag byte, the failure code (4 bytes,
// little-endian), then the strings Fail, Cwd, Home, Script, TTY and
// ForceFail, then the lists Argv, Env, RW, RO and RWDev, then the walls:
// KeepCaps (8 bytes, little-endian) and the seccomp program (a string),
// then the policy's NetConnectTCP ports (a count, 4 bytes, and 2 bytes
// each; flagNetRestrict says whether they apply). A
// string is its length (4 bytes) and its bytes; a list its count (4
// bytes) and its strings.
//
// A reply is a JSON line, encoded by hand: {"applied":{…}} (the Applied
// exactly as encoding/json writes it) or {"code":N,"err":"…"}; to a
// request of another protocol, {"code":125,"err":"…","stage_protocol":N}.
//
// What never changes, whatever the protocol: the 8-byte length with the
// descriptors (stage_linux.go), the protocol as the first byte of the
// request, and the JSON lines of the replies with "code", "err" and
// "stage_protocol". So a stage of any build can tell a runner of another
// that they do not speak the same request, and the runner can say so.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/shellctl/shellctl/internal/jsonstr"
)

// StageProtocol is the version of the request and of the replies, the
// first byte of every request. Bump it with every change to them (the
// fields of JobConfig and stageRequest that travel, their order, their
// encoding: TestStageWireIsProtocol fails until it is): a runner and a
// stage of different builds then refuse each other's requests openly (a
// StageProtocolError) instead of reading them wrong.
const StageProtocol = 3

// StageProtocolError: the stage and the runner were built with different
// StageProtocols (a shellctl-stage from another build beside the runner).
// The stage refused the request and ran nothing.
type StageProtocolError struct {
	Stage  int // the stage's protocol
	Runner int // the runner's: the request's
}

func (e *StageProtocolError) Error() string {
	return fmt.Sprintf("shellctl-stage is from another build (stage protocol %d, runner wants %d): install the shellctl-stage built with this runner",
		e.Stage, e.Runner)
}

const (
	flagTTY = 1 << iota
	flagHasHome
	flagPolicyEnabled
	flagLimitCaps
	flagNewIPC
	flagNetRestrict
)

// encodeStageRequest is req in the stage's wire format.
func encodeStageRequest(req *stageRequest) []byte {
	c := &req.Config
	var flags byte
	if req.TTY {
		flags |= flagTTY
	}
	if req.HasHome {
		flags |= flagHasHome
	}
	if c.Policy.Enabled {
		flags |= flagPolicyEnabled
	}
	if c.Walls.LimitCaps {
		flags |= flagLimitCaps
	}
	if c.Walls.NewIPC {
		flags |= flagNewIPC
	}
	if c.Policy.NetRestrict {
		flags |= flagNetRestrict
	}
	b := make([]byte, 0, 512+len(c.Walls.Seccomp))
	b = append(b, StageProtocol, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(req.FailCode))
	for _, s := range []string{req.Fail, c.Cwd, c.Home, c.Script, c.TTY, c.ForceFail} {
		b = appendWireString(b, s)
	}
	for _, l := range [][]string{c.Argv, c.Env, c.Policy.RW, c.Policy.RO, c.Policy.RWDev} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(l)))
		for _, s := range l {
			b = appendWireString(b, s)
		}
	}
	b = binary.LittleEndian.AppendUint64(b, c.Walls.KeepCaps)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.Walls.Seccomp)))
	b = append(b, c.Walls.Seccomp...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.Policy.NetConnectTCP)))
	for _, p := range c.Policy.NetConnectTCP {
		b = binary.LittleEndian.AppendUint16(b, p)
	}
	return b
}

func appendWireString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// wireReader reads a request, remembering the first error.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.err = errors.New("stage request cut short")
		return 0
	}
	n := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return n
}

func (r *wireReader) u64() uint64 {
	lo := r.u32()
	hi := r.u32()
	return uint64(hi)<<32 | uint64(lo)
}

func (r *wireReader) str() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = fmt.Errorf("stage request: a string of %d bytes with %d left", n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *wireReader) list() []string {
	n := r.u32()
	if r.err != nil || n == 0 {
		return nil
	}
	// Every string takes at least its 4 length bytes: a count beyond
	// what is left is a broken request, not an allocation to make.
	if uint64(n) > uint64(len(r.b)/4) {
		r.err = fmt.Errorf("stage request: a list of %d strings with %d bytes left", n, len(r.b))
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = r.str()
	}
	return l
}

// decodeStageRequest reads a request encodeStageRequest wrote.
func decodeStageRequest(b []byte) (*stageRequest, error) {
	if len(b) > 0 && b[0] != StageProtocol {
		return nil, &StageProtocolError{Stage: StageProtocol, Runner: int(b[0])}
	}
	if len(b) < 2 {
		return nil, errors.New("stage request cut short")
	}
	flags := b[1]
	if flags&^(flagTTY|flagHasHome|flagPolicyEnabled|flagLimitCaps|flagNewIPC|flagNetRestrict) != 0 {
		return nil, fmt.Errorf("stage request: unknown flags %#x", flags)
	}
	r := &wireReader{b: b[2:]}
	req := &stageRequest{TTY: flags&flagTTY != 0, HasHome: flags&flagHasHome != 0}
	c := &req.Config
	c.Policy.Enabled = flags&flagPolicyEnabled != 0
	c.Walls.LimitCaps = flags&flagLimitCaps != 0
	c.Walls.NewIPC = flags&flagNewIPC != 0
	c.Policy.NetRestrict = flags&flagNetRestrict != 0
	req.FailCode = int(int32(r.u32()))
	for _, p := range []*string{&req.Fail, &c.Cwd, &c.Home, &c.Script, &c.TTY, &c.ForceFail} {
		*p = r.str()
	}
	for _, p := range []*[]string{&c.Argv, &c.Env, &c.Policy.RW, &c.Policy.RO, &c.Policy.RWDev} {
		*p = r.list()
	}
	c.Walls.KeepCaps = r.u64()
	if prog := r.str(); prog != "" {
		c.Walls.Seccomp = []byte(prog)
	}
	if n := r.u32(); r.err == nil && n > 0 {
		if uint64(n) > uint64(len(r.b)/2) {
			r.err = fmt.Errorf("stage request: %d ports with %d bytes left", n, len(r.b))
		} else {
			c.Policy.NetConnectTCP = make([]uint16, n)
			for i := range c.Policy.NetConnectTCP {
				c.Policy.NetConnectTCP[i] = binary.LittleEndian.Uint16(r.b[2*i:])
			}
			r.b = r.b[2*n:]
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("stage request: %d bytes past its end", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return req, nil
}

// appendAppliedReply is the reply line {"applied":…}.
func appendAppliedReply(b []byte, a *Applied) []byte {
	b = append(b, `{"applied":`...)
	b = appendApplied(b, a)
	return append(b, "}\n"...)
}

// appendFailReply is the reply line {"code":N,"err":"…"}.
func appendFailReply(b []byte, code int, msg string) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"err":`...)
	b = jsonstr.Append(b, msg)
	return append(b, "}\n"...)
}

// appendProtocolReply is the reply to a request of another protocol:
// {"code":125,"err":"…","stage_protocol":N}.
func appendProtocolReply(b []byte, e *StageProtocolError) []byte {
	b = appendFailReply(b, ExitSetupFailed, e.Error())
	b = b[:len(b)-2] // "}\n"
	b = append(b, `,"stage_protocol":`...)
	b = strconv.AppendInt(b, int64(e.Stage), 10)
	return append(b, "}\n"...)
}

// appendApplied writes a as encoding/json does (field order, omitempty).
func appendApplied(b []byte, a *Applied) []byte {
	b = append(b, `{"enabled":`...)
	b = strconv.AppendBool(b, a.Enabled)
	if a.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonstr.Append(b, a.Reason)
	}
	if a.Error != "" {
		b = append(b, `,"error":`...)
		b = jsonstr.Append(b, a.Error)
	}
	if a.ABI != 0 {
		b = append(b, `,"abi":`...)
		b = strconv.AppendInt(b, int64(a.ABI), 10)
	}
	if a.Errata != 0 {
		b = append(b, `,"errata":`...)
		b = strconv.AppendInt(b, int64(a.Errata), 10)
	}
	if len(a.HandledFS) > 0 {
		b = append(b, `,"handled_fs":`...)
		b = jsonstr.AppendStrings(b, a.HandledFS)
	}
	b = append(b, `,"scope_signal":`...)
	b = strconv.AppendBool(b, a.ScopeSignal)
	b = append(b, `,"scope_abstract_unix":`...)
	b = strconv.AppendBool(b, a.ScopeAbstractUnix)
	b = append(b, `,"ioctl_dev":`...)
	b = strconv.AppendBool(b, a.IoctlDev)
	if len(a.Rules) > 0 {
		b = append(b, `,"rules":[`...)
		for i, r := range a.Rules {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = jsonstr.Append(b, r.Path)
			b = append(b, `,"access":`...)
			b = jsonstr.AppendStrings(b, r.Access)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(a.Skipped) > 0 {
		b = append(b, `,"skipped":[`...)
		for i, s := range a.Skipped {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = jsonstr.Append(b, s.Path)
			b = append(b, `,"reason":`...)
			b = jsonstr.Append(b, s.Reason)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(a.Notes) > 0 {
		b = append(b, `,"notes":`...)
		b = jsonstr.AppendStrings(b, a.Notes)
	}
	b = append(b, `,"capabilities":`...)
	if a.Capabilities == nil {
		b = append(b, "null"...)
	} else {
		b = jsonstr.AppendStrings(b, a.Capabilities)
	}
	if a.Seccomp != "" {
		b = append(b, `,"seccomp":`...)
		b = jsonstr.Append(b, a.Seccomp)
	}
	if a.IPCNamespace {
		b = append(b, `,"ipc_namespace":true`...)
	}
	return append(b, '}')
}

// decodeStageAnswer reads one reply line as the runner does (by hand: a
// runner links no encoding/json). What was applied stays JSON, to be
// passed on as it is. Whatever encoding/json writes for a reply decodes
// as encoding/json decodes it; unknown keys are skipped.
func decodeStageAnswer(line []byte) (stageAnswer, bool) {
	var a stageAnswer
	r := jsonstr.NewReader(line)
	ok := r.Object(func(key string) bool {
		switch key {
		case "applied":
			b, ok := r.Raw()
			a.Applied = b
			return ok
		case "code":
			return readInt(r, &a.Code)
		case "err":
			return readString(r, &a.Err)
		case "stage_protocol":
			return readInt(r, &a.StageProtocol)
		}
		return r.Skip()
	})
	return a, ok && r.End()
}

// decodeApplied reads an Applied as encoding/json would (by hand, as
// decodeStageAnswer).
func decodeApplied(b []byte) (Applied, bool) {
	var a Applied
	r := jsonstr.NewReader(b)
	if r.Null() {
		return a, r.End()
	}
	ok := r.Object(func(key string) bool {
		switch key {
		case "enabled":
			return readBool(r, &a.Enabled)
		case "reason":
			return readString(r, &a.Reason)
		case "error":
			return readString(r, &a.Error)
		case "abi":
			return readInt(r, &a.ABI)
		case "errata":
			return readInt(r, &a.Errata)
		case "handled_fs":
			return readStrings(r, &a.HandledFS)
		case "scope_signal":
			return readBool(r, &a.ScopeSignal)
		case "scope_abstract_unix":
			return readBool(r, &a.ScopeAbstractUnix)
		case "ioctl_dev":
			return readBool(r, &a.IoctlDev)
		case "rules":
			return readList(r, func() bool {
				var rl AppliedRule
				ok := r.Object(func(key string) bool {
					switch key {
					case "path":
						return readString(r, &rl.Path)
					case "access":
						return readStrings(r, &rl.Access)
					}
					return r.Skip()
				})
				a.Rules = append(a.Rules, rl)
				return ok
			}, func() { a.Rules = nil }, func() { a.Rules = []AppliedRule{} })
		case "skipped":
			return readList(r, func() bool {
				var sp SkippedPath
				ok := r.Object(func(key string) bool {
					switch key {
					case "path":
						return readString(r, &sp.Path)
					case "reason":
						return readString(r, &sp.Reason)
					}
					return r.Skip()
				})
				a.Skipped = append(a.Skipped, sp)
				return ok
			}, func() { a.Skipped = nil }, func() { a.Skipped = []SkippedPath{} })
		case "notes":
			return readStrings(r, &a.Notes)
		case "capabilities":
			return readStrings(r, &a.Capabilities)
		case "seccomp":
			return readString(r, &a.Seccomp)
		case "ipc_namespace":
			return readBool(r, &a.IPCNamespace)
		}
		return r.Skip()
	})
	return a, ok && r.End()
}

// The readers of decodeApplied and decodeStageAnswer: a null leaves the
// field as it is, as encoding/json does.
func readString(r *jsonstr.Reader, p *string) bool {
	if r.Null() {
		return true
	}
	s, ok := r.String()
	*p = s
	return ok
}

func readInt(r *jsonstr.Reader, p *int) bool {
	if r.Null() {
		return true
	}
	n, ok := r.Int(strconv.IntSize)
	*p = int(n)
	return ok
}

func readBool(r *jsonstr.Reader, p *bool) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Bool()
	*p = v
	return ok
}

func readStrings(r *jsonstr.Reader, p *[]string) bool {
	l, ok := r.Strings()
	*p = l
	return ok
}

// readList reads an array, elem reading each element; null calls null
// (the slice set to nil), an empty array empty.
func readList(r *jsonstr.Reader, elem func() bool, null, empty func()) bool {
	if r.Null() {
		null()
		return true
	}
	n := 0
	ok := r.Array(func() bool { n++; return elem() })
	if ok && n == 0 {
		empty()
	}
	return ok
}
