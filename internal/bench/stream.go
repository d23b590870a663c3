package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// benchStream measures the live output stream (GET /v1/jobs/{id}/stream):
// a job of 100-byte text lines followed by one stream from offset 0, from
// the run request until the stream's end event has arrived with every
// byte, against the machine's floor for the same output (stdio: the job
// into a file; pty: read from a bare PTY).
func benchStream(ctx context.Context, e *Env, s Sizes) []*Row {
	var rows []*Row
	for _, c := range []struct {
		mode string
		mib  int64
	}{{"stdio", s.StdioMiB}, {"pty", s.PTYMiB}} {
		script := fmt.Sprintf("yes '%s' | head -c %dM", line99, c.mib)
		r := &Row{Figure: fmt.Sprintf("stream throughput, %s %d MiB", c.mode, c.mib), Unit: MBps, Target: Target{RatioAtLeast, 0.7}}
		n := c.mib << 20
		var rt, fl []float64
		var got int64
		for i := 0; i < s.Reps; i++ {
			d, size, err := streamJob(ctx, e, c.mode, script)
			if err != nil {
				r.Err = err.Error()
				break
			}
			got = size
			rt = append(rt, mbps(n, d))
			var f time.Duration
			if c.mode == "stdio" {
				file := filepath.Join(e.Tmp, "stream.out")
				f, err = ExecFloor(script + " > " + file)
				os.Remove(file)
			} else {
				f, _, err = PTYFloor(script)
			}
			if err != nil {
				r.FloorErr = err.Error()
			} else {
				fl = append(fl, mbps(n, f))
			}
		}
		r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
		floor := "the same into a file (`bash -c '… > file'`)"
		if c.mode == "pty" {
			floor = "the same read to EOF from a bare PTY"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%d × %s job `yes … | head -c %dM` followed live by one SSE stream from offset 0 (%d bytes of output.log, every one decoded by the client), run request to the end event, vs %s; rates on %d MiB", s.Reps, c.mode, c.mib, got, floor, c.mib))
		rows = append(rows, r)
	}
	return rows
}

// streamJob runs script and reads its stream to the end event; it returns
// the time from the run request and the bytes the stream carried.
func streamJob(ctx context.Context, e *Env, mode, script string) (time.Duration, int64, error) {
	start := time.Now()
	res, err := e.Client.Run(ctx, client.RunRequest{Script: script, Mode: mode, Timeout: 0.001, OutputLimit: 1})
	if err != nil {
		return 0, 0, err
	}
	defer e.Client.Delete(context.Background(), res.JobID, true, 1)
	sc := &client.Client{BaseURL: e.Client.BaseURL, Token: e.Client.Token, HTTP: e.HTTP}
	cw := &countWriter{}
	end, err := sc.Stream(ctx, res.JobID, client.StreamOptions{}).Copy(cw)
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("stream of job %s: %w", res.JobID, err)
	}
	if end.Status != "exited" || end.ExitCode == nil || *end.ExitCode != 0 || end.Offset != cw.n {
		return 0, 0, fmt.Errorf("stream of job %s ended %s after %d bytes", res.JobID, end.Data, cw.n)
	}
	return d, cw.n, nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
