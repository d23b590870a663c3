package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// runtimeProcs returns the processes of the runtime below the server (the
// runners and any helper of ours: executables named shellctl*), not the
// jobs' own processes.
func runtimeProcs(server int) []int {
	var out []int
	for _, pid := range Descendants(server) {
		if strings.HasPrefix(ExeBase(pid), "shellctl") {
			out = append(out, pid)
		}
	}
	return out
}

// benchIdleRSS reads the server's RSS; it runs first, on a fresh server.
func benchIdleRSS(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: "server RSS idle", Unit: MiB, Target: Target{ValueAtMost, 20}}
	time.Sleep(200 * time.Millisecond)
	rss, err := RSS(e.PID)
	if err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	r.Runtime = One(mib(rss))
	if pss, err := PSS(e.PID); err == nil {
		r.Notes = append(r.Notes, fmt.Sprintf("fresh server, before any job; PSS %.1f MiB", mib(pss)))
	}
	return []*Row{r}
}

func benchJobMemory(ctx context.Context, e *Env, s Sizes) []*Row {
	const n = 32
	rssRow := &Row{Figure: "memory per running job, RSS", Unit: MiB, Target: Target{ValueAtMost, 4}}
	pssRow := &Row{Figure: "memory per running job, PSS", Unit: MiB, Target: Target{ValueAtMost, 1.5}}
	fail := func(err error) []*Row {
		rssRow.Err, pssRow.Err = err.Error(), err.Error()
		return []*Row{rssRow, pssRow}
	}
	// Warm the server's paths of a job's life so that the baseline already
	// holds what every job touches once.
	for i := 0; i < 5; i++ {
		if _, _, err := e.RunToDone(ctx, "pty", echoHi, 30); err != nil {
			return fail(err)
		}
	}
	warm, err := e.StartIdleN(ctx, 4, "pty", "sleep 600")
	e.Terminate(ctx, warm)
	if err != nil {
		return fail(err)
	}
	for i := 0; i < 50 && len(runtimeProcs(e.PID)) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	rss0, err := RSS(e.PID)
	if err != nil {
		return fail(err)
	}
	pss0, err := PSS(e.PID)
	if err != nil {
		return fail(err)
	}

	ids, err := e.StartIdleN(ctx, n, "pty", "sleep 600")
	defer e.Terminate(context.Background(), ids)
	if err != nil {
		return fail(fmt.Errorf("start %d sleep jobs: %w", n, err))
	}
	time.Sleep(300 * time.Millisecond) // let the runners settle
	rss1, err1 := RSS(e.PID)
	pss1, err2 := PSS(e.PID)
	if err1 != nil || err2 != nil {
		return fail(fmt.Errorf("server memory: %v %v", err1, err2))
	}
	procs := runtimeProcs(e.PID)
	if len(procs) == 0 {
		return fail(fmt.Errorf("no runtime process found below the server (pid %d)", e.PID))
	}
	var rRSS, rPSS int64
	var perRSS []float64
	for _, p := range procs {
		a, err1 := RSS(p)
		b, err2 := PSS(p)
		if err1 != nil || err2 != nil {
			return fail(fmt.Errorf("runner %d memory: %v %v", p, err1, err2))
		}
		rRSS += a
		rPSS += b
		perRSS = append(perRSS, mib(a))
	}
	rssRow.Runtime = One(mib(rRSS+rss1-rss0) / n)
	pssRow.Runtime = One(mib(rPSS+pss1-pss0) / n)
	rssRow.Notes = append(rssRow.Notes, fmt.Sprintf("%d `sleep 600` pty jobs: %d runtime processes (%s each), server %+.1f MiB (%.1f → %.1f)",
		n, len(procs), FormatStats(Summarize(perRSS), MiB), mib(rss1-rss0), mib(rss0), mib(rss1)))
	pssRow.Notes = append(pssRow.Notes, fmt.Sprintf("runtime processes %.1f MiB PSS in all, server %+.1f MiB PSS", mib(rPSS), mib(pss1-pss0)))
	return []*Row{rssRow, pssRow}
}
