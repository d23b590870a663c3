package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// EndAll ends every live job through the termination ladder (SIGTERM to its
// tree, grace, SIGKILL), as a terminate request does, and returns once
// every end is recorded or ctx is done. It is for a server that is PID 1 of
// its PID namespace: when it exits, the kernel kills every process left in
// the namespace, so its jobs are ended first and their ends recorded
// rather than left to die unrecorded. It returns how many jobs it ended.
func (s *Service) EndAll(ctx context.Context, grace time.Duration) (int, error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.terminate(ctx, id, grace, ""); err != nil {
				errs[i] = fmt.Errorf("end job %s: %w", id, err)
			}
		}()
	}
	wg.Wait()
	return len(ids), errors.Join(errs...)
}
