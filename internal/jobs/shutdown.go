package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// EndAll ends every live job through the termination ladder (SIGTERM to its
// tree, grace, SIGKILL), as a terminate request does, and returns once
// every end is recorded or ctx is done. It is for a server that is PID 1 of
// its PID namespace: when it exits, the kernel kills every process left in
// the namespace, so its jobs are ended first and their ends recorded
// rather than left to die unrecorded. It returns how many jobs it ended.
func (s *Service) EndAll(ctx context.Context, grace time.Duration) (int, error) {
	s.mu.Lock()
	live := make([]*job, 0, len(s.live))
	for _, j := range s.live {
		live = append(live, j)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(live))
	for i, j := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.endForStop(ctx, j, grace); err != nil {
				errs[i] = fmt.Errorf("end job %s: %w", j.id, err)
			}
		}()
	}
	wg.Wait()
	return len(live), errors.Join(errs...)
}

// endForStop asks j's runner to end it and waits until its end is known. A
// job whose runner is not attached yet (it is starting) is asked again once
// it changes state.
func (s *Service) endForStop(ctx context.Context, j *job, grace time.Duration) error {
	for !j.done() {
		changed := j.look().changed
		a, err := s.request(ctx, j, &proto.Msg{T: proto.TTerminate, Grace: grace.Seconds()})
		switch {
		case errors.Is(err, ErrNotRunning):
			// No runner to ask yet (or any more): wait for the next change.
		case err != nil:
			return err
		case a.Err != "" && !j.done():
			return errors.New(a.Err)
		default:
			// Asked: the exit comes before the ack, or the channel broke
			// and the job is being ended as lost.
			changed = nil
		}
		if changed == nil {
			for !j.done() {
				ch := j.look().changed
				select {
				case <-ch:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Its end is answered before its row is written: the stop waits for
	// the row too (the job leaves the live set then), or the database
	// closes under the write, and a PID 1's jobs, killed with its
	// namespace, would be read as lost (seen in TestInitStopEndsAndRecordsJobs).
	select {
	case <-j.let:
	case <-ctx.Done():
		return fmt.Errorf("its end is not recorded yet: %w", ctx.Err())
	}
	// A lost job may have left processes its runner could not end.
	if err := s.endLostRow(ctx, j.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
