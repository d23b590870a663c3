package isolation

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startedStage starts a stage of this test binary and waits until it is
// parked on its config socket.
func startedStage(t testing.TB) *Stage {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStage(exe, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	return st
}

func waitExit(t testing.TB, st *Stage) unix.WaitStatus {
	t.Helper()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(st.PID(), &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	return ws
}

// A started stage runs the job it is handed, with the standard files that
// came with the config, in its own process group.
func TestStagePassesStandardFiles(t *testing.T) {
	dir := t.TempDir()
	st := startedStage(t)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	devNull, _ := os.Open(os.DevNull)
	defer devNull.Close()
	cfg := StageConfig{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; ps -o pgid= -p $$"}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: dir, Home: dir, Policy: Policy{Enabled: false}}
	if err := st.Send(cfg, [3]*os.File{devNull, outW, outW}); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	if _, err := st.Applied(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var out strings.Builder
	for {
		n, err := outR.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	ws := waitExit(t, st)
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %v, output %q", ws, out.String())
	}
	lines := strings.Fields(out.String())
	if len(lines) != 3 || lines[0] != "out" || lines[1] != "err" {
		t.Fatalf("output %q", out.String())
	}
	if pgid := lines[2]; pgid != itoa(st.PID()) {
		t.Fatalf("job's process group %s, want its own (%d)", pgid, st.PID())
	}
}

// A stage whose runner goes away before sending a job fails closed and
// exits without running anything.
func TestStageWithoutConfigFails(t *testing.T) {
	st := startedStage(t)
	st.Close()
	ws := waitExit(t, st)
	if ws.ExitStatus() != ExitSetupFailed {
		t.Fatalf("exit %v, want %d", ws, ExitSetupFailed)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n > 0 || i == len(b) {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// BenchmarkPrestartedStage times a job's start through a stage started
// ahead (the runner pool's path): from Send to the exec, and to the exit of
// /bin/true.
func BenchmarkPrestartedStage(b *testing.B) {
	dir := b.TempDir()
	for _, enabled := range []bool{true, false} {
		name := "isolation=off"
		if enabled {
			name = "isolation=on"
			if _, _, err := detectABI(); err != nil {
				continue
			}
		}
		b.Run(name, func(b *testing.B) {
			policy := DefaultPolicy()
			policy.Enabled = enabled
			cfg := StageConfig{Argv: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: dir, Home: dir, Policy: policy}
			devNull, _ := os.Open(os.DevNull)
			defer devNull.Close()
			var toExec, toExit time.Duration
			for b.Loop() {
				b.StopTimer()
				st := startedStage(b)
				time.Sleep(2 * time.Millisecond) // let it park, as a pooled stage would be
				b.StartTimer()
				t0 := time.Now()
				if err := st.Send(cfg, [3]*os.File{devNull, devNull, devNull}); err != nil {
					b.Fatal(err)
				}
				if _, err := st.Applied(); err != nil {
					b.Fatal(err)
				}
				toExec += time.Since(t0)
				waitExit(b, st)
				toExit += time.Since(t0)
			}
			b.ReportMetric(float64(toExec.Microseconds())/float64(b.N), "µs-to-exec")
			b.ReportMetric(float64(toExit.Microseconds())/float64(b.N), "µs-to-exit")
		})
	}
}
