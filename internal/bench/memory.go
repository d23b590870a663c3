package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

const idleFigure = "server RSS idle"

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// runtimeProcs returns the processes of the runtime below the server (the
// runners, a pool of idle runners if the server keeps one, and any helper
// of ours: executables named shellctl*), not the jobs' own processes.
func runtimeProcs(server int) []int {
	var out []int
	for _, pid := range Descendants(server) {
		if strings.HasPrefix(ExeBase(pid), "shellctl") {
			out = append(out, pid)
		}
	}
	return out
}

// procKind names a runtime process: its executable, plus its first
// argument when that is an internal mode such as __stage or --pool.
func procKind(pid int) string {
	k := ExeBase(pid)
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err == nil {
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) > 1 && strings.HasPrefix(args[1], "__") {
			k += " " + args[1]
		} else if slicesContains(args, "--pool") {
			k += " --pool"
		}
	}
	return k
}

func slicesContains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// memSnap is the memory of the server and of its runtime processes.
type memSnap struct {
	serverRSS, serverPSS int64
	procRSS, procPSS     int64
	procs                int
	kinds                map[string]int
	perRSS               []float64
}

func (m memSnap) kindList() string {
	var kl []string
	for k, c := range m.kinds {
		kl = append(kl, fmt.Sprintf("%s ×%d", k, c))
	}
	sort.Strings(kl)
	if len(kl) == 0 {
		return "none"
	}
	return strings.Join(kl, ", ")
}

// settledMem waits until the number of runtime processes stays the same
// for 300 ms (at most 5 s), then reads the memory.
func settledMem(server int) (memSnap, error) {
	last, same := -1, 0
	for i := 0; i < 50 && same < 3; i++ {
		n := len(runtimeProcs(server))
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := memSnap{kinds: map[string]int{}}
	var err error
	if m.serverRSS, err = RSS(server); err != nil {
		return m, err
	}
	if m.serverPSS, err = PSS(server); err != nil {
		return m, err
	}
	for _, p := range runtimeProcs(server) {
		a, err1 := RSS(p)
		b, err2 := PSS(p)
		if err1 != nil || err2 != nil {
			continue // ended in between
		}
		m.procRSS += a
		m.procPSS += b
		m.procs++
		m.kinds[procKind(p)]++
		m.perRSS = append(m.perRSS, mib(a))
	}
	return m, nil
}

// benchIdleRSS reads the server's RSS; it runs first, on a fresh server.
func benchIdleRSS(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: idleFigure, Unit: MiB, Target: Target{ValueAtMost, 20}}
	m, err := settledMem(e.PID)
	if err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	r.Runtime = One(mib(m.serverRSS))
	note := fmt.Sprintf("fresh server, before any job: PSS %.1f MiB", mib(m.serverPSS))
	if m.procs > 0 {
		note += fmt.Sprintf("; idle runtime processes %s: RSS %.1f MiB, PSS %.1f MiB in all", m.kindList(), mib(m.procRSS), mib(m.procPSS))
	}
	r.Notes = append(r.Notes, note)
	return []*Row{r}
}

func benchJobMemory(ctx context.Context, e *Env, s Sizes) []*Row {
	const n = 32
	rssRow := &Row{Figure: "memory per running job, RSS", Unit: MiB, Target: Target{ValueAtMost, 3}}
	pssRow := &Row{Figure: "memory per running job, PSS", Unit: MiB, Target: Target{ValueAtMost, 1}}
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
	before, err := settledMem(e.PID)
	if err != nil {
		return fail(err)
	}
	ids, err := e.StartIdleN(ctx, n, "pty", "sleep 600")
	defer e.Terminate(context.Background(), ids)
	if err != nil {
		return fail(fmt.Errorf("start %d sleep jobs: %w", n, err))
	}
	after, err := settledMem(e.PID)
	if err != nil {
		return fail(err)
	}
	if after.procs == 0 {
		return fail(fmt.Errorf("no runtime process found below the server (pid %d)", e.PID))
	}
	// Added memory: the runtime processes' growth (an idle pool, if any, is
	// in both readings) plus the server's growth; a shrink of the server
	// (its GC returning pages) does not make the jobs cheaper.
	dRSS := after.procRSS - before.procRSS + max(0, after.serverRSS-before.serverRSS)
	dPSS := after.procPSS - before.procPSS + max(0, after.serverPSS-before.serverPSS)
	rssRow.Runtime = One(mib(dRSS) / n)
	pssRow.Runtime = One(mib(dPSS) / n)
	rssRow.Notes = append(rssRow.Notes, fmt.Sprintf("%d `sleep 600` pty jobs; runtime processes before: %s (RSS %.1f MiB); with the jobs: %s (RSS %.1f MiB, %s each); server RSS %.1f → %.1f MiB",
		n, before.kindList(), mib(before.procRSS), after.kindList(), mib(after.procRSS), FormatStats(Summarize(after.perRSS), MiB), mib(before.serverRSS), mib(after.serverRSS)))
	pssRow.Notes = append(pssRow.Notes, fmt.Sprintf("runtime processes PSS %.1f → %.1f MiB, server PSS %.1f → %.1f MiB",
		mib(before.procPSS), mib(after.procPSS), mib(before.serverPSS), mib(after.serverPSS)))
	return []*Row{rssRow, pssRow}
}
