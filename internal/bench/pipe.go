package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// pipeLine is the line sent through cat: short, as a REPL's command is.
const pipeLine = "print(6*7)\n"

// benchPipe measures a stdio job's stdin pipe (extended-api.md §8): one
// line through `cat`, from the /input request to its answer carrying the
// line back, against the same line through a bare pipe into a local cat
// and back out of it.
func benchPipe(ctx context.Context, e *Env, s Sizes) []*Row {
	// Target (ours): p50 ≤ floor + 2 ms. Each line is one HTTP request
	// and a wait; issue 33's floor + 1 ms is for the WebSocket attach,
	// which has neither.
	r := &Row{Figure: "stdin pipe round trip, one line through cat", Unit: Millis, Target: Target{DiffAtMost, 2}}
	rt, err := pipeRoundTrips(ctx, e, s.Runs)
	if err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	fl, err := pipeFloor(s.Runs)
	r.Runtime = Summarize(rt)
	if err != nil {
		r.FloorErr = err.Error()
	} else {
		r.Floor = Summarize(fl)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d lines of %d bytes into one stdio job `cat` run with \"stdin\":\"pipe\", each a POST /input {\"text\",\"offset\",\"output_limit\":%d} answered once the whole line is back in output.log; floor: the same lines written to a local `cat`'s stdin pipe and read back from its stdout pipe",
		len(rt), len(pipeLine), len(pipeLine)-1))
	return []*Row{r}
}

// pipeRoundTrips sends n lines through a cat job and times each.
func pipeRoundTrips(ctx context.Context, e *Env, n int) ([]float64, error) {
	res, err := e.Client.Run(ctx, client.RunRequest{Script: "exec cat", Mode: "stdio", Stdin: "pipe", Timeout: 0.001, OutputLimit: 1})
	if err != nil {
		return nil, err
	}
	defer e.Client.Delete(context.Background(), res.JobID, true, 1)
	timeout := 10.0
	var off int64
	var out []float64
	for i := 0; i < n+5; i++ { // 5 warm-up lines
		start := time.Now()
		// A limit one byte short of the line: the answer comes as soon
		// as the whole line is past offset (a full window), not after
		// an idle flush.
		w, err := e.Client.Input(ctx, res.JobID, pipeLine, client.WaitRequest{Offset: off, Timeout: &timeout, OutputLimit: len(pipeLine) - 1})
		d := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("input to cat over its pipe: %w", err)
		}
		if !w.Truncated || w.Done {
			return nil, fmt.Errorf("input to cat over its pipe: answered without the line (done %v, output %q)", w.Done, w.Output)
		}
		off += int64(len(pipeLine))
		if i >= 5 {
			out = append(out, ms(d))
		}
	}
	return out, nil
}

// pipeFloor times n lines through a local cat over bare pipes.
func pipeFloor(n int) ([]float64, error) {
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait()
	defer in.Close()
	buf := make([]byte, len(pipeLine))
	var out []float64
	for i := 0; i < n+5; i++ {
		start := time.Now()
		if _, err := io.WriteString(in, pipeLine); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(outp, buf); err != nil {
			return nil, err
		}
		if i >= 5 {
			out = append(out, ms(time.Since(start)))
		}
	}
	return out, nil
}
