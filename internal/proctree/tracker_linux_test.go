//go:build linux

package proctree

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests re-execute the test binary as a "runner": it makes the tracker,
// starts /bin/sh -c $PT_SCRIPT in its own session, reaps with a wait4 loop on
// SIGCHLD calling Notify, and answers commands read from stdin, one line
// each. This is the shape of shellctl-runner, and it keeps the test process
// itself from becoming a subreaper.
const helperRole = "PROCTREE_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(helperRole) {
	case "runner":
		os.Exit(runnerHelper())
	case "bench":
		os.Exit(benchHelper())
	case "unreaped":
		os.Exit(unreapedHelper())
	case "sharedpids":
		lim, _, ok := SharedPidsLimit()
		fmt.Printf("%d %v\n", lim, ok)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runnerHelper() int {
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
		outMu.Unlock()
	}
	opts := Options{Name: os.Getenv("PT_NAME"), DisableCgroup: os.Getenv("PT_KIND") == KindSubreaper}
	opts.MemoryMax, _ = strconv.ParseInt(os.Getenv("PT_MEMORY_MAX"), 10, 64)
	opts.PidsMax, _ = strconv.ParseInt(os.Getenv("PT_PIDS_MAX"), 10, 64)
	tr, info, err := NewTracker(opts)
	if err != nil {
		say("error new tracker: %v", err)
		return 1
	}
	// Registered before the start, so no SIGCHLD is missed.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)

	null, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		say("error %v", err)
		return 1
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	// Born in the job's group, as the runner starts its jobs (its stage is
	// cloned into the group): a job moved in after it started may already
	// have forked, which is what Add is for, and TestAddMovesChildren…
	// tests that on its own. PT_ADD_AFTER_START=1 keeps the old way.
	if os.Getenv("PT_CGROUPFD") != "" || (info.Kind == KindCgroup2 && os.Getenv("PT_ADD_AFTER_START") == "") {
		fd, err := OpenCgroupFD(tr)
		if err != nil {
			say("error cgroup fd: %v", err)
			return 1
		}
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", os.Getenv("PT_SCRIPT")}, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{null.Fd(), null.Fd(), os.Stderr.Fd()},
		Sys:   sys,
	})
	if err != nil {
		say("error start: %v", err)
		return 1
	}
	if sys.UseCgroupFD {
		syscall.Close(sys.CgroupFD)
	}
	if ms, _ := strconv.Atoi(os.Getenv("PT_ADD_DELAY_MS")); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond) // let the script fork before Add
	}
	if err := tr.Add(pid); err != nil {
		say("error add: %v", err)
		return 1
	}
	mainDone := make(chan struct{})
	go func() {
		for range sigs {
			for {
				var ws syscall.WaitStatus
				wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if err != nil || wpid <= 0 {
					break
				}
				if wpid == pid {
					close(mainDone)
				}
				tr.Notify()
			}
		}
	}()
	js, _ := json.Marshal(info)
	say("ready %d %s", pid, js)

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "pids":
			p, err := tr.Pids()
			say("pids %s err=%v", joinInts(p), err)
		case "waitmain":
			<-mainDone
			say("mainexited")
		case "ladder":
			ms, _ := strconv.Atoi(arg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t0 := time.Now()
			err := Ladder(ctx, tr, pid, time.Duration(ms)*time.Millisecond)
			el := time.Since(t0)
			cancel()
			left, _ := tr.Pids()
			say("ladder %d %s %v", el.Microseconds(), joinInts(left), err)
		case "exempt":
			// A child of the runner that is not the job's (as its screen
			// process is): started outside the job's group.
			epid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "60"}, &syscall.ProcAttr{
				Files: []uintptr{null.Fd(), null.Fd(), os.Stderr.Fd()},
				Sys:   &syscall.SysProcAttr{Setsid: true},
			})
			if err == nil {
				err = tr.Exempt(epid)
			}
			say("exempted %d err=%v", epid, err)
		case "siggroup":
			g, sig, _ := strings.Cut(arg, " ")
			pg, _ := strconv.Atoi(g)
			sn, _ := strconv.Atoi(sig)
			n, err := SignalGroup(tr, pg, syscall.Signal(sn))
			say("siggroup %d err=%v", n, err)
		case "oom":
			say("oom %v", tr.OOMKilled())
		case "close":
			t0 := time.Now()
			err := tr.Close()
			say("close %d %v", time.Since(t0).Microseconds(), err)
		}
	}
	// stdin closed: the test is done (or failed); leave nothing behind.
	tr.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr.WaitEmpty(ctx)
	tr.Close()
	return 0
}

// benchHelper measures NewTracker and Close, the per-job cost.
func benchHelper() int {
	n, _ := strconv.Atoi(os.Getenv("PT_N"))
	var newT, closeT time.Duration
	var info Info
	for i := range n {
		t0 := time.Now()
		tr, inf, err := NewTracker(Options{
			Name:          fmt.Sprintf("%s-%d", os.Getenv("PT_NAME"), i),
			DisableCgroup: os.Getenv("PT_KIND") == KindSubreaper,
		})
		newT += time.Since(t0)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		info = inf
		t0 = time.Now()
		if err := tr.Close(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		closeT += time.Since(t0)
	}
	fmt.Printf("bench %s %d %d\n", info.Kind, newT.Nanoseconds()/int64(n), closeT.Nanoseconds()/int64(n))
	return 0
}

func joinInts(p []int) string {
	s := make([]string, len(p))
	for i, v := range p {
		s[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func parseInts(s string) []int {
	var out []int
	for f := range strings.SplitSeq(strings.Trim(s, "[]"), ",") {
		if v, err := strconv.Atoi(f); err == nil {
			out = append(out, v)
		}
	}
	return out
}

var nameSeq atomic.Int64

type runner struct {
	t     *testing.T
	in    io.WriteCloser
	lines chan string
	pid   int // the job's first process (/bin/sh)
	info  Info
	name  string
	dir   string // temp dir with the script's pids and ready files
}

// startRunner starts a runner helper for kind running script, waits until
// the script touched $PT_READY, and skips when the kind is not available.
func startRunner(t *testing.T, kind, script string, env ...string) *runner {
	t.Helper()
	dir := t.TempDir()
	name := fmt.Sprintf("shellctl-test-%d-%d", os.Getpid(), nameSeq.Add(1))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperRole+"=runner", "PT_KIND="+kind, "PT_NAME="+name, "PT_SCRIPT="+script,
		"PT_PIDS="+filepath.Join(dir, "pids"), "PT_READY="+filepath.Join(dir, "ready"))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &runner{t: t, in: in, lines: make(chan string, 16), name: name, dir: dir}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	t.Cleanup(func() {
		in.Close() // the helper kills what is left, removes the group, exits
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("runner helper did not exit")
		}
	})
	first := r.next()
	rest, ok := strings.CutPrefix(first, "ready ")
	if !ok {
		t.Fatalf("runner helper: %s", first)
	}
	pidStr, js, _ := strings.Cut(rest, " ")
	r.pid, _ = strconv.Atoi(pidStr)
	if err := json.Unmarshal([]byte(js), &r.info); err != nil {
		t.Fatalf("info %q: %v", js, err)
	}
	if r.info.Kind != kind {
		t.Skipf("%s tracking not available here: %s", kind, r.info.Why)
	}
	if kind == KindCgroup2 && os.Geteuid() != 0 {
		t.Logf("not root, cgroup2 worked anyway: %s", r.info.Path)
	}
	return r
}

func (r *runner) next() string {
	r.t.Helper()
	select {
	case l, ok := <-r.lines:
		if !ok {
			r.t.Fatal("runner helper exited")
		}
		return l
	case <-time.After(30 * time.Second):
		r.t.Fatal("runner helper did not answer in 30s")
	}
	return ""
}

func (r *runner) call(line string) string {
	r.t.Helper()
	if _, err := fmt.Fprintln(r.in, line); err != nil {
		r.t.Fatal(err)
	}
	return r.next()
}

// waitReady waits for the script's ready file. Scripts make it with a
// redirection (": > file"), not touch: a touch still exiting when the file
// is seen would be counted as a process of the job.
func (r *runner) waitReady() {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(r.dir, "ready")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("script never became ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *runner) pids() []int {
	r.t.Helper()
	l := r.call("pids")
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "pids" || f[2] != "err=<nil>" {
		r.t.Fatalf("pids: %s", l)
	}
	return parseInts(f[1])
}

// scriptPids are the pids the script wrote to $PT_PIDS: known independently
// of the tracker.
func (r *runner) scriptPids() []int {
	data, _ := os.ReadFile(filepath.Join(r.dir, "pids"))
	var out []int
	for f := range strings.FieldsSeq(string(data)) {
		if v, err := strconv.Atoi(f); err == nil {
			out = append(out, v)
		}
	}
	return out
}

type ladderResult struct {
	elapsed time.Duration
	left    []int
	err     string
}

func (r *runner) ladder(grace time.Duration) ladderResult {
	r.t.Helper()
	l := r.call(fmt.Sprintf("ladder %d", grace.Milliseconds()))
	f := strings.SplitN(l, " ", 4)
	if len(f) != 4 || f[0] != "ladder" {
		r.t.Fatalf("ladder: %s", l)
	}
	us, _ := strconv.Atoi(f[1])
	return ladderResult{elapsed: time.Duration(us) * time.Microsecond, left: parseInts(f[2]), err: f[3]}
}

// procRef names one process: pid plus start time, so a recycled pid is not
// mistaken for the process.
type procRef struct {
	pid   int
	start uint64
}

func refs(pids []int) []procRef {
	var out []procRef
	for _, p := range pids {
		if st, err := readStat(p, nil); err == nil && !st.gone() {
			out = append(out, procRef{p, st.start})
		}
	}
	return out
}

func (p procRef) alive() bool {
	st, err := readStat(p.pid, nil)
	return err == nil && st.start == p.start && !st.gone()
}

func kinds() []string { return []string{KindCgroup2, KindSubreaper} }

func TestLadderEndsWholeTree(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		grace    time.Duration
		minTime  time.Duration
		maxTime  time.Duration
		minProcs int // processes the script reports in $PT_PIDS
	}{
		{
			name: "child traps INT TERM HUP",
			// Ready once both pids are written: the child's may come
			// before or after the parent's.
			script: `trap '' INT TERM HUP
sh -c 'trap "" INT TERM HUP; echo $$ >> "$PT_PIDS"; while :; do sleep 1; done' &
echo $! >> "$PT_PIDS"
until [ "$(wc -l < "$PT_PIDS")" -ge 2 ]; do sleep 0.01; done; : > "$PT_READY"; wait`,
			grace: time.Second, minTime: 900 * time.Millisecond, maxTime: 2 * time.Second, minProcs: 2,
		},
		{
			name: "setsid grandchild",
			script: `setsid sleep 60 & echo $! >> "$PT_PIDS"
setsid sh -c 'trap "" INT TERM HUP; echo $$ >> "$PT_PIDS"; exec sleep 60' &
until [ "$(wc -l < "$PT_PIDS")" -ge 2 ]; do sleep 0.01; done; : > "$PT_READY"; wait`,
			grace: time.Second, maxTime: 2 * time.Second, minProcs: 2,
		},
		{
			name: "double-forked daemon",
			script: `(sleep 60 & echo $! >> "$PT_PIDS") &
(setsid sh -c 'trap "" INT TERM HUP; echo $$ >> "$PT_PIDS"; exec sleep 60' &) &
wait; until [ "$(wc -l < "$PT_PIDS")" -ge 2 ]; do sleep 0.01; done; : > "$PT_READY"; exec sleep 60`,
			grace: time.Second, maxTime: 2 * time.Second, minProcs: 2,
		},
		{
			// The trapping shell is stopped: only SIGCONT after SIGTERM lets
			// it run its trap, so with grace 10 s this must still be quick.
			// The sleeps are stopped right after the fork, often before they
			// ran: the pending-stop race that made SIGCONT go to everyone.
			name: "stopped processes",
			script: `for i in 1 2 3 4; do sleep 60 & echo $! >> "$PT_PIDS"; kill -STOP $!; done
sh -c 'trap "exit 0" TERM; kill -STOP $$; while :; do sleep 0.1; done' & P=$!; echo $P >> "$PT_PIDS"
until grep -q '^State:.*stopped' /proc/$P/status; do sleep 0.01; done
: > "$PT_READY"; wait`,
			grace: 10 * time.Second, maxTime: 2 * time.Second, minProcs: 2,
		},
		{
			name:   "plain sleep answers early",
			script: `sleep 60 & echo $! >> "$PT_PIDS"; : > "$PT_READY"; wait`,
			grace:  10 * time.Second, maxTime: time.Second, minProcs: 1,
		},
	}
	for _, kind := range kinds() {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				r := startRunner(t, kind, tt.script)
				r.waitReady()
				scriptPids := r.scriptPids()
				if len(scriptPids) < tt.minProcs {
					t.Fatalf("script reported pids %v, want at least %d", scriptPids, tt.minProcs)
				}
				tracked := r.pids()
				for _, p := range append(scriptPids, r.pid) {
					if !slices.Contains(tracked, p) {
						t.Errorf("pid %d of the job is not tracked (Pids %v)", p, tracked)
					}
				}
				before := refs(append(tracked, scriptPids...))

				res := r.ladder(tt.grace)
				if res.err != "<nil>" || len(res.left) > 0 {
					t.Fatalf("ladder: err %s, left %v", res.err, res.left)
				}
				if res.elapsed < tt.minTime || res.elapsed > tt.maxTime {
					t.Errorf("ladder took %v, want %v..%v", res.elapsed, tt.minTime, tt.maxTime)
				}
				for _, p := range before {
					if p.alive() {
						t.Errorf("pid %d still alive after the ladder", p.pid)
					}
				}
				t.Logf("%s: %d processes, ladder %v (grace %v)", kind, len(before), res.elapsed, tt.grace)

				// One Pids call: a /proc walk for the subreaper kind, which
				// takes milliseconds (tens under -race on a busy machine).
				again := r.ladder(tt.grace)
				t.Logf("second ladder: %v", again.elapsed)
				if again.err != "<nil>" || again.elapsed > 250*time.Millisecond {
					t.Errorf("second ladder: err %s after %v, want nil at once", again.err, again.elapsed)
				}
				if l := r.call("close"); !strings.HasSuffix(l, "<nil>") {
					t.Errorf("close: %s", l)
				}
				if r.info.Path != "" {
					if _, err := os.Stat(r.info.Path); !os.IsNotExist(err) {
						t.Errorf("cgroup %s still exists after Close (%v)", r.info.Path, err)
					}
				}
			})
		}
	}
}

// Background work started with nohup stays part of the job after the main
// process exits, so the runner can see it and choose to leave it alone.
func TestNohupChildCountedAfterMainExit(t *testing.T) {
	for _, kind := range kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := startRunner(t, kind, `nohup sleep 60 >/dev/null 2>&1 & echo $! >> "$PT_PIDS"; : > "$PT_READY"`)
			r.waitReady()
			if l := r.call("waitmain"); l != "mainexited" {
				t.Fatalf("waitmain: %s", l)
			}
			bg := r.scriptPids()
			if len(bg) != 1 {
				t.Fatalf("script pids %v", bg)
			}
			pids := r.pids()
			if !slices.Equal(pids, bg) {
				t.Fatalf("Pids after the main process exited = %v, want just the nohup sleep %v", pids, bg)
			}
			ref := refs(bg)
			if len(ref) != 1 {
				t.Fatal("nohup sleep not alive")
			}
			if res := r.ladder(time.Second); res.err != "<nil>" || ref[0].alive() {
				t.Fatalf("ladder: %s; alive %v", res.err, ref[0].alive())
			}
		})
	}
}

// TestExemptChildIsNotTheJob: a child of the runner exempted from the job
// (its screen process) is not listed, and the ladder ends the job without
// it: in subreaper mode every descendant of the runner is the job's
// otherwise, and the job would never be empty while its screen lives.
func TestExemptChildIsNotTheJob(t *testing.T) {
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("needs /bin/sleep")
	}
	for _, kind := range kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := startRunner(t, kind, `sleep 60 & echo $! >> "$PT_PIDS"; : > "$PT_READY"; wait`)
			r.waitReady()
			l := r.call("exempt")
			var epid int
			if _, err := fmt.Sscanf(l, "exempted %d err=<nil>", &epid); err != nil || epid <= 0 {
				t.Fatalf("exempt: %s", l)
			}
			ex := refs([]int{epid})
			t.Cleanup(func() {
				if len(ex) == 1 && ex[0].alive() {
					syscall.Kill(epid, syscall.SIGKILL)
				}
			})
			if len(ex) != 1 {
				t.Fatalf("exempt process %d not alive", epid)
			}
			if pids := r.pids(); slices.Contains(pids, epid) || len(pids) != 2 {
				t.Fatalf("Pids = %v: want the job's sh and sleep, without the exempt %d", pids, epid)
			}
			res := r.ladder(time.Second)
			if res.err != "<nil>" || len(res.left) != 0 {
				t.Fatalf("ladder: %s, left %v", res.err, res.left)
			}
			if !ex[0].alive() {
				t.Fatal("the ladder ended the exempt process")
			}
		})
	}
}

// SignalGroup reaches the job's processes in the group and nothing else:
// not a process outside the job that leads a group of its own (as the
// runner's group is, or one that took a number the job's processes left),
// not a process of the job in another group.
func TestSignalGroupReachesOnlyTheJobsMembers(t *testing.T) {
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("needs /bin/sleep")
	}
	for _, kind := range kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := startRunner(t, kind, `sleep 60 & echo $! >> "$PT_PIDS"; setsid sleep 60 & echo $! >> "$PT_PIDS"; : > "$PT_READY"; wait`)
			r.waitReady()
			l := r.call("exempt") // outside the job, leading a group of its own
			var outside int
			if _, err := fmt.Sscanf(l, "exempted %d err=<nil>", &outside); err != nil || outside <= 0 {
				t.Fatalf("exempt: %s", l)
			}
			ex := refs([]int{outside})
			t.Cleanup(func() { syscall.Kill(outside, syscall.SIGKILL) })
			if l := r.call(fmt.Sprintf("siggroup %d %d", outside, syscall.SIGKILL)); l != "siggroup 0 err=<nil>" {
				t.Errorf("SignalGroup to a group outside the job = %q, want none signalled", l)
			}
			if len(ex) != 1 || !ex[0].alive() {
				t.Fatal("SignalGroup killed a process outside the job")
			}
			sp := r.scriptPids()
			if len(sp) != 2 {
				t.Fatalf("script pids %v", sp)
			}
			members := refs([]int{r.pid, sp[0]})
			// The setsid one is in a group of its own once setsid has run.
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, err := readStat(sp[1], nil)
				if err == nil && st.pgrp == sp[1] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the script's setsid sleep %d never led a group: %+v %v", sp[1], st, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			other := refs(sp[1:])
			// The job's group: its sh and the sleep it started, not the
			// setsid one.
			if l := r.call(fmt.Sprintf("siggroup %d %d", r.pid, syscall.SIGKILL)); l != "siggroup 2 err=<nil>" {
				t.Errorf("SignalGroup to the job's group = %q, want its two members signalled", l)
			}
			deadline = time.Now().Add(5 * time.Second)
			for (members[0].alive() || members[1].alive()) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if members[0].alive() || members[1].alive() {
				t.Error("the job's group members survived SIGKILL")
			}
			if len(other) != 1 || !other[0].alive() {
				t.Error("SignalGroup reached a process of the job in another group")
			}
		})
	}
}

// A script can fork before the runner gets to Add; those children must end
// up in the group as well.
func TestAddMovesChildrenForkedBeforeAdd(t *testing.T) {
	r := startRunner(t, KindCgroup2, `sleep 60 & echo $! >> "$PT_PIDS"; (sleep 60 &); : > "$PT_READY"; wait`, "PT_ADD_DELAY_MS=300", "PT_ADD_AFTER_START=1")
	r.waitReady()
	pids := r.pids()
	for _, p := range r.scriptPids() {
		if !slices.Contains(pids, p) {
			t.Errorf("child %d forked before Add is not in the group (Pids %v)", p, pids)
		}
	}
	if len(pids) < 3 {
		t.Errorf("Pids %v, want sh and two sleeps", pids)
	}
	if res := r.ladder(time.Second); res.err != "<nil>" {
		t.Fatal(res.err)
	}
}

func TestOpenCgroupFDStartsInsideGroup(t *testing.T) {
	r := startRunner(t, KindCgroup2, `sleep 60 & echo $! >> "$PT_PIDS"; : > "$PT_READY"; wait`, "PT_CGROUPFD=1")
	r.waitReady()
	for _, p := range append(r.scriptPids(), r.pid) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
		if err != nil {
			t.Fatal(err)
		}
		path, _ := parseCgroupV2Path(data)
		if !strings.HasSuffix(path, "/"+r.name) {
			t.Errorf("pid %d is in %q, want the job group %s", p, path, r.name)
		}
	}
	if res := r.ladder(time.Second); res.err != "<nil>" {
		t.Fatal(res.err)
	}
}

func TestOOMKilledRecorded(t *testing.T) {
	r := startRunner(t, KindCgroup2, `: > "$PT_READY"; exec dd if=/dev/zero of=/dev/null bs=256M count=1`, "PT_MEMORY_MAX=33554432")
	if !r.info.MemoryLimitApplied {
		t.Skipf("memory limit not available: %s", r.info.Why)
	}
	if l := r.call("waitmain"); l != "mainexited" {
		t.Fatal(l)
	}
	if l := r.call("oom"); l != "oom true" {
		t.Fatalf("OOMKilled after a 256 MiB buffer under memory.max 32 MiB: %s", l)
	}
}

// Limits are applied when the v2 controllers allow it, and Info says why not.
func TestLimitsAppliedOrExplained(t *testing.T) {
	r := startRunner(t, KindCgroup2, `: > "$PT_READY"; exec sleep 60`, "PT_MEMORY_MAX=67108864", "PT_PIDS_MAX=64")
	t.Logf("info: %+v", r.info)
	for _, l := range []struct {
		applied bool
		file    string
		want    string
		name    string
	}{
		{r.info.MemoryLimitApplied, "memory.max", "67108864", "memory"},
		{r.info.PidsLimitApplied, "pids.max", "64", "pids"},
	} {
		if !l.applied {
			if !strings.Contains(r.info.Why, l.name+" limit not applied") {
				t.Errorf("%s limit not applied and Info.Why does not say why: %q", l.name, r.info.Why)
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.info.Path, l.file))
		if err != nil || strings.TrimSpace(string(data)) != l.want {
			t.Errorf("%s = %q, %v; want %s", l.file, data, err, l.want)
		}
	}
	if res := r.ladder(time.Second); res.err != "<nil>" {
		t.Fatal(res.err)
	}
}

// The tracker is made and removed for every job; report what that costs.
func TestTrackerCost(t *testing.T) {
	const n = 200
	for _, kind := range kinds() {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperRole+"=bench", "PT_KIND="+kind, "PT_N="+strconv.Itoa(n),
			fmt.Sprintf("PT_NAME=shellctl-bench-%d", os.Getpid()))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bench helper: %v: %s", err, out)
		}
		f := strings.Fields(string(out))
		if len(f) != 4 || f[0] != "bench" {
			t.Fatalf("bench helper: %s", out)
		}
		newNs, _ := strconv.Atoi(f[2])
		closeNs, _ := strconv.Atoi(f[3])
		t.Logf("%s (asked %s): NewTracker %v, Close %v (mean of %d)", f[1], kind, time.Duration(newNs), time.Duration(closeNs), n)
	}
}
