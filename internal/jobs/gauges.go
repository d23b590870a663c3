package jobs

import "github.com/shellctl/shellctl/internal/store"

// Running counts the jobs in status running (read at scrape time).
func (s *Service) Running() int {
	s.mu.Lock()
	live := make([]*job, 0, len(s.live))
	for _, j := range s.live {
		live = append(live, j)
	}
	s.mu.Unlock()
	n := 0
	for _, j := range live {
		j.mu.Lock()
		if j.status == store.StatusRunning {
			n++
		}
		j.mu.Unlock()
	}
	return n
}

// Live counts the jobs whose end is not yet recorded.
func (s *Service) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// WarmRunners counts the started runners waiting for a job.
func (s *Service) WarmRunners() int { return int(s.warm.Load()) }
