package main

// Copying a job's output to the caller: to its current end (logs) or until
// the job is done (run, logs -f, attach).

import (
	"context"
	"io"
	"sync"

	"github.com/shellctl/shellctl/internal/client"
)

// maxWindow is the largest window the API pages.
const maxWindow = 524288

// followIdle is the idle_flush_seconds of the waits that follow a job: a
// person watching (attach above all) sees output a moment after it is
// written, not after the API's default half second of silence.
const followIdle = 0.02

// jobEnd is how a followed job ended.
type jobEnd struct {
	Status   string
	ExitCode *int
}

// sink is where one channel of a job's output goes, and from which offset.
type sink struct {
	w      io.Writer
	offset int64
}

// follower copies the output and the stderr of a job (each when its sink
// is set) until it is done.
type follower struct {
	c      *client.Client
	id     string
	out    *sink // nil: not copied
	stderr *sink // nil: not copied
}

// run copies until the job is done and returns how it ended: by the
// stream route, or by waits on a server without it.
func (f *follower) run(ctx context.Context) (*jobEnd, error) {
	end, err := f.runStream(ctx)
	if err != nil && noStreamRoute(err) {
		return f.runWait(ctx)
	}
	return end, err
}

// runWait follows by the compatible wait route. Fallback for servers
// without the stream route (GET /v1/jobs/{id}/stream): each wait answers at
// a full window, when the output goes idle, at the job's end or after 30 s,
// and stderr (which has no waiting route) is paged after each answer and at
// the end. Not byte-exact: wait sends bytes that are not UTF-8 as U+FFFD.
func (f *follower) runWait(ctx context.Context) (*jobEnd, error) {
	if f.out == nil {
		// The output's waits tell when the job is done.
		f.out = &sink{w: io.Discard}
	}
	var poke chan struct{}
	var wg sync.WaitGroup
	var errErr error
	stop := make(chan struct{})
	if f.stderr != nil {
		poke = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-poke:
				case <-stop:
					_, errErr = pageStderr(ctx, f.c, f.id, f.stderr)
					return
				}
				if _, err := pageStderr(ctx, f.c, f.id, f.stderr); err != nil {
					errErr = err
					return
				}
			}
		}()
	}
	finish := func() {
		close(stop)
		wg.Wait()
	}
	for {
		t := 30.0
		res, err := f.c.Wait(ctx, f.id, client.WaitRequest{Offset: f.out.offset, Timeout: &t, OutputLimit: maxWindow, IdleFlushSeconds: followIdle})
		if err != nil {
			finish()
			return nil, err
		}
		if _, err := io.WriteString(f.out.w, res.Output); err != nil {
			finish()
			return nil, err
		}
		f.out.offset = res.Offset
		if poke != nil {
			select {
			case poke <- struct{}{}:
			default:
			}
		}
		if res.Done && !res.Truncated {
			finish()
			return &jobEnd{Status: res.Status, ExitCode: res.ExitCode}, errErr
		}
	}
}

// pageStderr copies stderr.log from s.offset to its current end.
func pageStderr(ctx context.Context, c *client.Client, id string, s *sink) (bool, error) {
	moved := false
	for {
		res, err := c.Stderr(ctx, id, s.offset, maxWindow)
		if err != nil {
			return moved, err
		}
		if res.Offset == s.offset {
			return moved, nil
		}
		if _, err := io.WriteString(s.w, res.Output); err != nil {
			return moved, err
		}
		s.offset, moved = res.Offset, true
	}
}

// pageOutput copies output.log from s.offset to its current end.
func pageOutput(ctx context.Context, c *client.Client, id string, s *sink) error {
	for {
		t := 0.0
		res, err := c.Wait(ctx, id, client.WaitRequest{Offset: s.offset, Timeout: &t, OutputLimit: maxWindow})
		if err != nil {
			return err
		}
		if res.Offset == s.offset {
			return nil
		}
		if _, err := io.WriteString(s.w, res.Output); err != nil {
			return err
		}
		s.offset = res.Offset
	}
}
