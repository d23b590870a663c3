package runner

// Ending the tree: the termination ladder on request or at a limit, and
// what happens to the job's group when the runner leaves.

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shellctl/shellctl/internal/proctree"
)

// leftoverWait bounds how long a finished runner waits for the last
// processes of its job's group to be gone before it looks at what is left.
const leftoverWait = 200 * time.Millisecond

// closeTracker removes the job's cgroup once the job is over. What a job
// that ended by itself left running (a `nohup cmd &` server) stays in the
// job's group: it is still the job's work (the job's limits still bind
// it), and it must stay recognisable as a job's — the server refuses API
// connections made by any job group's process, and moving it to a group of
// the server's would make it a stranger. The group goes with its last
// process: the next sweep of any runner of this server removes it then.
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
		// it. The ladder emptied the tree; whatever appeared since is
		// killed too, for as long as it takes.
		r.killToEmpty(tr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), leftoverWait)
	err := tr.WaitEmpty(ctx)
	cancel()
	if err != nil && path != "" && !ended {
		pids, _ := tr.Pids()
		r.log.Info("the job left processes running: they stay in its cgroup, removed once they are gone", "pids", pids, "cgroup", path)
	} else if err := tr.Close(); err != nil {
		r.log.Warn("remove the job's cgroup", "err", err)
	}
	if path != "" {
		proctree.SweepGroups(filepath.Dir(path), groupPrefix(r.serverID))
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

// noServerID names the groups of a runner that found no server id.
const noServerID = "noserver"

// groupPrefix starts the names of the job groups of one server's runners.
func groupPrefix(serverID string) string { return "shellctl-" + serverID + "-" }

// groupName is a job group's name: shellctl-<server id>-<runner pid>-<time>.
func groupName(serverID string, pid int, now time.Time) string {
	return groupPrefix(serverID) + strconv.Itoa(pid) + "-" + strconv.FormatInt(now.UnixNano()&0xffffffff, 16)
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
	// A terminate that comes while the job starts waits for its process:
	// a ladder over a tree that has none yet would end nothing, and the
	// job would then start and run with its terminate answered by none.
	<-r.startDone
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
