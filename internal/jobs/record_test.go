package jobs

import (
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/store"
)

// Every reason the runner and the service record maps to the record's
// vocabulary, with a message that carries the detail or the limit.
func TestSpecReasonCoversEveryRecordedReason(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	asked := Limits{RuntimeMS: n(1500), OutputBytes: n(4096), MemoryBytes: n(64 << 20), Pids: n(50)}
	code := func(c int) *int { return &c }
	cases := []struct {
		status, reason string
		exit           *int
		sig            int
		want, inMsg    string
	}{
		{store.StatusExited, runner.ReasonExited, code(3), 0, "exited", "code 3"},
		{store.StatusExited, runner.ReasonSignal, code(130), 2, "signaled", "SIGINT"},
		{store.StatusTerminated, runner.ReasonTerminate, code(143), 15, "terminate_requested", "terminate"},
		{store.StatusTerminated, runner.ReasonDelete, code(143), 15, "delete_requested", "delete"},
		{store.StatusTerminated, runner.ReasonMaxRuntime, code(143), 15, "runtime_limit", "1500 ms"},
		{store.StatusTerminated, runner.ReasonMaxOutput, code(143), 15, "output_limit", "4096 bytes"},
		{store.StatusExited, runner.ReasonOOM, code(137), 9, "memory_limit", "67108864 bytes"},
		{store.StatusFailed, runner.ReasonStartFailed + ": fork: no memory", nil, 0, "start_failed", "fork: no memory"},
		{store.StatusExited, runner.ReasonExecFailed + ": exec /x: no such file", code(127), 0, "start_failed", "exec /x"},
		{store.StatusExited, runner.ReasonSetupFailed + ": landlock: refused", code(125), 0, "isolation_failed", "landlock: refused"},
		{store.StatusLost, runner.ReasonRunnerLost, nil, 0, "runner_lost", "runner died"},
		{store.StatusFailed, runner.ReasonStartupLost, nil, 0, "start_failed", "runner"},
		{store.StatusExited, runner.ReasonOutputFailed + ": write: no space left on device (10 bytes of output on disk, the rest dropped)", code(0), 0, "output_write_failed", "no space left"},
		{store.StatusExited, "", code(0), 0, "exited", "code 0"},
	}
	vocabulary := "exited signaled terminate_requested delete_requested runtime_limit output_limit memory_limit start_failed isolation_failed runner_lost output_write_failed"
	for _, c := range cases {
		got, msg := specReason(c.status, c.reason, c.exit, c.sig, asked)
		if got != c.want || !strings.Contains(msg, c.inMsg) {
			t.Errorf("specReason(%q, %q) = %q, %q; want %q with %q", c.status, c.reason, got, msg, c.want, c.inMsg)
		}
		if !strings.Contains(" "+vocabulary+" ", " "+got+" ") {
			t.Errorf("reason %q is not in the record's vocabulary", got)
		}
	}
	if got, msg := specReason(store.StatusRunning, "", nil, 0, asked); got != "" || msg != "" {
		t.Errorf("a running job has a reason: %q %q", got, msg)
	}
}

// The metrics and the log name a job's end as the record does.
func TestReasonLabelIsTheRecords(t *testing.T) {
	for _, c := range []struct{ status, reason, want string }{
		{store.StatusExited, runner.ReasonSignal, "signaled"},
		{store.StatusTerminated, runner.ReasonTerminate, "terminate_requested"},
		{store.StatusTerminated, runner.ReasonDelete, "delete_requested"},
		{store.StatusFailed, runner.ReasonStartFailed + ": exec /x: no such file", "start_failed"},
		{store.StatusTerminated, runner.ReasonMaxRuntime, "runtime_limit"},
	} {
		if got := ReasonLabel(c.status, c.reason); got != c.want {
			t.Errorf("ReasonLabel(%q, %q) = %q, want %q", c.status, c.reason, got, c.want)
		}
	}
}
