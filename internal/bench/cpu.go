package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture the runtime builds for).
const userHZ = 100

// treeCPU is the CPU time of process pid and of every child it has
// reaped (theirs include their own reaped children): for the server,
// itself, the runners it reaped and, through them, their jobs.
func treeCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis; utime, stime,
	// cutime and cstime are fields 14–17 of the whole line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// childrenCPU is the CPU time of the children this process has reaped.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCPU is the CPU a job costs the runtime (the server and the job's
// runner, and the job's confinement) beside what the job's own process
// costs: Runs pty jobs of echo hi back to back, the server's CPU and that
// of the children it reaped (runners, and through them their jobs)
// before and after, less the job's own process measured alone — the same
// script, run as the job runs it (`/bin/sh` of a script file) in a bare
// PTY, timed by getrusage of this process's children.
func benchCPU(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: "CPU per job, server + runner", Unit: Millis, Target: Target{Reported, 0}}
	// The warm-up's runners have all left and been reaped before the
	// first reading; the measured runs' before the second.
	before, err := cpuAfterJobs(ctx, e, 5)
	if err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	after, err := cpuAfterJobs(ctx, e, s.Runs)
	if err != nil {
		r.Err = err.Error()
		return []*Row{r}
	}
	total := ms(after-before) / float64(s.Runs)

	script := filepath.Join(e.Tmp, "cpu-job.sh")
	if err := os.WriteFile(script, []byte(echoHi+"\n"), 0o644); err != nil {
		r.FloorErr = err.Error()
		return []*Row{r}
	}
	c0 := childrenCPU()
	for i := 0; i < s.Runs; i++ {
		if err := ptyRun(exec.Command("/bin/sh", script)); err != nil {
			r.FloorErr = err.Error()
			return []*Row{r}
		}
	}
	own := ms(childrenCPU()-c0) / float64(s.Runs)
	r.Runtime, r.Floor = One(total-own), One(own)
	r.Notes = append(r.Notes, fmt.Sprintf("%d pty jobs of `%s` back to back: the server's CPU and its reaped children's (runners, their jobs) grew %.1f ms a job; less the job's own process, `/bin/sh` of the same script in a bare PTY (getrusage of the bench's children), %.2f ms; /proc/PID/stat counts in 10 ms ticks",
		s.Runs, echoHi, total, own))
	return []*Row{r}
}

// ptyRun runs cmd on a bare PTY, reads its output to the end and waits.
func ptyRun(cmd *exec.Cmd) error {
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 200, Rows: 50})
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Read(buf); err != nil {
			break // EIO once the last slave fd closes
		}
	}
	f.Close()
	return cmd.Wait()
}

// nonLineMiB is the spec's size of the non-line output.
const nonLineMiB = 8

// benchNonLine: `cat` of 8 MiB of random bytes in a pty job, with the
// screen emulator and without it (a second server that runs pty jobs
// without their screen, SHELLCTL_BENCH_NO_SCREEN=1), interleaved. Random
// bytes are what defeats the screen's fast path for plain lines: every
// escape and control byte goes through the emulator.
func benchNonLine(ctx context.Context, e *Env, s Sizes) []*Row {
	r := &Row{Figure: fmt.Sprintf("pty non-line output, %d MiB random bytes", nonLineMiB), Unit: Millis, Target: Target{RatioAtMost, 1.2}}
	bare, err := StartEnvWith(ctx, e.Bin, []string{"SHELLCTL_BENCH_NO_SCREEN=1"})
	if err != nil {
		r.Err = "the server without the screen: " + err.Error()
		return []*Row{r}
	}
	defer bare.Close()
	data := make([]byte, nonLineMiB<<20)
	rng := rand.New(rand.NewPCG(31, 41)) // the same bytes in every run
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	const name = "nonline.bin"
	for _, home := range []string{e.Home, bare.Home} {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o644); err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		defer os.Remove(filepath.Join(home, name))
	}
	script := "cat " + name
	var rt, fl []float64
	for i := -1; i < s.Reps; i++ { // one warm-up round
		d, id, err := e.RunUntilDone(ctx, "pty", script)
		if id != "" {
			e.Client.Delete(ctx, id, true, 1)
		}
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		f, fid, err := bare.RunUntilDone(ctx, "pty", script)
		if fid != "" {
			bare.Client.Delete(ctx, fid, true, 1)
		}
		if err != nil {
			r.FloorErr = err.Error()
			return []*Row{r}
		}
		if i >= 0 {
			rt, fl = append(rt, ms(d)), append(fl, ms(f))
		}
	}
	r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
	r.Notes = append(r.Notes, fmt.Sprintf("%d × pty job `cat` of %d MiB of random bytes to done, with the screen emulator, vs the same on a server whose pty jobs have no screen (SHELLCTL_BENCH_NO_SCREEN=1), interleaved", s.Reps, nonLineMiB))
	return []*Row{r}
}

// cpuAfterJobs runs n pty jobs of echo hi back to back, lets their
// runners leave and be reaped, then reads the server's CPU with its reaped
// children's (treeCPU).
func cpuAfterJobs(ctx context.Context, e *Env, n int) (time.Duration, error) {
	for range n {
		if _, _, err := e.RunToDone(ctx, "pty", echoHi, 30); err != nil {
			return 0, err
		}
	}
	if err := settle(ctx, 500*time.Millisecond); err != nil {
		return 0, err
	}
	return treeCPU(e.PID)
}
