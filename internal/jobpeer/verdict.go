package jobpeer

import "fmt"

// Config says where the jobs are.
type Config struct {
	// CgroupDir is the directory of the server's own cgroup v2 group (""
	// where there is none): the runners, its children, are in it, and make
	// their jobs' groups under it when JobGroups is set.
	CgroupDir string
	// JobGroups: every job has a group of its own under CgroupDir (else
	// --no-cgroup: the jobs share the server's group).
	JobGroups bool
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
