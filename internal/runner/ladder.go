package runner

// Ending the tree: the termination ladder on request or at a limit, and
// what happens to the job's group when the runner leaves.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shellctl/shellctl/internal/proctree"
	"golang.org/x/sys/unix"
)

// leftoverWait bounds how long a finished runner waits for the last
// processes of its job's group to be gone before it looks at what is left.
const leftoverWait = 200 * time.Millisecond

// closeTracker removes the job's cgroup once the job is over. What a job
// that ended by itself left running (a `nohup cmd &` server) is no longer
// the job's: it is moved up to the parent group, so the job's group can go
// and no empty groups pile up over a sandbox's life.
func (r *Runner) closeTracker() {
	r.rmu.Lock()
	tr := r.tracker
	path := r.cgroupPath
	r.rmu.Unlock()
	if tr == nil {
		return
	}
	r.mu.Lock()
	ended := r.terminating != ""
	r.mu.Unlock()
	if ended {
		// Ended on request or at a limit: nothing of the job may outlive
		// it, and nothing is moved out of its group. The ladder emptied
		// the tree; whatever appeared since is killed too, for as long as
		// it takes.
		r.killToEmpty(tr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), leftoverWait)
	err := tr.WaitEmpty(ctx)
	cancel()
	if err != nil && path != "" && !ended {
		if pids, perr := tr.Pids(); perr == nil {
			parent := filepath.Join(filepath.Dir(path), "cgroup.procs")
			for _, pid := range pids {
				_ = os.WriteFile(parent, []byte(strconv.Itoa(pid)), 0)
			}
		}
	}
	if err := tr.Close(); err != nil {
		r.log.Warn("remove the job's cgroup", "err", err)
	}
	if path != "" {
		sweepCgroups(filepath.Dir(path))
	}
}

// killToEmpty kills every process of the job until none is left.
func (r *Runner) killToEmpty(tr proctree.Tracker) {
	for {
		_ = tr.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := tr.WaitEmpty(ctx)
		cancel()
		if err == nil {
			return
		}
		pids, _ := tr.Pids()
		r.log.Warn("processes of an ended job survive SIGKILL: killing again", "pids", pids)
	}
}

// sweepCgroups removes empty job cgroups beside ours whose runner is gone
// (one that was killed never removed its own); a group still in use is not
// empty, and rmdir refuses it.
func sweepCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "shellctl-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || unix.Kill(pid, 0) == nil {
			continue
		}
		_ = unix.Rmdir(filepath.Join(parent, e.Name()))
	}
}

// terminate runs the ladder once; later calls wait for the same end.
func (r *Runner) terminate(reason string, grace time.Duration) {
	r.mu.Lock()
	if r.exit != nil {
		r.mu.Unlock()
		return
	}
	if r.ladder != nil {
		ch := r.ladder
		r.mu.Unlock()
		<-ch
		return
	}
	r.terminating = reason
	ch := make(chan struct{})
	r.ladder = ch
	r.mu.Unlock()
	defer close(ch)
	fg := r.foregroundGroup()
	if err := proctree.Ladder(context.Background(), r.tracker, fg, grace); err != nil {
		r.log.Error("terminate", "err", err)
	}
}

// watchRuntime ends the job at --max-job-runtime.
func (r *Runner) watchRuntime() {
	if r.spec.MaxRuntimeSeconds <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(r.spec.MaxRuntimeSeconds * float64(time.Second)))
	go func() {
		defer t.Stop()
		select {
		case <-t.C:
			r.terminate(ReasonMaxRuntime, limitGrace)
		case <-r.done:
		}
	}()
}
