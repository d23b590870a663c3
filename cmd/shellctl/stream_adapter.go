package main

// The command line reads a job's stream with internal/client's stream
// client (GET /v1/jobs/{id}/stream, extended-api.md §1), which resumes a
// broken connection by itself.

import (
	"context"

	"github.com/shellctl/shellctl/internal/client"
)

type (
	jobStream   = client.Stream
	streamEvent = client.StreamEvent
)

const (
	evOutput = client.EventOutput
	evState  = client.EventState
	evEnd    = client.EventEnd
)

// openStream opens the stream of channel ("output" or "stderr") of job id
// from offset.
func openStream(ctx context.Context, c *client.Client, id, channel string, offset int64) *jobStream {
	return c.Stream(ctx, id, client.StreamOptions{Offset: offset, Channel: channel})
}
