package jobs

import (
	"errors"
	"fmt"
)

// Error kinds. The api package turns them into status codes; every other
// layer wraps them with what it was doing.
var (
	ErrNotFound         = errors.New("job not found")
	ErrNotRunning       = errors.New("job is not running")
	ErrInputUnsupported = errors.New("input is not supported for stdio jobs")
	ErrJobRunning       = errors.New("job is still running")
	ErrInvalidOffset    = errors.New("invalid offset")
	ErrTooManyJobs      = errors.New("too many running jobs")
	ErrInvalidCwd       = errors.New("invalid cwd")
	ErrCwdNotAllowed    = errors.New("cwd not allowed")
	// stdin pipes (pipes.go)
	ErrInputBackpressure = errors.New("the job is not reading its input")
	ErrStdinClosed       = errors.New("the job's stdin is closed")
)

// kindError carries a kind and a message meant for the client.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
