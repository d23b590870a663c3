package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/creack/pty"

	"github.com/shellctl/shellctl/internal/client"
)

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// RunToDone runs script and follows it with wait until the job is done; it
// returns the time from the request to the answer that says done, and the
// job id.
func (e *Env) RunToDone(ctx context.Context, mode, script string, timeout float64) (time.Duration, string, error) {
	start := time.Now()
	end, id, _, err := e.runAll(ctx, mode, script, timeout)
	if end.IsZero() {
		return 0, id, err
	}
	return end.Sub(start), id, err
}

// runAll runs script and follows it with wait until the job is done: when
// the answer that says done was read (zero if none was), the job id, and
// all the output. An end other than exit 0 is an error.
func (e *Env) runAll(ctx context.Context, mode, script string, timeout float64) (time.Time, string, string, error) {
	res, err := e.Client.Run(ctx, client.RunRequest{Script: script, Mode: mode, Timeout: timeout})
	if err != nil {
		return time.Time{}, "", "", err
	}
	id, out := res.JobID, res.Output
	for !res.Done {
		t := timeout
		if res, err = e.Client.Wait(ctx, id, client.WaitRequest{Offset: res.Offset, Timeout: &t}); err != nil {
			return time.Time{}, id, out, err
		}
		out += res.Output
	}
	end := time.Now()
	if res.Status != "exited" || res.ExitCode == nil || *res.ExitCode != 0 {
		return end, res.JobID, out, fmt.Errorf("job %s of %q ended %s (exit %v)", res.JobID, script, res.Status, fmtExit(res.ExitCode))
	}
	return end, res.JobID, out, nil
}

func fmtExit(c *int) string {
	if c == nil {
		return "null"
	}
	return fmt.Sprint(*c)
}

// StartIdle starts a job that prints nothing (e.g. sleep 600) and returns
// its id once it runs.
func (e *Env) StartIdle(ctx context.Context, mode, script string) (string, error) {
	res, err := e.Client.Run(ctx, client.RunRequest{Script: script, Mode: mode, Timeout: 0.01})
	if err != nil {
		return "", err
	}
	for i := 0; res.Status != "running"; i++ {
		if res.Done {
			return res.JobID, fmt.Errorf("job %s of %q ended %s", res.JobID, script, res.Status)
		}
		if i > 500 {
			return res.JobID, fmt.Errorf("job %s of %q still %s after 5 s", res.JobID, script, res.Status)
		}
		time.Sleep(10 * time.Millisecond)
		st, err := e.Client.Status(ctx, res.JobID)
		if err != nil {
			return res.JobID, err
		}
		res.Status, res.Done = st.Status, st.Done
	}
	return res.JobID, nil
}

// StartIdleN starts n idle jobs, 4 at a time.
func (e *Env) StartIdleN(ctx context.Context, n int, mode, script string) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	parallel(4, n, func(i int) { ids[i], errs[i] = e.StartIdle(ctx, mode, script) })
	var out []string
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out, errors.Join(errs...)
}

// RunUntilDone starts a job without waiting for its output and polls its
// status until it is done, at an interval of about 1/200 of the elapsed
// time (1..20 ms), so the error stays under 0.5 % of long runs. It returns
// the time from the request to the status that says done.
func (e *Env) RunUntilDone(ctx context.Context, mode, script string) (time.Duration, string, error) {
	start := time.Now()
	res, err := e.Client.Run(ctx, client.RunRequest{Script: script, Mode: mode, Timeout: 0.001, OutputLimit: 1})
	if err != nil {
		return 0, "", err
	}
	done, status, code := res.Done, res.Status, res.ExitCode
	for !done {
		iv := time.Since(start) / 200
		iv = max(time.Millisecond, min(iv, 20*time.Millisecond))
		time.Sleep(iv)
		st, err := e.Client.Status(ctx, res.JobID)
		if err != nil {
			return 0, res.JobID, err
		}
		done, status, code = st.Done, st.Status, st.ExitCode
	}
	d := time.Since(start)
	if status != "exited" || code == nil || *code != 0 {
		return d, res.JobID, fmt.Errorf("job %s of %q ended %s (exit %s)", res.JobID, script, status, fmtExit(code))
	}
	return d, res.JobID, nil
}

// ExecFloor runs bash -c script with plain exec and returns its time.
func ExecFloor(script string) (time.Duration, error) {
	start := time.Now()
	_, err := exec.Command("bash", "-c", script).Output()
	return time.Since(start), err
}

// PTYFloor runs bash -c script in a new PTY (200×50, as a job's default
// terminal), reads it to EOF and waits for it; it returns the time and the
// bytes read.
func PTYFloor(script string) (time.Duration, int64, error) {
	start := time.Now()
	end, _, n, err := ptyFloorRun(script, false)
	return end.Sub(start), n, err
}

// ptyFloorOutput is PTYFloor's run of script, returning when it was
// reaped and its output.
func ptyFloorOutput(script string) (time.Time, string, error) {
	end, out, _, err := ptyFloorRun(script, true)
	return end, string(out), err
}

// ptyFloorRun runs bash -c script in a bare PTY until it ends: when it
// was reaped, its output when keep, and how many bytes it wrote.
func ptyFloorRun(script string, keep bool) (time.Time, []byte, int64, error) {
	cmd := exec.Command("bash", "-c", script)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 200, Rows: 50})
	if err != nil {
		return time.Time{}, nil, 0, err
	}
	buf := make([]byte, 64<<10)
	var out []byte
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if keep {
			out = append(out, buf[:k]...)
		}
		if err != nil {
			break // EIO once the last slave fd closes, or EOF
		}
	}
	f.Close()
	werr := cmd.Wait()
	end := time.Now()
	if werr != nil && !errors.Is(werr, io.EOF) {
		return end, out, n, werr
	}
	return end, out, n, nil
}
