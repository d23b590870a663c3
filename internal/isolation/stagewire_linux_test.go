package isolation

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/shellctl/shellctl/internal/jsonstr"
)

// trickyStrings are what JSON escaping and the wire's lengths must get
// right.
var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nret\r",
	"\b\f\x00\x01\x1f\x7f", "é ü 漢字 🙂", "\u2028 and \u2029", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate",
	strings.Repeat("long ", 300), "/home/agent/work dir/with spaces", "KEY=va=lue",
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return trickyStrings[r.IntN(len(trickyStrings))]
	}
	b := make([]byte, r.IntN(24))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func randList(r *rand.Rand) []string {
	n := r.IntN(5)
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = randString(r)
	}
	return l
}

func TestStageRequestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		req := &stageRequest{
			Config: JobConfig{
				Argv: randList(r), Env: randList(r), Cwd: randString(r), Home: randString(r),
				Script: randString(r), TTY: randString(r), ForceFail: randString(r),
				Policy: Policy{Enabled: r.IntN(2) == 0, RW: randList(r), RO: randList(r), RWDev: randList(r)},
				Walls:  Walls{LimitCaps: r.IntN(2) == 0, KeepCaps: r.Uint64(), NewIPC: r.IntN(2) == 0},
			},
			TTY: r.IntN(2) == 0, HasHome: r.IntN(2) == 0, Fail: randString(r), FailCode: r.IntN(300) - 10,
		}
		if s := randString(r); s != "" {
			req.Config.Walls.Seccomp = []byte(s)
		}
		b := encodeStageRequest(req)
		got, err := decodeStageRequest(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", req, err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, req)
		}
		// Every cut of it is refused, never read past its end.
		for _, n := range []int{0, 1, 2, len(b) / 2, len(b) - 1} {
			if _, err := decodeStageRequest(b[:n]); err == nil {
				t.Fatalf("a request cut to %d of %d bytes was taken", n, len(b))
			}
		}
		if _, err := decodeStageRequest(append(b, 0)); err == nil {
			t.Fatal("a request with a byte past its end was taken")
		}
	}
}

// A count no request could carry is refused before anything is made
// for it.
func TestStageRequestHugeCount(t *testing.T) {
	b := encodeStageRequest(&stageRequest{})
	// The first list (Argv) comes after the code and six strings.
	off := 2 + 4 + 6*4
	b[off], b[off+1], b[off+2], b[off+3] = 0xff, 0xff, 0xff, 0x7f
	if _, err := decodeStageRequest(b); err == nil || !strings.Contains(err.Error(), "a list of") {
		t.Fatalf("err = %v, want a refused list", err)
	}
	var pe *StageProtocolError
	if _, err := decodeStageRequest([]byte{StageProtocol + 8, 0}); !errors.As(err, &pe) || pe.Runner != StageProtocol+8 || pe.Stage != StageProtocol {
		t.Fatalf("another protocol: err = %v", err)
	}
}

// The stage's replies are what encoding/json writes, byte for byte.
func TestStageRepliesAreEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		want, _ := json.Marshal(s)
		if got := jsonstr.Append(nil, s); string(got) != string(want) {
			t.Errorf("string %q: got %s want %s", s, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		a := &Applied{
			Enabled: r.IntN(2) == 0, ABI: r.IntN(3) * r.IntN(9), Errata: r.IntN(2) * r.IntN(4),
			HandledFS: randList(r), ScopeSignal: r.IntN(2) == 0, ScopeAbstractUnix: r.IntN(2) == 0, IoctlDev: r.IntN(2) == 0,
			Notes: randList(r), Capabilities: randList(r), IPCNamespace: r.IntN(2) == 0,
		}
		if r.IntN(2) == 0 {
			a.Reason = randString(r)
		}
		if r.IntN(2) == 0 {
			a.Seccomp = randString(r)
		}
		if r.IntN(2) == 0 {
			a.Error = randString(r)
		}
		for n := r.IntN(4); n > 0; n-- {
			a.Rules = append(a.Rules, AppliedRule{Path: randString(r), Access: randList(r)})
		}
		for n := r.IntN(3); n > 0; n-- {
			a.Skipped = append(a.Skipped, SkippedPath{Path: randString(r), Reason: randString(r)})
		}
		want, _ := json.Marshal(map[string]*Applied{"applied": a})
		if got := appendAppliedReply(nil, a); string(got) != string(want)+"\n" {
			t.Fatalf("applied %+v:\n got %s\nwant %s", a, got, want)
		}
		code, msg := r.IntN(256), randString(r)
		want, _ = json.Marshal(struct {
			Code int    `json:"code"`
			Err  string `json:"err"`
		}{code, msg})
		if got := appendFailReply(nil, code, msg); string(got) != string(want)+"\n" {
			t.Fatalf("failure %d %q:\n got %s\nwant %s", code, msg, got, want)
		}
		pe := &StageProtocolError{Stage: r.IntN(256), Runner: r.IntN(256)}
		want, _ = json.Marshal(stageAnswer{Code: ExitSetupFailed, Err: pe.Error(), StageProtocol: pe.Stage})
		want = bytes.Replace(want, []byte(`{"applied":null,`), []byte("{"), 1)
		if got := appendProtocolReply(nil, pe); string(got) != string(want)+"\n" {
			t.Fatalf("refusal %+v:\n got %s\nwant %s", pe, got, want)
		}
	}
}

func FuzzDecodeStageRequest(f *testing.F) {
	f.Add(encodeStageRequest(&stageRequest{Config: JobConfig{Argv: []string{"/bin/sh"}, Env: []string{"A=1"}}}))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeStageRequest(b)
		if err != nil {
			return
		}
		// What was taken encodes back to the same bytes.
		if got := encodeStageRequest(req); string(got) != string(b) {
			t.Fatalf("re-encoded %x, was %x", got, b)
		}
	})
}

// TestStageWireIsProtocol holds the wire to StageProtocol: a request's
// bytes, and the fields that travel, are those of this protocol. When it
// fails, the wire changed: bump StageProtocol, then update wantFields and
// the bytes here. (A stage and a runner of different builds then refuse
// each other openly instead of reading each other wrong.)
func TestStageWireIsProtocol(t *testing.T) {
	const protocol = 3
	wantFields := map[string][]string{
		"stageRequest": {"Config", "TTY", "HasHome", "Fail", "FailCode"},
		"JobConfig":    {"Argv", "Env", "Cwd", "Home", "Script", "TTY", "Policy", "ForceFail", "Walls"},
		"Policy":       {"Enabled", "RW", "RO", "RWDev", "NetRestrict", "NetConnectTCP"},
		"Walls":        {"LimitCaps", "KeepCaps", "Seccomp", "NewIPC"},
	}
	for _, v := range []any{stageRequest{}, JobConfig{}, Policy{}, Walls{}} {
		typ := reflect.TypeOf(v)
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !reflect.DeepEqual(got, wantFields[typ.Name()]) {
			t.Errorf("%s has the fields %v, protocol %d carries %v: make the new ones travel (stagewire_linux.go), bump StageProtocol and update this test",
				typ.Name(), got, protocol, wantFields[typ.Name()])
		}
	}
	req := &stageRequest{
		Config: JobConfig{Argv: []string{"a"}, Env: []string{"E=1", "F=2"}, Cwd: "c", Home: "h", Script: "s", TTY: "t",
			Policy: Policy{Enabled: true, RW: []string{"w"}, RO: []string{"r"}, RWDev: []string{"d"}, NetRestrict: true, NetConnectTCP: []uint16{18080, 3000}}, ForceFail: "x",
			Walls: Walls{LimitCaps: true, KeepCaps: 0x1_0000_0003, Seccomp: []byte{9, 8}, NewIPC: true}},
		TTY: true, HasHome: true, Fail: "f", FailCode: 125,
	}
	const want = "033f" + "7d000000" +
		"0100000066" + "0100000063" + "0100000068" + "0100000073" + "0100000074" + "0100000078" +
		"01000000" + "0100000061" +
		"02000000" + "03000000453d31" + "03000000463d32" +
		"01000000" + "0100000077" + "01000000" + "0100000072" + "01000000" + "0100000064" +
		"0300000001000000" + "02000000" + "0908" + "02000000" + "a046" + "b80b"
	got := hex.EncodeToString(encodeStageRequest(req))
	if got != want || StageProtocol != protocol {
		t.Fatalf("protocol %d (this test holds %d) encodes\n %s\nwas\n %s\nthe wire changed: bump StageProtocol and update this test", StageProtocol, protocol, got, want)
	}
}

// A stage of another protocol refuses the request, says which protocols
// met, and runs nothing: the job's program never starts and its output
// stays empty (the descriptors of another protocol's request are not the
// stage's to use).
func TestStageRefusesAnotherProtocol(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	devNull, _ := os.Open(os.DevNull)
	defer devNull.Close()
	cwd, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cwd.Close()
	stage, err := StartStage(exe, &syscall.SysProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer stage.Close()
	body := encodeStageRequest(&stageRequest{Config: JobConfig{
		Argv: []string{"/bin/sh", "-c", "echo ran; : > " + marker}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: dir,
	}})
	body[0] = StageProtocol + 1 // a runner of the next protocol
	st := stage.handOver([]int{int(devNull.Fd()), int(outW.Fd()), int(outW.Fd()), int(cwd.Fd())}, body)
	outW.Close()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(stage.PID, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	var pe *StageProtocolError
	if !errors.As(st.Err, &pe) || pe.Stage != StageProtocol || pe.Runner != StageProtocol {
		t.Fatalf("Started.Err = %v, want a StageProtocolError (stage %d, runner %d)", st.Err, StageProtocol, StageProtocol)
	}
	if st.Code != ExitSetupFailed || ws.ExitStatus() != ExitSetupFailed {
		t.Fatalf("code %d, stage exit %v: want %d", st.Code, ws, ExitSetupFailed)
	}
	out, _ := io.ReadAll(outR)
	if len(out) != 0 {
		t.Fatalf("the refused job's output: %q", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the job of a refused request ran")
	}
}

// What encoding/json writes for what was applied and for a reply is read
// by hand as encoding/json reads it.
func TestStageAnswersReadAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 2000; i++ {
		a := Applied{
			Enabled: r.IntN(2) == 0, ABI: r.IntN(3) * r.IntN(9), Errata: r.IntN(2) * r.IntN(4), Reason: randString(r),
			Error: randString(r), HandledFS: randList(r), ScopeSignal: r.IntN(2) == 0, Notes: randList(r),
		}
		for n := r.IntN(4); n > 0; n-- {
			a.Rules = append(a.Rules, AppliedRule{Path: randString(r), Access: randList(r)})
		}
		for n := r.IntN(3); n > 0; n-- {
			a.Skipped = append(a.Skipped, SkippedPath{Path: randString(r), Reason: randString(r)})
		}
		b, _ := json.Marshal(a)
		var want Applied
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := decodeApplied(b)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v (%v)\nwant %+v", b, got, ok, want)
		}
		line, _ := json.Marshal(map[string]any{"applied": json.RawMessage(b), "code": r.IntN(256), "err": randString(r), "stage_protocol": r.IntN(3)})
		var wantA struct {
			Applied       json.RawMessage `json:"applied"`
			Code          int             `json:"code"`
			Err           string          `json:"err"`
			StageProtocol int             `json:"stage_protocol"`
		}
		if err := json.Unmarshal(line, &wantA); err != nil {
			t.Fatal(err)
		}
		gotA, ok := decodeStageAnswer(line)
		if !ok || string(gotA.Applied) != string(wantA.Applied) || gotA.Code != wantA.Code || gotA.Err != wantA.Err || gotA.StageProtocol != wantA.StageProtocol {
			t.Fatalf("%s:\n got %+v (%v)\nwant %+v", line, gotA, ok, wantA)
		}
	}
	for _, b := range []string{`{"enabled":"yes"}`, `{"rules":[{"path":1}]}`, `{"abi":1.5}`, `{"notes":"x"}`, `[]`, `{"enabled":true`} {
		if _, ok := decodeApplied([]byte(b)); ok {
			t.Errorf("%s taken", b)
		}
	}
	for _, b := range []string{`{"rules":null,"skipped":[],"x":{"y":[1]}}`, `null`, `{"enabled":null,"abi":null}`} {
		var want Applied
		if err := json.Unmarshal([]byte(b), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := decodeApplied([]byte(b))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v (%v), want %+v", b, got, ok, want)
		}
	}
}

// Whatever decodeApplied takes, encoding/json reads the same way (keys in
// another case aside).
func FuzzDecodeApplied(f *testing.F) {
	f.Add([]byte(`{"enabled":true,"abi":6,"rules":[{"path":"/usr","access":["read_file"]}],"skipped":[{"path":"/x","reason":"gone"}]}`))
	f.Add([]byte(`{"notes":null,"rules":[],"other":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeApplied(b)
		if !ok || !bytes.Equal(bytes.ToLower(b), b) { // not taken, or keys perhaps in another case
			return
		}
		var want Applied
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("decodeApplied took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", b, got, want)
		}
	})
}
