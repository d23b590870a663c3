package jobpeer

import "fmt"

// Config says where the jobs are.
type Config struct {
	// CgroupDir is the directory under which the runners make their jobs'
	// cgroup v2 groups (the server's own group: runners are its children);
	// "" when jobs have no cgroup (--no-cgroup, no cgroup v2), and only the
	// process walk decides.
	CgroupDir string
	// RunnerComm is the command name (/proc/<pid>/comm, 15 bytes at most)
	// of the runner binary: a process descending from one is a job's.
	RunnerComm string
}

// Verdict is the decision for one connection.
type Verdict struct {
	// Job is true when the connection must be refused: a job's process
	// opened it, or the server could not tell who did although the
	// client is on this machine.
	Job bool
	// JobID names the job when it is known ("" for a leftover of an ended
	// job, or when the owner is gone).
	JobID string
	// Why says how it was decided (for the log).
	Why string
}

// String is the verdict for a log line.
func (v Verdict) String() string {
	if !v.Job {
		return "not a job: " + v.Why
	}
	return fmt.Sprintf("job %q: %s", v.JobID, v.Why)
}
