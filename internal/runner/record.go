package runner

// What only the runner knows of its job and reports for the job's record
// (GET /v1/jobs/{id}/record): the limits it applied, the job's process
// group and its tree's resource usage; and signals sent on request.

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/shellctl/shellctl/internal/jsonstr"
	"github.com/shellctl/shellctl/internal/proctree"
	"golang.org/x/sys/unix"
)

// AppliedLimits are the limits in force for a job, as its runner applied
// them: null where none applies. The runtime and output limits are the
// runner's own and always apply when asked; memory and pids apply through
// the job's cgroup, when the machine gives it one with those controllers.
type AppliedLimits struct {
	RuntimeMS   *int64 `json:"runtime_ms"`
	OutputBytes *int64 `json:"output_bytes"`
	MemoryBytes *int64 `json:"memory_bytes"`
	Pids        *int64 `json:"pids"`
	// Why says why an asked cgroup limit is not applied.
	Why string `json:"why,omitempty"`
}

// Usage is the resource usage of a job's tree.
type Usage struct {
	CPUUserMS   int64 `json:"cpu_user_ms"`
	CPUSystemMS int64 `json:"cpu_system_ms"`
	MaxRSSKiB   int64 `json:"max_rss_kib"`
	// Source says where the figures come from.
	Source string `json:"source"`
}

// UsageSourceRusage: getrusage(RUSAGE_CHILDREN) of the runner once the
// job's tree is reaped. The runner forks only the job, and as the child
// subreaper of its tree it reaps every orphan: the figures are the job's
// process and every descendant that ended (each reaped by its parent,
// whose own figures then include it). CPU times are sums, the RSS is the
// largest of one process, not of the tree at once.
const UsageSourceRusage = "rusage_children"

func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// appliedLimits describes the limits in force for the runner's job.
func (r *Runner) appliedLimits() string {
	s := r.spec
	a := AppliedLimits{
		RuntimeMS:   positive(int64(s.MaxRuntimeSeconds * 1000)),
		OutputBytes: positive(s.MaxOutputBytes),
	}
	if r.limitOpts.MemoryMax > 0 && r.limitInfo.MemoryLimitApplied {
		a.MemoryBytes = positive(r.limitOpts.MemoryMax)
	}
	if r.limitOpts.PidsMax > 0 && r.limitInfo.PidsLimitApplied {
		a.Pids = positive(r.limitOpts.PidsMax)
	}
	if (r.limitOpts.MemoryMax > 0 && a.MemoryBytes == nil) || (r.limitOpts.PidsMax > 0 && a.Pids == nil) {
		a.Why = r.limitInfo.Why
		if a.Why == "" {
			a.Why = "the job's cgroup has no controller for it (" + r.limitInfo.Kind + ")"
		}
	}
	return string(a.appendJSON(nil))
}

// appendJSON writes a as encoding/json does (no reflection in a runner).
func (a *AppliedLimits) appendJSON(b []byte) []byte {
	ptr := func(key string, p *int64) {
		b = append(b, key...)
		if p == nil {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendInt(b, *p, 10)
		}
	}
	ptr(`{"runtime_ms":`, a.RuntimeMS)
	ptr(`,"output_bytes":`, a.OutputBytes)
	ptr(`,"memory_bytes":`, a.MemoryBytes)
	ptr(`,"pids":`, a.Pids)
	if a.Why != "" {
		b = append(b, `,"why":`...)
		b = jsonstr.Append(b, a.Why)
	}
	return append(b, '}')
}

// appendJSON writes u as encoding/json does.
func (u *Usage) appendJSON(b []byte) []byte {
	b = append(b, `{"cpu_user_ms":`...)
	b = strconv.AppendInt(b, u.CPUUserMS, 10)
	b = append(b, `,"cpu_system_ms":`...)
	b = strconv.AppendInt(b, u.CPUSystemMS, 10)
	b = append(b, `,"max_rss_kib":`...)
	b = strconv.AppendInt(b, u.MaxRSSKiB, 10)
	b = append(b, `,"source":`...)
	b = jsonstr.Append(b, u.Source)
	return append(b, '}')
}

// treeUsage is the job's tree's usage (UsageSourceRusage), as JSON.
func treeUsage() string {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return ""
	}
	ms := func(tv unix.Timeval) int64 { return tv.Sec*1000 + int64(tv.Usec)/1000 }
	u := Usage{CPUUserMS: ms(ru.Utime), CPUSystemMS: ms(ru.Stime), MaxRSSKiB: ru.Maxrss, Source: UsageSourceRusage}
	return string(u.appendJSON(nil))
}

// Signal targets.
const (
	TargetForeground = "foreground" // the terminal's foreground process group (pty)
	TargetGroup      = "group"      // the job's process group
	TargetTree       = "tree"       // every process of the job's tree
)

// signal sends sig to target; the answer is "" or why not.
func (r *Runner) signal(sig int, target string) string {
	if sig <= 0 || sig > 64 {
		return fmt.Sprintf("signal %d is not a signal number", sig)
	}
	r.mu.Lock()
	done, pid, pgid := r.exit != nil, r.pid, r.pgid
	r.mu.Unlock()
	if done {
		return "job_not_running"
	}
	if pid == 0 {
		return "the job has not started yet"
	}
	// Both group targets reach only the job's own processes in the group,
	// each pinned by a pidfd and checked (proctree.SignalGroup): never
	// kill(-pgid). The foreground is the job's to choose, and it may have
	// handed it to a group that is not the job's (its runner's); and the
	// recorded group may have no process of the job left in it (its leader
	// exited, the rest moved on), its number free for any process to take.
	switch target {
	case TargetForeground:
		if r.spec.Mode != "pty" {
			return "input_unsupported"
		}
		fg := r.foregroundGroup()
		if fg <= 0 {
			return "the job's terminal has no foreground process group (the job left the terminal or ended)"
		}
		return r.signalGroup(fg, sig, "the terminal's foreground process group")
	case TargetGroup:
		if pgid <= 0 {
			return "the job's process group is not known"
		}
		return r.signalGroup(pgid, sig, "its process group")
	case TargetTree:
		return errText(r.tracker.Signal(syscall.Signal(sig)))
	}
	return fmt.Sprintf("target %q is not one of foreground, group, tree", target)
}

// signalGroup sends sig to the job's processes in group pgrp (what names
// the group, for the answer when none is there).
func (r *Runner) signalGroup(pgrp, sig int, what string) string {
	n, err := proctree.SignalGroup(r.tracker, pgrp, syscall.Signal(sig))
	if err != nil {
		return err.Error()
	}
	if n == 0 {
		return fmt.Sprintf("the job has no process in %s (%d): it left that group or the group is not the job's; send the signal to target \"tree\" to reach every process of the job", what, pgrp)
	}
	return ""
}

func errText(err error) string {
	switch {
	case err == nil:
		return ""
	case err == unix.ESRCH:
		return "job_not_running"
	}
	return err.Error()
}
