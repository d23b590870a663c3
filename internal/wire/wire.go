// Package wire holds the answer shapes of the /v1 API, with exactly the keys
// http-api.md lists: the server encodes them (internal/api) and the Go client
// decodes them (internal/client), so the two cannot drift apart. The Python
// SDK rejects an answer with a key it does not expect: add no field here.
package wire

// JobResult is the answer of run, wait, input and tail.
type JobResult struct {
	JobID      string `json:"job_id"`
	Done       bool   `json:"done"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	OutputPath string `json:"output_path"`
	Output     string `json:"output"`
	Offset     int64  `json:"offset"`
	Truncated  bool   `json:"truncated"`
}

// JobStatus is the answer of status and terminate; times are null until set.
type JobStatus struct {
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	Done      bool    `json:"done"`
	ExitCode  *int    `json:"exit_code"`
	CreatedAt string  `json:"created_at"`
	StartedAt *string `json:"started_at"`
	EndedAt   *string `json:"ended_at"`
	Offset    int64   `json:"offset"`
}

// JobInfo is one item of a list; started_at and ended_at only when set.
type JobInfo struct {
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	StartedAt *string `json:"started_at,omitempty"`
	EndedAt   *string `json:"ended_at,omitempty"`
}

// JobList is the answer of list.
type JobList struct {
	Jobs []JobInfo `json:"jobs"`
}

// Deleted is the answer of delete.
type Deleted struct {
	JobID   string `json:"job_id"`
	Deleted bool   `json:"deleted"`
}
