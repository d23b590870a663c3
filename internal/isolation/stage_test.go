package isolation

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadApplied(t *testing.T) {
	a, err := ReadApplied(strings.NewReader(`{"enabled":true,"abi":7,"rules":[{"path":"/usr","access":["execute"]}]}` + "\n"))
	if err != nil || !a.Enabled || a.ABI != 7 || len(a.Rules) != 1 || a.Rules[0].Path != "/usr" {
		t.Fatalf("ReadApplied = %+v, %v", a, err)
	}
	if _, err := ReadApplied(strings.NewReader("")); !errors.Is(err, ErrNoApplied) {
		t.Errorf("empty: got %v, want ErrNoApplied", err)
	}
	if _, err := ReadApplied(strings.NewReader(`{"enabled":tr`)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: got %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadApplied(strings.NewReader("garbage\n")); err == nil {
		t.Error("garbage: no error")
	}
	big := strings.Repeat("x", maxAppliedBytes+10)
	if _, err := ReadApplied(strings.NewReader(big)); err == nil {
		t.Error("oversized: no error")
	}
}

func TestStageCommandShape(t *testing.T) {
	cmd, send, appliedR, err := StageCommand("/path/to/runner", StageConfig{Argv: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer appliedR.Close()
	if got := strings.Join(cmd.Args, " "); got != "/path/to/runner "+StageArg {
		t.Errorf("args = %q", got)
	}
	if cmd.Env == nil || len(cmd.Env) != 0 {
		t.Errorf("stage env = %#v, want empty and non-nil", cmd.Env)
	}
	if len(cmd.ExtraFiles) != 2 {
		t.Errorf("extra files = %d, want 2", len(cmd.ExtraFiles))
	}
	if err := send(); err == nil {
		t.Error("send before Start: no error")
	}
	if err := send(); err == nil {
		t.Error("second send: no error")
	}
}
