package e2e

// Fault tests of issue 3: jobs that outlive the server, end completely and
// stay within bounds. Every test starts the real binaries.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/store"
)

// ---- helpers (prefixed fx to stay clear of the other test files) ----

// fxDB opens the server's database directly (tests read the reason column
// and plant rows).
func fxDB(t *testing.T, stateDir string) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(stateDir, "shellctl.db") + "?_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// fxRow is what a test reads of a job's row.
type fxRow struct {
	status string
	reason string
	code   sql.NullInt64
}

func fxReadRow(t *testing.T, stateDir, id string) fxRow {
	t.Helper()
	r, err := fxRowOf(stateDir, id)
	if err != nil {
		t.Fatalf("read row of %s: %v", id, err)
	}
	return r
}

// fxRowOf reads a job's row; safe from any goroutine.
func fxRowOf(stateDir, id string) (fxRow, error) {
	var r fxRow
	db, err := sql.Open("sqlite", "file:"+filepath.Join(stateDir, "shellctl.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return r, err
	}
	defer db.Close()
	err = db.QueryRow(`SELECT status, reason, exit_code FROM jobs WHERE id = ?`, id).Scan(&r.status, &r.reason, &r.code)
	return r, err
}

// fxWantReason checks the reason recorded for a job.
func fxWantReason(t *testing.T, s *server, id, want string) {
	t.Helper()
	// A job's end is answered before its row has it (the write follows at
	// once, off the answer's path): wait for the row to say it ended.
	fxEventually(t, 10*time.Second, "the end of "+id+" to be recorded", func() bool {
		r, err := fxRowOf(s.StateDir, id)
		return err == nil && store.IsTerminal(r.status)
	})
	if r := fxReadRow(t, s.StateDir, id); r.reason != want {
		t.Errorf("job %s: recorded reason %q, want %q (status %s)", id, r.reason, want, r.status)
	}
}

// fxEventually polls fn until it holds or timeout passes.
func fxEventually(t *testing.T, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fxProcState returns the state letter of pid (R, S, T, Z, ...) and false
// when there is no such process.
func fxProcState(pid int) (byte, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 || i+2 >= len(raw) {
		return 0, false
	}
	return raw[i+2], true
}

// fxAlive: the process exists and is not a zombie.
func fxAlive(pid int) bool {
	st, ok := fxProcState(pid)
	return ok && st != 'Z' && st != 'X'
}

// fxReadPID waits for a job to write a pid into path and registers a
// cleanup that kills it (the tests start processes meant to escape).
func fxReadPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	fxEventually(t, 10*time.Second, "pid file "+filepath.Base(path), func() bool {
		raw, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(raw, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil && pid > 0
	})
	// Only the same process is killed: the pid may be reused by then.
	start := fxProcStart(pid)
	t.Cleanup(func() {
		if start != "" && fxAlive(pid) && fxProcStart(pid) == start {
			syscall.Kill(pid, syscall.SIGCONT)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// fxProcStart is the start time of pid (field 22 of its stat), "" when
// gone: with the pid it names one process.
func fxProcStart(pid int) string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// fxProcsIn lists the live processes whose working directory is dir: the
// jobs of these tests run in a directory of their own and never leave it,
// so this is "every process of the job", whatever group or session it
// moved to.
func fxProcsIn(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil || cwd != dir {
			continue
		}
		if fxAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// fxProcDesc describes a pid for failure messages.
func fxProcDesc(pid int) string {
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	st, _ := fxProcState(pid)
	return fmt.Sprintf("%d[%c %s]", pid, st, strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " ")))
}

func fxDescAll(pids []int) string {
	var d []string
	for _, p := range pids {
		d = append(d, fxProcDesc(p))
	}
	return strings.Join(d, ", ")
}

// fxRunnerPID is the runner of a job, as the server recorded it and while
// it still runs our runner binary; 0 when there is none. The pid to signal
// when a test kills a runner.
func fxRunnerPID(s *server, id string) int {
	return recordedRunnerPID(s.StateDir, id)
}

// fxRunnerSeen looks for a live shellctl-runner whose argv holds --job-id
// <id>, whether or not the server recorded it (one started just before a
// server was killed may not be). It only observes, for assertions: nothing
// is ever signalled by what it finds.
func fxRunnerSeen(id string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != "shellctl-runner" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--job-id" && args[i+1] == id {
				return pid
			}
		}
	}
	return 0
}

// fxRSSKB reads VmRSS of pid in KiB (0 when gone).
func fxRSSKB(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func fxCtx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// fxFollow waits from offset until the job is done and returns the last
// answer and everything read.
func fxFollow(t *testing.T, s *server, id string, offset int64) (*client.JobResult, string) {
	t.Helper()
	c := fxCtx(t, 2*time.Minute)
	var out strings.Builder
	for {
		r, err := s.c.Wait(c, id, client.WaitRequest{Offset: offset, Timeout: f64(20)})
		if err != nil {
			t.Fatalf("wait %s from %d: %v", id, offset, err)
		}
		if r.Offset < offset {
			t.Fatalf("wait %s: offset went back from %d to %d", id, offset, r.Offset)
		}
		out.WriteString(r.Output)
		offset = r.Offset
		if r.Done && !r.Truncated {
			return r, out.String()
		}
	}
}

// fxJobDir makes a directory for one job. What a test leaves running in it
// (some orphan processes on purpose, e.g. by killing a runner) is ended
// with its server's cgroup when the test ends (server.cleanupJobs).
func fxJobDir(t *testing.T) string {
	return t.TempDir()
}

// fxStart runs script in a fresh directory and answers after timeout.
func fxStart(t *testing.T, s *server, mode, script string, timeout float64) (*client.JobResult, string) {
	t.Helper()
	dir := fxJobDir(t)
	res, err := s.c.Run(fxCtx(t, time.Minute), client.RunRequest{Script: script, Mode: mode, Cwd: dir, Timeout: timeout})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return res, dir
}

func fxCode(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

// fxAllGone checks that no process of the job (the pids given and
// everything working in dir) is left after a terminate / delete answered.
// A process that escaped fails the test. One that is still there at the
// answer but gone a few milliseconds later (it was exiting) is only logged
// here; TestFaultTerminateAnswersAfterLastExit is strict about it.
func fxAllGone(t *testing.T, what string, dir string, pids ...int) {
	t.Helper()
	early, escaped := fxLeftAfterAnswer(dir, pids...)
	if escaped {
		t.Errorf("%s: processes of the job escaped: %s", what, early)
	} else if early != "" {
		t.Logf("%s: answered before the last process was gone: %s", what, early)
	}
}

// fxLeftAfterAnswer, called right after an answer, describes the processes
// of the job alive at that moment and how they fared: escaped is true when
// one is still there 1 s later.
func fxLeftAfterAnswer(dir string, pids ...int) (desc string, escaped bool) {
	left := fxProcsIn(dir)
	for _, p := range pids {
		if fxAlive(p) && !fxContains(left, p) {
			left = append(left, p)
		}
	}
	if len(left) == 0 {
		return "", false
	}
	var d []string
	for _, p := range left {
		d = append(d, fxProcDesc(p)+" "+fxSigInfo(p))
	}
	start := time.Now()
	for time.Since(start) < time.Second && fxAnyAlive(left) {
		time.Sleep(2 * time.Millisecond)
	}
	if fxAnyAlive(left) {
		return strings.Join(d, ", ") + "; still alive 1 s later", true
	}
	return fmt.Sprintf("%s; gone %v after the answer", strings.Join(d, ", "), time.Since(start).Round(time.Millisecond)), false
}

func fxContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func fxAnyAlive(pids []int) bool {
	for _, p := range pids {
		if fxAlive(p) {
			return true
		}
	}
	return false
}

// fxSigInfo: parent and pending signals of pid, from /proc/<pid>/status.
func fxSigInfo(pid int) string {
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	var f []string
	for _, l := range strings.Split(string(raw), "\n") {
		for _, k := range []string{"PPid:", "SigPnd:", "ShdPnd:", "SigIgn:"} {
			if v, ok := strings.CutPrefix(l, k); ok {
				f = append(f, k+strings.TrimSpace(v))
			}
		}
	}
	return "{" + strings.Join(f, " ") + "}"
}

var fxModes = []string{"pty", "stdio"}

// ---- 1-3: restart survival ----

// SIGKILL of the server while jobs print (one pty, one stdio): after a
// restart, wait from the last offset gets the rest, complete and in order,
// and the real exit code.
func TestFaultServerSIGKILLOutputContinues(t *testing.T) {
	s := startServer(t, serverOpts{})
	script := `i=1; while [ $i -le 20 ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; exit 7`
	var first []*client.JobResult
	for _, mode := range fxModes {
		res, _ := fxStart(t, s, mode, script, 0.5)
		if res.Done {
			t.Fatalf("%s job done before the kill: %+v", mode, res)
		}
		if !strings.HasPrefix(res.Output, "line 1\n") {
			t.Fatalf("%s: first window %q", mode, res.Output)
		}
		first = append(first, res)
	}
	killed := time.Now()
	s.restart(syscall.SIGKILL)
	t.Logf("server SIGKILLed at offsets %d and %d, back after %v", first[0].Offset, first[1].Offset, time.Since(killed).Round(time.Millisecond))
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	for i, res := range first {
		mode := fxModes[i]
		if v, err := s.c.Status(fxCtx(t, 10*time.Second), res.JobID); err != nil {
			t.Fatal(err)
		} else {
			t.Logf("%s: status right after restart: %s (offset %d)", mode, v.Status, v.Offset)
		}
		last, rest := fxFollow(t, s, res.JobID, res.Offset)
		if got := res.Output + rest; got != want.String() {
			t.Errorf("%s: output across the restart = %q, want %q", mode, got, want.String())
		}
		if last.Status != "exited" || last.ExitCode == nil || *last.ExitCode != 7 {
			t.Errorf("%s: end = %s code %s, want exited 7", mode, last.Status, fxCode(last.ExitCode))
		}
		if raw, _ := os.ReadFile(last.OutputPath); string(raw) != want.String() {
			t.Errorf("%s: output.log = %q", mode, raw)
		}
		fxWantReason(t, s, res.JobID, runner.ReasonExited)
	}
}

// A job that ends while the server is down reports its real exit after the
// restart (recorded by the runner through shellctl-runner-exit).
func TestFaultJobEndsDuringDowntime(t *testing.T) {
	s := startServer(t, serverOpts{})
	cases := []struct {
		mode, end, status, reason string
		code                      int
	}{
		{"pty", "exit 7", "exited", runner.ReasonExited, 7},
		{"stdio", "exit 9", "exited", runner.ReasonExited, 9},
		{"stdio", "kill -TERM $$", "exited", runner.ReasonSignal, 143},
	}
	type started struct {
		id, dir string
	}
	var jobs []started
	for _, tc := range cases {
		// The job ends when the test creates "go" in its directory.
		res, dir := fxStart(t, s, tc.mode, `echo before; while [ ! -e go ]; do sleep 0.05; done; echo after; `+tc.end, 0.3)
		if res.Done {
			t.Fatalf("%s %q done too early", tc.mode, tc.end)
		}
		jobs = append(jobs, started{res.JobID, dir})
	}
	s.kill(syscall.SIGKILL)
	downAt := time.Now()
	for _, j := range jobs {
		os.WriteFile(filepath.Join(j.dir, "go"), nil, 0o600)
	}
	// Wait until every runner recorded its exit (the server is down).
	for i, j := range jobs {
		fxEventually(t, 20*time.Second, "exit of "+j.id+" recorded while the server is down", func() bool {
			return fxReadRow(t, s.StateDir, j.id).status == cases[i].status
		})
	}
	t.Logf("exits recorded by the runners %v after the server was killed", time.Since(downAt).Round(time.Millisecond))
	s.start()
	c := fxCtx(t, time.Minute)
	for i, j := range jobs {
		tc := cases[i]
		v, err := s.c.Status(c, j.id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != tc.status || !v.Done || v.ExitCode == nil || *v.ExitCode != tc.code || v.EndedAt == nil {
			t.Errorf("%s %q: status after restart = %+v (code %s), want %s %d", tc.mode, tc.end, v, fxCode(v.ExitCode), tc.status, tc.code)
		}
		r, out := fxFollow(t, s, j.id, 0)
		if r.Status != tc.status || r.ExitCode == nil || *r.ExitCode != tc.code {
			t.Errorf("%s %q: wait = %s %s", tc.mode, tc.end, r.Status, fxCode(r.ExitCode))
		}
		if out != "before\nafter\n" {
			t.Errorf("%s %q: output %q", tc.mode, tc.end, out)
		}
		fxWantReason(t, s, j.id, tc.reason)
	}
}

// Input reaches a job after the server restarted (SIGTERM and SIGKILL).
func TestFaultInputAfterRestart(t *testing.T) {
	parallel(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			s := startServer(t, serverOpts{})
			c := fxCtx(t, time.Minute)
			res, err := s.c.Run(c, client.RunRequest{Script: `printf 'name? '; read -r x; echo "hello [$x]"; exit 3`, Cwd: fxJobDir(t), Timeout: 5, IdleFlushSeconds: 0.2})
			if err != nil {
				t.Fatal(err)
			}
			if res.Done || res.Output != "name? " {
				t.Fatalf("before restart: %+v", res)
			}
			s.restart(sig)
			r, err := s.c.Input(c, res.JobID, "bob\n", client.WaitRequest{Offset: res.Offset, Timeout: f64(10)})
			if err != nil {
				t.Fatalf("input after restart: %v", err)
			}
			out := r.Output
			if !r.Done {
				var rest string
				r, rest = fxFollow(t, s, res.JobID, r.Offset)
				out += rest
			}
			// The terminal echoes the input, then the job answers.
			if out != "bob\nhello [bob]\n" {
				t.Errorf("output after input = %q, want the echo and the answer", out)
			}
			if r.Status != "exited" || r.ExitCode == nil || *r.ExitCode != 3 {
				t.Errorf("end = %s %s, want exited 3", r.Status, fxCode(r.ExitCode))
			}
		})
	}
}

// terminate works on a job found again after a restart, and reaches its
// processes.
func TestFaultTerminateAfterRestart(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range fxModes {
		res, dir := fxStart(t, s, mode, `echo $$ > pid; sleep 300`, 0.2)
		pid := fxReadPID(t, filepath.Join(dir, "pid"))
		s.restart(syscall.SIGKILL)
		start := time.Now()
		v, err := s.c.Terminate(fxCtx(t, time.Minute), res.JobID, 1)
		if err != nil {
			t.Fatalf("%s: terminate after restart: %v", mode, err)
		}
		t.Logf("%s: terminate after restart took %v", mode, time.Since(start).Round(time.Millisecond))
		if v.Status != "terminated" || !v.Done || v.ExitCode == nil {
			t.Errorf("%s: terminate after restart = %+v", mode, v)
		}
		fxAllGone(t, mode, dir, pid)
		fxWantReason(t, s, res.JobID, runner.ReasonTerminate)
	}
}

// ---- 4: a runner that dies ----

func TestFaultRunnerSIGKILLIsLost(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range fxModes {
		t.Run(mode, func(t *testing.T) {
			res, dir := fxStart(t, s, mode, `echo $$ > pid; sleep 300`, 0.2)
			pid := fxReadPID(t, filepath.Join(dir, "pid"))
			var rpid int
			fxEventually(t, 5*time.Second, "runner process", func() bool { rpid = fxRunnerPID(s, res.JobID); return rpid != 0 })
			if err := syscall.Kill(rpid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			c := fxCtx(t, time.Minute)
			var v *client.JobStatus
			fxEventually(t, 15*time.Second, "job of the killed runner to end", func() bool {
				var err error
				v, err = s.c.Status(c, res.JobID)
				return err == nil && v.Done
			})
			t.Logf("lost noticed %v after the runner was killed; job process %d alive afterwards: %v", time.Since(start).Round(time.Millisecond), pid, fxAlive(pid))
			if v.Status != "lost" || v.ExitCode != nil || !v.Done {
				t.Errorf("status = %s done %v code %s, want lost, done, null", v.Status, v.Done, fxCode(v.ExitCode))
			}
			r, err := s.c.Wait(c, res.JobID, client.WaitRequest{})
			if err != nil || r.Status != "lost" || !r.Done || r.ExitCode != nil {
				t.Errorf("wait = %+v %v", r, err)
			}
			fxWantReason(t, s, res.JobID, runner.ReasonRunnerLost)
			// A lost job is finished: input is refused, terminate answers its view.
			if mode == "pty" {
				_, err = s.c.Input(c, res.JobID, "x", client.WaitRequest{})
				if ae, ok := err.(*client.Error); !ok || ae.Code != "job_not_running" {
					t.Errorf("input to a lost job: %v", err)
				}
			}
			if tv, err := s.c.Terminate(c, res.JobID, 0); err != nil || tv.Status != "lost" {
				t.Errorf("terminate of a lost job = %+v %v", tv, err)
			}
		})
	}
}

// Jobs start with the default disposition of SIGHUP: the runner ignores
// SIGHUP for itself, but a job must die of a hangup (129), its shell must be
// able to trap it, and a pty job must see its terminal hang up when its
// runner dies.
func TestFaultJobSIGHUPNotIgnored(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range fxModes {
		r, out := s.runDone(t, client.RunRequest{Script: `kill -HUP $$; echo survived`, Mode: mode})
		if r.Status != "exited" || code(r) != 129 || out != "" {
			t.Errorf("%s: kill -HUP $$ = %s %d %q, want exited 129 and no output", mode, r.Status, code(r), out)
		} else {
			fxWantReason(t, s, r.JobID, runner.ReasonSignal)
		}
		r, out = s.runDone(t, client.RunRequest{Script: `trap 'echo trapped; exit 5' HUP; kill -HUP $$; echo after`, Mode: mode})
		if code(r) != 5 || out != "trapped\n" {
			t.Errorf("%s: HUP trap = %s %d %q, want exited 5 \"trapped\"", mode, r.Status, code(r), out)
		}
	}
	// A pty job whose runner dies gets the hangup of its terminal.
	res, dir := fxStart(t, s, "pty", `echo $$ > pid; sleep 300`, 0.2)
	pid := fxReadPID(t, filepath.Join(dir, "pid"))
	rpid := fxRunnerPID(s, res.JobID)
	if rpid == 0 {
		t.Fatal("no runner")
	}
	syscall.Kill(rpid, syscall.SIGKILL)
	deadline := time.Now().Add(3 * time.Second)
	for fxAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if fxAlive(pid) {
		t.Errorf("pty job %d still runs 3 s after its runner was killed (terminal hung up)", pid)
	}
}

// ---- 5-7: termination of the whole tree ----

// A job that ignores INT, TERM and HUP ends after about the grace period.
func TestFaultTerminateGraceOfTrapper(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range fxModes {
		t.Run(mode, func(t *testing.T) {
			res, dir := fxStart(t, s, mode, `echo $$ > pid; trap '' INT TERM HUP; while :; do sleep 0.1; done`, 0.2)
			pid := fxReadPID(t, filepath.Join(dir, "pid"))
			time.Sleep(100 * time.Millisecond) // the trap is set right after the pid is written
			start := time.Now()
			v, err := s.c.Terminate(fxCtx(t, time.Minute), res.JobID, 1)
			el := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("terminate with grace 1 took %v, code %s", el.Round(time.Millisecond), fxCode(v.ExitCode))
			if el < 900*time.Millisecond || el >= 2500*time.Millisecond {
				t.Errorf("terminate took %v, want about the grace (0.9 s .. 2.5 s)", el)
			}
			if v.Status != "terminated" || !v.Done || v.ExitCode == nil || *v.ExitCode != 137 {
				t.Errorf("view = %+v code %s, want terminated 137", v, fxCode(v.ExitCode))
			}
			fxAllGone(t, "after terminate", dir, pid)
			fxWantReason(t, s, res.JobID, runner.ReasonTerminate)
			// Idempotent.
			start = time.Now()
			v2, err := s.c.Terminate(fxCtx(t, time.Minute), res.JobID, 1)
			if err != nil || v2.Status != "terminated" || fxCode(v2.ExitCode) != fxCode(v.ExitCode) || time.Since(start) > 500*time.Millisecond {
				t.Errorf("second terminate = %+v %v after %v", v2, err, time.Since(start))
			}
		})
	}
}

// Processes that left the job's group or session, daemons and stopped
// processes are gone after terminate.
func TestFaultTerminateReachesEscapedProcesses(t *testing.T) {
	s := startServer(t, serverOpts{})
	const child = `sh -c 'echo $$ > pid; exec sleep 300'`
	cases := []struct{ name, script string }{
		{"setsid", `setsid ` + child + ` & sleep 300`},
		{"setsid-pidof", `setsid sleep 300 & echo $! > pid; sleep 300`},
		{"double-fork", `(` + child + ` &) ; sleep 300`},
		{"double-fork-setsid", `(setsid ` + child + ` &) ; sleep 300`},
		{"stopped", `sleep 300 & echo $! > pid; kill -STOP $!; sleep 300`},
		{"stopped-shell", `echo $$ > pid; sleep 300 & kill -STOP $$`},
	}
	for _, mode := range fxModes {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				res, dir := fxStart(t, s, mode, tc.script, 0.2)
				pid := fxReadPID(t, filepath.Join(dir, "pid"))
				if strings.HasPrefix(tc.name, "stopped") {
					fxEventually(t, 5*time.Second, "process stopped", func() bool { st, _ := fxProcState(pid); return st == 'T' })
				} else if !fxAlive(pid) {
					t.Fatalf("escaped process %d not running", pid)
				}
				before := fxProcsIn(dir)
				desc := fxDescAll(before)
				start := time.Now()
				v, err := s.c.Terminate(fxCtx(t, time.Minute), res.JobID, 1)
				el := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("terminate took %v (code %s); processes before: %s", el.Round(time.Millisecond), fxCode(v.ExitCode), desc)
				if v.Status != "terminated" || !v.Done || v.ExitCode == nil {
					t.Errorf("view = %+v", v)
				}
				fxAllGone(t, "after terminate", dir, append(before, pid)...)
				if el > 2500*time.Millisecond {
					t.Errorf("terminate took %v with grace 1", el)
				}
			})
		}
	}
}

// nohup children: left alone when the job ends by itself, killed by
// terminate and forced delete.
func TestFaultNohupChildSurvivesNormalEnd(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	for _, mode := range fxModes {
		t.Run(mode, func(t *testing.T) {
			dir := fxJobDir(t)
			res, out := s.runDone(t, client.RunRequest{Script: `nohup sleep 300 >/dev/null 2>&1 & echo $! > pid; echo started`, Mode: mode, Cwd: dir, Timeout: 10})
			pid := fxReadPID(t, filepath.Join(dir, "pid"))
			if res.Status != "exited" || code(res) != 0 || out != "started\n" {
				t.Fatalf("job = %s %d %q", res.Status, code(res), out)
			}
			fxWantReason(t, s, res.JobID, runner.ReasonExited)
			// Still there a moment after the job is done (and its runner gone).
			fxEventually(t, 5*time.Second, "runner to exit", func() bool { return fxRunnerSeen(res.JobID) == 0 })
			time.Sleep(200 * time.Millisecond)
			if !fxAlive(pid) {
				t.Fatalf("nohup child %d killed when the job ended by itself", pid)
			}
		})
	}
}

func TestFaultTerminateAndDeleteKillNohupChild(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, mode := range fxModes {
		for _, how := range []string{"terminate", "force-delete"} {
			t.Run(mode+"/"+how, func(t *testing.T) {
				res, dir := fxStart(t, s, mode, `nohup sleep 300 >/dev/null 2>&1 & echo $! > pid; sleep 300`, 0.2)
				pid := fxReadPID(t, filepath.Join(dir, "pid"))
				before := fxProcsIn(dir)
				c := fxCtx(t, time.Minute)
				start := time.Now()
				if how == "terminate" {
					v, err := s.c.Terminate(c, res.JobID, 1)
					if err != nil || v.Status != "terminated" {
						t.Fatalf("terminate = %+v %v", v, err)
					}
				} else {
					if err := s.c.Delete(c, res.JobID, true, 1); err != nil {
						t.Fatalf("forced delete: %v", err)
					}
					if _, err := os.Stat(filepath.Dir(res.OutputPath)); !os.IsNotExist(err) {
						t.Errorf("job dir remains after delete: %v", err)
					}
				}
				t.Logf("%s took %v", how, time.Since(start).Round(time.Millisecond))
				fxAllGone(t, "after "+how, dir, append(before, pid)...)
			})
		}
	}
}

// terminate answers only once no process of the job remains (zombies
// count as gone): checked at the instant of the answer, over rounds of
// concurrent terminates of jobs whose processes escaped their group or
// session (concurrency widens any window between "looks empty" and "is
// empty").
func TestFaultTerminateAnswersAfterLastExit(t *testing.T) {
	parallel(t)
	t.Run("cgroup", func(t *testing.T) { terminateAnswersAfterLastExit(t, nil) })
	t.Run("subreaper", func(t *testing.T) { terminateAnswersAfterLastExit(t, []string{"--no-cgroup"}) })
}

func terminateAnswersAfterLastExit(t *testing.T, args []string) {
	s := startServer(t, serverOpts{args: args})
	const child = `sh -c 'echo $$ > pid; exec sleep 300'`
	scripts := []string{
		`setsid ` + child + ` & sleep 300`,
		`(setsid ` + child + ` &) ; sleep 300`,
		`nohup sleep 300 >/dev/null 2>&1 & echo $! > pid; sleep 300`,
		`(` + child + ` &) ; sleep 300`,
	}
	c := fxCtx(t, 2*time.Minute)
	var mu sync.Mutex
	var early, escaped []string
	n := 0
	for round := 0; round < 8; round++ {
		type job struct {
			id, dir, what string
			pid           int
		}
		var jobs []job
		for i, sc := range scripts {
			mode := fxModes[(round+i)%2]
			res, dir := fxStart(t, s, mode, sc, 0.01)
			jobs = append(jobs, job{res.JobID, dir, mode + " " + sc, fxReadPID(t, filepath.Join(dir, "pid"))})
		}
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := s.c.Terminate(c, j.id, 1)
				d, esc := fxLeftAfterAnswer(j.dir, j.pid)
				if d != "" {
					d = j.what + ": " + d
				}
				mu.Lock()
				defer mu.Unlock()
				n++
				if err != nil || v.Status != "terminated" {
					escaped = append(escaped, fmt.Sprintf("terminate %s (%s) = %+v code %s, %v", j.id, j.what, v, fxCode(v.ExitCode), err))
				}
				if esc {
					row, rerr := fxRowOf(s.StateDir, j.id)
					d += fmt.Sprintf(" [row %s/%s %v, runner pid now %d]", row.status, row.reason, rerr, fxRunnerSeen(j.id))
					escaped = append(escaped, d)
				} else if d != "" {
					early = append(early, d)
				}
			}()
		}
		wg.Wait()
	}
	for _, e := range escaped {
		t.Errorf("escaped: %s", e)
	}
	if len(early) > 0 {
		t.Errorf("%d of %d terminates answered while a process of the job was still there, e.g. %s", len(early), n, early[0])
	}
}

// ---- 11: rows left behind by a server that died ----

// Rows left created / starting / running with no runner become failed or
// lost when the server starts again, never stay unfinished.
func TestFaultStaleRowsEndOnRestart(t *testing.T) {
	s := startServer(t, serverOpts{})
	// A real job first, so the database and jobs dir exist as a server made them.
	s.runDone(t, client.RunRequest{Script: "true"})
	s.kill(syscall.SIGTERM)

	db := fxDB(t, s.StateDir)
	type planted struct {
		id, status string
		runnerPID  int
	}
	rows := []planted{
		{"00000000000000a1", "created", 0},
		{"00000000000000a2", "starting", 0},
		{"00000000000000a3", "starting", 999999999},   // a pid that cannot exist
		{"00000000000000a4", "starting", os.Getpid()}, // alive, but no runner socket
		{"00000000000000a5", "running", 0},
	}
	now := time.Now().Add(-time.Minute).UnixNano()
	for i, r := range rows {
		if err := os.MkdirAll(filepath.Join(s.StateDir, "jobs", r.id), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := db.Exec(`INSERT INTO jobs (id, status, mode, cwd, session_id, created_at, runner_pid) VALUES (?, ?, 'pty', ?, '', ?, ?)`,
			r.id, r.status, s.Home, now+int64(i), r.runnerPID)
		if err != nil {
			t.Fatalf("plant %s: %v", r.status, err)
		}
	}
	db.Close()
	start := time.Now()
	s.start()
	t.Logf("server with %d stale rows started in %v", len(rows), time.Since(start).Round(time.Millisecond))
	c := fxCtx(t, time.Minute)
	for _, r := range rows {
		var v *client.JobStatus
		fxEventually(t, 10*time.Second, r.status+" row "+r.id+" to end", func() bool {
			var err error
			v, err = s.c.Status(c, r.id)
			return err == nil && v.Done
		})
		if (v.Status != "failed" && v.Status != "lost") || v.ExitCode != nil || v.EndedAt == nil {
			t.Errorf("stale %s row (runner pid %d) = %+v, want failed or lost with exit_code null", r.status, r.runnerPID, v)
		}
		row := fxReadRow(t, s.StateDir, r.id)
		switch row.reason {
		case runner.ReasonRunnerLost, runner.ReasonStartupLost:
		default:
			t.Errorf("stale %s row: reason %q", r.status, row.reason)
		}
		t.Logf("stale %s row (runner pid %d) -> %s (%s)", r.status, r.runnerPID, v.Status, row.reason)
	}
	list, err := s.c.List(c, "", 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list {
		switch j.Status {
		case "created", "starting", "running":
			t.Errorf("list still shows %s %s", j.JobID, j.Status)
		}
	}
}

// A server killed while runs are being started: after the restart no job
// stays created / starting / running, and the end reported agrees with
// what happened: a job reported failed (never started) did not run its
// script, a job reported exited did. The kill lands at a few moments of the
// burst; which states it catches varies from run to run.
func TestFaultServerKilledDuringRunBurst(t *testing.T) {
	parallel(t)
	for _, delay := range []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond, 25 * time.Millisecond, 40 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			s := startServer(t, serverOpts{})
			c := fxCtx(t, time.Minute)
			var wg sync.WaitGroup
			for i := 0; i < 12; i++ {
				dir := fxJobDir(t)
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.c.Run(c, client.RunRequest{Script: "echo $$ > ran; sleep 0.3", Cwd: dir, Mode: fxModes[i%2], Timeout: 5})
				}()
			}
			time.Sleep(delay)
			s.kill(syscall.SIGKILL)
			wg.Wait()
			// What the dead server left in the database.
			seen := map[string]int{}
			if rows, err := fxDB(t, s.StateDir).Query(`SELECT status FROM jobs`); err == nil {
				for rows.Next() {
					var st string
					rows.Scan(&st)
					seen[st]++
				}
				rows.Close()
			}
			s.start()
			var left []string
			fxEventually(t, 20*time.Second, "every job to end after the restart", func() bool {
				list, err := s.c.List(c, "", 200)
				if err != nil {
					return false
				}
				left = left[:0]
				for _, j := range list {
					switch j.Status {
					case "created", "starting", "running":
						left = append(left, j.JobID+" "+j.Status)
					}
				}
				return len(left) == 0
			})
			// Give a runner that was still starting time to run its script.
			time.Sleep(700 * time.Millisecond)
			counts := map[string]int{}
			rows, err := fxDB(t, s.StateDir).Query(`SELECT id, status, reason, cwd FROM jobs`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id, st, reason, cwd string
				if err := rows.Scan(&id, &st, &reason, &cwd); err != nil {
					t.Fatal(err)
				}
				counts[st+"/"+reason]++
				_, statErr := os.Stat(filepath.Join(cwd, "ran"))
				ran := statErr == nil
				switch {
				case st == "failed" && ran:
					t.Errorf("job %s is failed (%s) but its script ran", id, reason)
				case st == "exited" && !ran:
					t.Errorf("job %s exited but its script never ran", id)
				}
				if p := fxRunnerSeen(id); p != 0 {
					t.Errorf("runner %d of finished job %s (%s) still runs", p, id, st)
				}
			}
			t.Logf("rows at the kill: %v; after the restart: %v", seen, counts)
		})
	}
}

// ---- 9-10: volume ----

// 100 MiB of output completes; the server's and the runner's memory stay flat.
func TestFaultHundredMiBOutput(t *testing.T) {
	parallel(t)
	const size = 100 << 20
	s := startServer(t, serverOpts{})
	cases := []struct {
		mode, script string
		byteOK       func(byte) bool
	}{
		{"stdio", `head -c 100M /dev/zero | tr '\0' 'a'`, func(b byte) bool { return b == 'a' }},
		{"pty", `yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 100M`, func(b byte) bool { return b == 'a' || b == '\n' }},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			res, _ := fxStart(t, s, tc.mode, tc.script, 0.01)
			spid := s.cmd.Process.Pid
			var maxServer, maxRunner, samples int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				rpid := 0
				for {
					select {
					case <-stop:
						return
					case <-time.After(25 * time.Millisecond):
					}
					if rss := fxRSSKB(spid); rss > maxServer {
						maxServer = rss
					}
					if rpid == 0 {
						rpid = fxRunnerSeen(res.JobID)
					}
					if rpid != 0 {
						if rss := fxRSSKB(rpid); rss > maxRunner {
							maxRunner = rss
						}
					}
					samples++
				}
			}()
			// A client follows the output with the largest windows, as an
			// agent paging through it would.
			start := time.Now()
			c := fxCtx(t, 5*time.Minute)
			off := res.Offset
			got := int64(len(res.Output))
			bad := 0
			check := func(s string) {
				for i := 0; i < len(s); i++ {
					if !tc.byteOK(s[i]) {
						bad++
					}
				}
			}
			check(res.Output)
			var last *client.JobResult
			for {
				r, err := s.c.Wait(c, res.JobID, client.WaitRequest{Offset: off, Timeout: f64(30), OutputLimit: 524288})
				if err != nil {
					close(stop)
					t.Fatalf("wait at %d: %v", off, err)
				}
				got += int64(len(r.Output))
				check(r.Output)
				off = r.Offset
				if r.Done && !r.Truncated {
					last = r
					break
				}
			}
			el := time.Since(start)
			close(stop)
			<-sampled
			t.Logf("%s: 100 MiB in %v; max RSS server %.1f MB, runner %.1f MB (%d samples)", tc.mode, el.Round(time.Millisecond), float64(maxServer)/1024, float64(maxRunner)/1024, samples)
			if last.Status != "exited" || code(last) != 0 {
				t.Errorf("end = %s %d", last.Status, code(last))
			}
			if fi, err := os.Stat(last.OutputPath); err != nil || fi.Size() != size {
				t.Errorf("output.log size = %v %v, want %d", fi.Size(), err, size)
			}
			if got != size || off != size || bad != 0 {
				t.Errorf("client read %d bytes up to offset %d (%d unexpected bytes), want %d", got, off, bad, size)
			}
			if os.Getenv("SHELLCTL_E2E_RACE") != "" {
				t.Logf("race-detector build: memory bounds not checked")
				return
			}
			if maxServer == 0 || maxServer > 50*1024 {
				t.Errorf("server max RSS %d kB, want under 50 MB", maxServer)
			}
			if maxRunner == 0 || maxRunner > 50*1024 {
				t.Errorf("runner max RSS %d kB, want under 50 MB", maxRunner)
			}
		})
	}
}

// 50 parallel runs all succeed with their own output.
func TestFaultFiftyParallelRuns(t *testing.T) {
	s := startServer(t, serverOpts{})
	const n = 50
	errs := make(chan error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mode := fxModes[i%2]
			c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := s.c.Run(c, client.RunRequest{Script: fmt.Sprintf("i=%d; echo \"job $i\"", i), Mode: mode, Timeout: 60})
			if err != nil {
				errs <- fmt.Errorf("run %d: %w", i, err)
				return
			}
			out := r.Output
			for !r.Done {
				r, err = s.c.Wait(c, r.JobID, client.WaitRequest{Offset: r.Offset, Timeout: f64(30)})
				if err != nil {
					errs <- fmt.Errorf("wait %d: %w", i, err)
					return
				}
				out += r.Output
			}
			if want := fmt.Sprintf("job %d\n", i); out != want || r.Status != "exited" || code(r) != 0 {
				errs <- fmt.Errorf("job %d (%s): %s %d %q, want exited 0 %q", i, mode, r.Status, code(r), out, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d parallel runs done in %v", n, time.Since(start).Round(time.Millisecond))
	list, err := s.c.List(fxCtx(t, time.Minute), "exited", 200)
	if err != nil || len(list) != n {
		t.Errorf("exited jobs listed: %d %v, want %d", len(list), err, n)
	}
}

// A runner that ends removes the empty job cgroups that runners which died
// left beside its own.
func TestFaultStaleJobCgroupsSwept(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, _ := s.runDone(t, client.RunRequest{Script: "grep '^0::' /proc/self/cgroup", Mode: "stdio"})
	raw, err := os.ReadFile(res.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(raw)), "0::"))
	if !strings.HasPrefix(filepath.Base(rel), "shellctl-") {
		t.Skipf("jobs run without a cgroup here (%q)", raw)
	}
	mount := ""
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 8 && strings.Contains(line, " - cgroup2 ") {
			mount = f[4]
		}
	}
	if mount == "" {
		t.Skip("no cgroup2 mount")
	}
	parent := filepath.Join(mount, filepath.Dir(rel))
	sid, err := os.ReadFile(filepath.Join(s.StateDir, "server-id"))
	if err != nil {
		t.Fatal(err)
	}
	// Named as this server's runners name theirs; no runner holds its lock.
	stale := filepath.Join(parent, "shellctl-"+strings.TrimSpace(string(sid))+"-999999-0badcafe")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Skipf("cannot make a cgroup here: %v", err)
	}
	t.Cleanup(func() { syscall.Rmdir(stale) })
	s.runDone(t, client.RunRequest{Script: "true"})
	fxEventually(t, 5*time.Second, "stale cgroup removed", func() bool {
		_, err := os.Stat(stale)
		return os.IsNotExist(err)
	})
}
