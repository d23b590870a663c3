// Package jobstate names the states of a job. It is its own package so the
// runner can speak of states without linking the database code (which would
// make every runner bigger and slower to start).
package jobstate

// Job states. The last four are terminal.
const (
	StatusCreated    = "created"
	StatusStarting   = "starting"
	StatusRunning    = "running"
	StatusExited     = "exited"
	StatusTerminated = "terminated"
	StatusFailed     = "failed"
	StatusLost       = "lost"
)

// IsTerminal reports whether a job in status s is done.
func IsTerminal(s string) bool {
	switch s {
	case StatusExited, StatusTerminated, StatusFailed, StatusLost:
		return true
	}
	return false
}

// Valid reports whether s names a job state.
func Valid(s string) bool {
	switch s {
	case StatusCreated, StatusStarting, StatusRunning:
		return true
	}
	return IsTerminal(s)
}
