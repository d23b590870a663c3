package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const echoHi = "echo hi"

// runDone measures n runs of echo hi to done in mode ("200 times in a
// row") and n of its floor (a bare PTY for pty, plain exec for stdio), in
// alternating blocks of runDoneBlock. The runtime's runs of a block follow
// each other back to back, so each pays for what the runs before it left
// to do (the warm pool's refill: a runner and its stage started for the
// next job). The floor's block starts once the server has been idle for
// runDoneSettle, so none of that work is timed as the machine's floor:
// interleaved one to one, a floor run right after a job's answer shared
// the cores with that job's refill, and on a machine where starting a
// process is slow it took up to twice as long as on a quiet one, which
// flattered the ratio.
func runDone(ctx context.Context, e *Env, mode string, n int) ([]float64, []float64, error) {
	floor := func() (time.Duration, error) {
		if mode == "pty" {
			d, _, err := PTYFloor(echoHi)
			return d, err
		}
		return ExecFloor(echoHi)
	}
	var rt, fl []float64
	for i := 0; i < 5; i++ { // warm-up rounds
		if _, _, err := e.RunToDone(ctx, mode, echoHi, 30); err != nil {
			return nil, nil, err
		}
		if _, err := floor(); err != nil {
			return nil, nil, fmt.Errorf("floor: %w", err)
		}
	}
	for len(rt) < n {
		b := min(runDoneBlock, n-len(rt))
		for i := 0; i < b; i++ {
			d, _, err := e.RunToDone(ctx, mode, echoHi, 30)
			if err != nil {
				return nil, nil, err
			}
			rt = append(rt, ms(d))
		}
		if err := settle(ctx, runDoneSettle); err != nil {
			return rt, nil, err
		}
		for i := 0; i < b; i++ {
			f, err := floor()
			if err != nil {
				return rt, nil, fmt.Errorf("floor: %w", err)
			}
			fl = append(fl, ms(f))
		}
	}
	return rt, fl, nil
}

// runDone's blocks: see runDone.
const (
	runDoneBlock  = 20
	runDoneSettle = 200 * time.Millisecond
)

// settle waits d with nothing running (or until ctx ends).
func settle(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func benchRun(ctx context.Context, e *Env, s Sizes) []*Row {
	var rows []*Row
	for _, m := range []struct{ mode, figure, floor string }{
		{"pty", "run→done, pty", "PTY"},
		{"stdio", "run→done, stdio", "exec"},
	} {
		r := &Row{Figure: m.figure, Unit: Millis, Target: Target{RatioAtMost, 1.5}}
		rt, fl, err := runDone(ctx, e, m.mode, s.Runs)
		if err != nil && rt == nil {
			r.Err = err.Error()
		} else if err != nil {
			r.Runtime, r.FloorErr = Summarize(rt), err.Error()
		} else {
			r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
			r.Notes = append(r.Notes, fmt.Sprintf("%d runs of `%s`, floor `bash -c '%s'` in a %s; alternating blocks of %d, the runtime's back to back, the floor's after the server was idle %v (so the warm pool's refill after the runtime's last run is not timed as the floor)", len(rt), echoHi, echoHi, map[string]string{"pty": "bare PTY", "stdio": "plain exec"}[m.mode], runDoneBlock, runDoneSettle))
		}
		rows = append(rows, r)
	}
	return rows
}

func benchParallel(ctx context.Context, e *Env, s Sizes) []*Row {
	const clients = 8
	r := &Row{Figure: "parallel, 8 clients", Unit: JobsPerSec, Target: Target{RatioAtLeast, 0.6}}
	// Warm up the 8 connections.
	parallel(clients, clients, func(int) { e.RunToDone(ctx, "pty", echoHi, 30) })

	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	lat := make([]float64, s.Parallel)
	start := time.Now()
	parallel(clients, s.Parallel, func(i int) {
		d, _, err := e.RunToDone(ctx, "pty", echoHi, 30)
		if err != nil {
			failed.Add(1)
			once.Do(func() { firstErr = err })
			return
		}
		lat[i] = ms(d)
	})
	el := time.Since(start)
	if f := failed.Load(); f > 0 {
		r.Err = fmt.Sprintf("%d of %d runs failed, first: %v", f, s.Parallel, firstErr)
		return []*Row{r}
	}
	r.Runtime = One(float64(s.Parallel) / el.Seconds())

	start = time.Now()
	parallel(clients, s.Parallel, func(i int) {
		if _, _, err := PTYFloor(echoHi); err != nil {
			once.Do(func() { firstErr = err })
			failed.Add(1)
		}
	})
	if failed.Load() > 0 {
		r.FloorErr = firstErr.Error()
	} else {
		r.Floor = One(float64(s.Parallel) / time.Since(start).Seconds())
	}
	ls := Summarize(lat)
	r.Notes = append(r.Notes, fmt.Sprintf("%d pty runs of `%s`; per run %s; floor: the same spawns in bare PTYs from 8 goroutines",
		s.Parallel, echoHi, FormatStats(ls, Millis)))
	return []*Row{r}
}

// exitScript ends with a program that prints the time and exits: the
// end of its job is timed from that stamp, the job's last act, to the
// moment the waiting client has the answer that says done.
const exitScript = "sleep 0.2; exec date +%s%N"

// benchExit times the end of a job (the "exit seen": the process's
// exit to a waiting client): a pty job's last program stamps the time and
// exits, and the waiting run's answer is timed from that stamp; the floor
// is the same script in a bare PTY, timed from the stamp to its reaping.
// The whole run of the same script is in the notes: it holds the start
// too.
func benchExit(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: "exit seen, pty", Unit: Millis, Target: Target{DiffAtMost, 2}}
	var rt, fl, rtWhole, flWhole []float64
	for i := 0; i < s.Exits; i++ {
		start := time.Now()
		end, _, out, err := e.runAll(ctx, "pty", exitScript, 5)
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		lag, err := sinceStamp(out, end)
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		fstart := time.Now()
		fend, fout, err := ptyFloorOutput(exitScript)
		if err == nil {
			var flag float64
			if flag, err = sinceStamp(fout, fend); err == nil {
				fl, flWhole = append(fl, flag), append(flWhole, ms(fend.Sub(fstart)))
			}
		}
		if err != nil {
			r.FloorErr = err.Error()
			r.Runtime = Summarize(append(rt, lag))
			return []*Row{r}
		}
		rt, rtWhole = append(rt, lag), append(rtWhole, ms(end.Sub(start)))
	}
	r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
	w, fw := Summarize(rtWhole), Summarize(flWhole)
	r.Notes = append(r.Notes,
		fmt.Sprintf("%d pty jobs of `%s` (timeout 5): from the time `date` printed, its last act, to the run's answer saying done, vs `bash -c` of the same in a bare PTY, from the stamp to its reaping; interleaved; ratio column = p50 difference", s.Exits, exitScript),
		fmt.Sprintf("the whole run of the same, request to answer (start included): p50 %.1f ms, floor %.1f ms (+%.2f ms)", w.P50, fw.P50, w.P50-fw.P50))
	return []*Row{r}
}

// sinceStamp is the time from the last line of out, nanoseconds since
// the epoch (date +%s%N), to end, in milliseconds.
func sinceStamp(out string, end time.Time) (float64, error) {
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, fmt.Errorf("no time stamp in the output %q", out)
	}
	ns, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the output %q does not end with a time stamp: %v", out, err)
	}
	return ms(end.Sub(time.Unix(0, ns))), nil
}

func benchLoad(ctx context.Context, e *Env, s Sizes) []*Row {
	const idle = 32
	r := &Row{Figure: "under load, 32 running", Unit: Millis, Target: Target{RatioAtMost, 1.10}}
	unloaded, _, err := runDone(ctx, e, "pty", s.Runs)
	if err != nil && unloaded == nil {
		r.Err = "unloaded: " + err.Error()
		return []*Row{r}
	}
	ids, err := e.StartIdleN(ctx, idle, "pty", "sleep 600")
	defer e.Terminate(context.Background(), ids)
	if err != nil {
		r.Err = fmt.Sprintf("start %d sleep jobs: %v", idle, err)
		return []*Row{r}
	}
	var loaded []float64
	for i := -5; i < s.Runs; i++ {
		d, _, err := e.RunToDone(ctx, "pty", echoHi, 30)
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		if i >= 0 {
			loaded = append(loaded, ms(d))
		}
	}
	r.Runtime, r.Floor = Summarize(loaded), Summarize(unloaded)
	r.Notes = append(r.Notes, fmt.Sprintf("pty run→done of `%s` with %d `sleep 600` pty jobs running; floor = the same without them, measured just before", echoHi, idle))
	return []*Row{r}
}

func benchList(ctx context.Context, e *Env, s Sizes) []*Row {
	const want = 200
	r := &Row{Figure: "list 200 finished", Unit: Millis, Target: Target{ValueAtMost, 5}}
	have, err := e.Client.List(ctx, "exited", want)
	if err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	if missing := want - len(have); missing > 0 {
		var failed atomic.Int64
		parallel(4, missing, func(int) {
			if _, _, err := e.RunToDone(ctx, "stdio", "true", 30); err != nil {
				failed.Add(1)
			}
		})
		if failed.Load() > 0 {
			r.Err = fmt.Sprintf("%d of %d jobs to list failed", failed.Load(), missing)
			return []*Row{r}
		}
	}
	all, err := e.Client.List(ctx, "", want)
	if err != nil || len(all) != want {
		r.Err = fmt.Sprintf("list answered %d jobs (%v), want %d", len(all), err, want)
		return []*Row{r}
	}
	get := func(path string) (time.Duration, error) {
		start := time.Now()
		status, _, err := e.Client.Do(ctx, http.MethodGet, path, nil)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("GET %s: %d", path, status)
		}
		return time.Since(start), err
	}
	var rt, fl []float64
	for i := -5; i < s.Lists; i++ {
		d, err := get("/v1/jobs?limit=200")
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		f, err := get("/healthz")
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		if i >= 0 {
			rt, fl = append(rt, ms(d)), append(fl, ms(f))
		}
	}
	r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
	total := "?"
	if n, err := countJobs(e.State); err == nil {
		total = fmt.Sprint(n)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d × GET /v1/jobs?limit=200 (%s jobs in the state dir); floor (informative) = GET /healthz on the same connection", s.Lists, total))
	return []*Row{r}
}
