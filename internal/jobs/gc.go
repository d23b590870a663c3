package jobs

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
)

func (s *Service) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.GC(context.Background(), time.Now())
			s.mu.Lock()
			idle := len(s.live) == 0
			s.mu.Unlock()
			if idle {
				// Nothing runs: hand the memory a busy spell left in the
				// heap back to the system (an idle server stays small).
				debug.FreeOSMemory()
			}
		}
	}
}

// GCRetention is how long a finished job is kept before GC removes it:
// the usual reason a job id that was good a while ago is not found.
func (s *Service) GCRetention() time.Duration { return s.cfg.GCRetention }

// GC removes jobs that ended more than the retention before now: the row
// first, so a removed job is never listed with its directory gone.
func (s *Service) GC(ctx context.Context, now time.Time) int {
	ids, err := s.st.EndedBefore(ctx, now.Add(-s.cfg.GCRetention))
	if err != nil {
		s.log.Error("gc", "err", err)
		return 0
	}
	n := 0
	for _, id := range ids {
		if s.lookup(id) != nil {
			continue
		}
		if err := s.st.Delete(ctx, id); err != nil {
			s.log.Warn("gc delete", "job", id, "err", err)
			continue
		}
		if err := os.RemoveAll(runner.JobDir(s.cfg.StateDir, id)); err != nil {
			s.log.Warn("gc remove dir", "job", id, "err", err)
		}
		n++
	}
	if n > 0 {
		s.log.Info("gc", "removed", n)
	}
	return n
}
