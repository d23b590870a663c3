package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// DefaultStopGrace is how long a job gets between SIGTERM and SIGKILL when
// a server that is PID 1 stops (--stop-grace): short, so the whole stop
// fits in the second a container runtime's stop is usually given before
// its own SIGKILL (docker's default is 10 s, Kubernetes' 30 s).
const DefaultStopGrace = 500 * time.Millisecond

// IsInit reports whether this process is PID 1 of its PID namespace.
func IsInit() bool { return os.Getpid() == 1 }

// CheckInitProc refuses to run as PID 1 under a /proc of another PID
// namespace: the server reads /proc to find and end a lost job's
// processes, and there it would take the host's process numbers for its
// own namespace's. A container runtime mounts the namespace's own proc.
func CheckInitProc() error {
	if !IsInit() {
		return nil
	}
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fmt.Errorf("running as PID 1 but /proc/self cannot be read (%w): mount a proc of this PID namespace on /proc", err)
	}
	if self != "1" {
		return fmt.Errorf("running as PID 1 but /proc belongs to another PID namespace (/proc/self is %s, not 1): mount a proc of this namespace on /proc (a container runtime does)", strconv.Quote(self))
	}
	return nil
}

// StopAsInit is Stop for a server that is PID 1: when it exits, the kernel
// kills every process left in its PID namespace, so instead of leaving the
// jobs running it ends each through the termination ladder (SIGTERM,
// grace, SIGKILL) and records its end before it closes the database. New
// connections are refused from the start; a run that was in flight when
// the stop began is ended too once its request is done.
func (s *Server) StopAsInit(grace time.Duration) error {
	log := s.log()
	log.Warn("stopping as PID 1: ending every running job (they would die with the PID namespace)", "grace", grace.String(), "jobs", s.jobs.Live())
	started := time.Now()
	// The ladder's own wait is grace; what is left is the job's record.
	ctx, cancel := context.WithTimeout(context.Background(), grace+shutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.shutdownHTTP() }()
	n, err := s.jobs.EndAll(ctx, grace)
	herr := <-shut
	// Runs whose requests were still in flight when the listener closed.
	m, err2 := s.jobs.EndAll(ctx, grace)
	s.jobs.Close()
	cerr := s.st.Close()
	log.Warn("stopped as PID 1", "jobs_ended", n+m, "took", time.Since(started).Round(time.Millisecond).String())
	return errors.Join(err, err2, herr, cerr)
}
