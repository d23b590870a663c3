package jobs

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// startupGrace is how long a restarted server keeps trying to reach the
// runner of a job that was starting when the previous server stopped (the
// runner binds its control socket once its job is on its way); the
// runners of all such jobs are waited for at once.
const startupGrace = 2 * time.Second

// reconcile finds the jobs that were not finished when the previous server
// stopped: a job whose runner answers is followed again; one whose runner is
// gone gets the end the runner recorded, or becomes lost.
func (s *Service) reconcile(ctx context.Context) error {
	rows, err := s.st.Unfinished(ctx)
	if err != nil {
		return err
	}
	jobs := make([]*job, len(rows))
	conns := make([]*proto.Conn, len(rows))
	// Every runner is dialled at once: a job whose runner may still be
	// about to listen is waited for up to startupGrace, and those waits
	// overlap (one after another, a burst of jobs cut off by a crash kept
	// the restarted server from serving for startupGrace × their number).
	var wg sync.WaitGroup
	for i, row := range rows {
		j := newJob(row.ID, runner.JobDir(s.cfg.StateDir, row.ID), row.Mode)
		j.status = row.Status
		j.created = row.CreatedAt
		if row.StartedAt != nil {
			j.started = *row.StartedAt
		}
		j.size = s.fileSize(row.ID)
		j.key = row.ControlKey
		j.stdin = row.Stdin
		j.lastGrow = time.Now()
		jobs[i] = j
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i] = s.redial(j, row)
		}()
	}
	wg.Wait()
	for i, row := range rows {
		j, c := jobs[i], conns[i]
		if c == nil {
			s.endUnreachable(ctx, j, row)
			continue
		}
		s.mu.Lock()
		s.live[j.id] = j
		s.mu.Unlock()
		s.attach(j, c)
		if err := c.Send(&proto.Msg{T: proto.THello, Key: j.key, Frames: true}); err != nil {
			c.Close()
		}
		s.log.Info("job found again", "job", j.id, "status", row.Status)
	}
	return nil
}

func (s *Service) redial(j *job, row *store.Job) *proto.Conn {
	deadline := time.Now().Add(startupGrace)
	for {
		c, err := dialControl(j.dir, runner.SocketFile)
		if err == nil {
			return c
		}
		// Only a runner that may be alive but not yet listening is worth
		// waiting for: one whose pid is known and alive, or — for a job
		// still "created" — one the previous server may have handed the
		// job to just before it died, before it could record the pid.
		alive := row.RunnerPID != 0 && unix.Kill(row.RunnerPID, 0) == nil
		maybe := row.RunnerPID == 0 && row.Status == store.StatusCreated
		if !(alive || maybe) || time.Now().After(deadline) {
			return nil
		}
		// A poll, but only here: at start-up, for a runner about to bind
		// its socket, never on the path of a job.
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Service) endUnreachable(ctx context.Context, j *job, row *store.Job) {
	// The runner may have recorded the end itself a moment ago.
	if fresh, err := s.st.Get(ctx, row.ID); err == nil && store.IsTerminal(fresh.Status) {
		return
	}
	e := store.Exit{Status: store.StatusLost, Reason: runner.ReasonRunnerLost, EndedAt: time.Now()}
	if row.Status == store.StatusCreated {
		e.Status, e.Reason = store.StatusFailed, runner.ReasonStartupLost
	}
	if e.Status == store.StatusLost {
		s.endLost(row.ID, row.PID, row.Cgroup)
	}
	if err := s.st.Finish(ctx, row.ID, e); err != nil {
		s.log.Warn("record unreachable job", "job", row.ID, "err", err)
	}
	var d time.Duration
	if row.StartedAt != nil {
		d = e.EndedAt.Sub(*row.StartedAt)
	}
	reason := ReasonLabel(e.Status, e.Reason)
	s.cfg.Metrics.JobEnded(e.Status, reason, d)
	s.log.Warn("job runner gone", "job", row.ID, "status", e.Status, "reason", reason)
}
