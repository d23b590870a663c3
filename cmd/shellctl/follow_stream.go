package main

// Following a job by its live stream (GET /v1/jobs/{id}/stream, the
// extended API's §1): byte-exact, and each byte comes as it is written.

import (
	"context"
	"io"
	"sync"

	"github.com/shellctl/shellctl/internal/client"
)

// copyStream writes every chunk of st to w until the end event, which it
// returns.
func copyStream(st *jobStream, w io.Writer) (*streamEvent, error) {
	for {
		ev, err := st.Next()
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case evOutput:
			if _, err := w.Write(ev.Bytes); err != nil {
				return nil, err
			}
		case evEnd:
			return ev, nil
		}
	}
}

// noStreamRoute tells the answer of a server without the stream route
// (404 not_found for the path; an unknown job is job_not_found).
func noStreamRoute(err error) bool {
	return apiCode(err) == "not_found"
}

// runStream copies the output and stderr streams (those with a sink)
// until the job's end. On a server without the stream route it fails
// (noStreamRoute) before any byte is written.
func (f *follower) runStream(ctx context.Context) (*jobEnd, error) {
	type result struct {
		end *streamEvent
		err error
	}
	sinks := []struct {
		s       *sink
		channel string
	}{{f.out, "output"}, {f.stderr, "stderr"}}
	results := make([]result, len(sinks))
	var wg sync.WaitGroup
	for i, k := range sinks {
		if k.s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := openStream(ctx, f.c, f.id, k.channel, k.s.offset)
			defer st.Close()
			end, err := copyStream(st, k.s.w)
			k.s.offset = st.Offset()
			results[i] = result{end, err}
		}()
	}
	wg.Wait()
	var end *streamEvent
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.end != nil && end == nil {
			end = r.end
		}
	}
	return &jobEnd{Status: end.Status, ExitCode: end.ExitCode}, nil
}

// pageStream copies channel from s.offset to size (the size now).
func pageStream(ctx context.Context, c *client.Client, id, channel string, s *sink, size int64) error {
	if s.offset >= size {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := openStream(ctx, c, id, channel, s.offset)
	defer st.Close()
	for s.offset < size {
		ev, err := st.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch ev.Type {
		case evOutput:
			if _, err := s.w.Write(ev.Bytes); err != nil {
				return err
			}
			s.offset = st.Offset()
		case evEnd:
			return nil
		}
	}
	return nil
}

// waitStarted returns once job id has left created and starting, as its
// stream's state events tell (or it ended), so that what follows run -d
// (kill -s, input, attach) finds it running. A server without the stream
// route: at once.
func waitStarted(ctx context.Context, c *client.Client, id string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := openStream(ctx, c, id, "output", 0)
	defer st.Close()
	for {
		ev, err := st.Next()
		switch {
		case err == io.EOF:
			return nil
		case err != nil && noStreamRoute(err):
			return nil
		case err != nil:
			return err
		}
		switch ev.Type {
		case evState:
			if ev.Status != "created" && ev.Status != "starting" {
				return nil
			}
		case evEnd:
			return nil
		}
	}
}
