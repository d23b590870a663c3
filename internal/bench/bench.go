package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Sizes are the counts and sizes of one run.
type Sizes struct {
	Runs     int   // run→done samples per mode (and under load)
	Parallel int   // runs of the parallel figure
	Exits    int   // exit-seen samples
	Lists    int   // list samples
	Reps     int   // repetitions of each throughput and snapshot figure
	StdioMiB int64 // stdio throughput volume
	PTYMiB   int64 // pty throughput volume
	LogMiB   int64 // page-read log size
	Pages    int   // page-read windows at random offsets
	HomeMB   int64 // snapshot Home size
}

// FullSizes are the counts of performance.md.
var FullSizes = Sizes{Runs: 200, Parallel: 400, Exits: 40, Lists: 200, Reps: 3,
	StdioMiB: 256, PTYMiB: 64, LogMiB: 256, Pages: 200, HomeMB: 150}

// QuickSizes finish in under a minute.
var QuickSizes = Sizes{Runs: 40, Parallel: 160, Exits: 10, Lists: 40, Reps: 3,
	StdioMiB: 32, PTYMiB: 16, LogMiB: 32, Pages: 40, HomeMB: 30}

// group is a set of figures measured together.
type group struct {
	name string
	desc string
	run  func(context.Context, *Env, Sizes) []*Row
}

// groups in the order they run: the idle RSS first, on a fresh server;
// the snapshot last, since it fills the Home.
var groups = []group{
	{"idle", "server RSS idle", benchIdleRSS},
	{"run", "run→done, pty and stdio", benchRun},
	{"parallel", "8 clients of pty runs", benchParallel},
	{"cpu", "CPU per job: server and runner against the job's own", benchCPU},
	{"exit", "exit seen", benchExit},
	{"load", "run→done under load", benchLoad},
	{"list", "list 200 finished jobs", benchList},
	{"stdio", "stdio throughput", benchStdioThroughput},
	{"pty", "pty throughput", benchPTYThroughput},
	{"nonline", "pty non-line output, with the screen and without it", benchNonLine},
	{"stream", "live output stream throughput, stdio and pty", benchStream},
	{"page", "page read", benchPageRead},
	{"inputwait", "input-wait, prompt to answer", benchInputWait},
	{"pipe", "stdin pipe round trip of one line", benchPipe},
	{"screen", "screen answer time", benchScreen},
	{"mcp", "MCP tool-call overhead over /v1", benchMCP},
	{"attach", "attach WebSocket: round trip and throughput through cat", benchAttach},
	{"memory", "memory per running job", benchJobMemory},
	{"egress", "egress proxy: request and download, intercepted and tunnelled, vs direct", benchEgress},
	{"files", "file routes: 40 MiB up and down, stat, archive of a tree", benchFiles},
	{"snapshot", "snapshot save and restore", benchSnapshot},
}

// GroupNames lists the names --only accepts, with what they measure.
func GroupNames() string {
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, "  %-9s %s\n", g.name, g.desc)
	}
	return b.String()
}

// Config of one bench invocation.
type Config struct {
	Bin   string   // directory of the shellctl binaries
	Quick bool     // QuickSizes instead of FullSizes
	Runs  int      // full runs of the table, each on a fresh server (< 1: 1)
	Only  []string // group names; empty = all
	Out   io.Writer
	Log   io.Writer // progress lines
}

// Run measures the selected figures Runs times, each time on a fresh
// server, and prints each run's table, then (for two runs or more) every
// figure's spread across the runs, the machine line and the summary. It
// returns the rows of every run; an error only when nothing could be
// measured.
func Run(ctx context.Context, c Config) ([][]*Row, error) {
	for _, n := range c.Only {
		if !slices.ContainsFunc(groups, func(g group) bool { return g.name == n }) {
			return nil, fmt.Errorf("unknown figure group %q; known:\n%s", n, GroupNames())
		}
	}
	runs := max(c.Runs, 1)
	if c.wantsGroup("snapshot") {
		sizes := FullSizes
		if c.Quick {
			sizes = QuickSizes
		}
		// Before anything runs: the group comes last, minutes in.
		if err := checkSnapshotSpace(benchTempDir(), sizes); err != nil {
			return nil, err
		}
	}
	cpu, cores := CPUModel(), runtime.NumCPU()
	mode := "full"
	if c.Quick {
		mode = "quick"
	}
	machine := fmt.Sprintf("%s, %d cores, %s/%s, kernel %s", cpu, cores, runtime.GOOS, runtime.GOARCH, kernelRelease())
	load0 := loadAvg()
	began := time.Now()
	fmt.Fprintf(c.Out, "shellctl bench (%s, %d run%s) on %s, %s at start, %s\n", mode, runs, plural(runs), machine, load0, began.UTC().Format(time.RFC3339))

	var all [][]*Row
	for k := 0; k < runs && ctx.Err() == nil; k++ {
		rows, err := runOnce(ctx, c, k, runs)
		if err != nil && len(rows) == 0 {
			if len(all) == 0 {
				return nil, err
			}
			fmt.Fprintf(c.Out, "run %d: %v\n", k+1, err)
			break
		}
		if err != nil {
			fmt.Fprintf(c.Out, "run %d: %v\n", k+1, err)
		}
		all = append(all, rows)
	}
	load1 := loadAvg()
	fmt.Fprintf(c.Out, "\nmachine: %s; %s at start, %s at end; %d run%s in %.0f s\n", machine, load0, load1, len(all), plural(len(all)), time.Since(began).Seconds())
	if len(all) >= 2 {
		sp := Spread(all)
		fmt.Fprintf(c.Out, "\nspread over %d runs (each on a fresh server; ratio = runtime p50 / floor p50 of the same run, or their difference):\n\n", len(all))
		WriteSpread(c.Out, sp)
		fmt.Fprintln(c.Out)
		fmt.Fprintln(c.Out, SpreadSummary(sp, len(all), c.Quick, cpu, cores))
	} else if len(all) == 1 {
		fmt.Fprintln(c.Out, Summary(all[0], c.Quick, cpu, cores))
	}
	return all, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// runOnce measures the selected figures on a fresh server and prints
// their table.
func runOnce(ctx context.Context, c Config, k, runs int) ([]*Row, error) {
	sizes := FullSizes
	if c.Quick {
		sizes = QuickSizes
	}
	e, err := StartEnv(ctx, c.Bin)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	fmt.Fprintf(c.Out, "\nrun %d of %d: server %s (pid %d), state dir and Home under %s, %s\n", k+1, runs, e.URL, e.PID, e.Dir, loadAvg())

	var rows []*Row
	for _, g := range groups {
		if len(c.Only) > 0 && !slices.Contains(c.Only, g.name) &&
			!(g.name == "idle" && slices.Contains(c.Only, "memory")) { // memory includes the idle RSS
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if !e.Alive() {
			return rows, fmt.Errorf("the server exited:\n%s", e.StderrTail())
		}
		start := time.Now()
		fmt.Fprintf(c.Log, "bench run %d/%d: %s…", k+1, runs, g.desc)
		got := g.run(ctx, e, sizes)
		fmt.Fprintf(c.Log, " %.1f s\n", time.Since(start).Seconds())
		if !e.Alive() {
			for _, r := range got {
				r.Notes = append(r.Notes, "the server exited during this figure:\n"+e.StderrTail())
			}
		}
		rows = append(rows, got...)
	}
	// The idle server again, after the other figures: what it keeps.
	if len(rows) > 0 && rows[0].Figure == idleFigure && rows[0].Runtime != nil && len(rows) > 1 && e.Alive() {
		tctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		e.TerminateRunning(tctx)
		cancel()
		if m, err := settledMem(e.PID); err == nil {
			rows[0].Notes = append(rows[0].Notes, fmt.Sprintf("idle again after the other figures: RSS %.1f MiB, PSS %.1f MiB; runtime processes %s, RSS %.1f MiB",
				mib(m.serverRSS), mib(m.serverPSS), m.kindList(), mib(m.procRSS)))
		}
	}
	fmt.Fprintln(c.Out)
	WriteTable(c.Out, rows)
	fmt.Fprintln(c.Out)
	fmt.Fprintf(c.Out, "run %d: %s; %s at end\n", k+1, Summary(rows, c.Quick, CPUModel(), runtime.NumCPU()), loadAvg())
	return rows, nil
}

// kernelRelease is the running kernel's release.
func kernelRelease() string {
	raw, err := readFileString("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(raw)
}

func loadAvg() string {
	raw, err := readFileString("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(raw)
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ")
}
