package jobs

// Attach (spec/extended-api.md §8, GET /v1/jobs/{id}/attach): what the
// WebSocket needs of a job beside the Follower that reads its output. Input
// goes the way /input's does (sendInput): one method for every writer of a
// job's input, so what reaches the job, and in which order, does not depend
// on the route it came by.

import (
	"context"
)

// veof is the byte a terminal reads as end of file at the start of a line
// (Ctrl-D, the default VEOF): what "eof" means for a pty job, which has no
// stdin to close.
const veof = 0x04

// AttachInput writes data to job id's input as POST /input does, without
// waiting for its output. A job that takes no input: ErrInputUnsupported;
// one that ended: ErrNotRunning.
func (s *Service) AttachInput(ctx context.Context, id string, data []byte) error {
	j, err := s.attachable(ctx, id)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	return s.sendInput(ctx, j, data)
}

// AttachEOF ends the job's input: for a pty job, the terminal's end of
// file character (Ctrl-D), which a program reading a line at its start
// takes as end of file.
func (s *Service) AttachEOF(ctx context.Context, id string) error {
	j, err := s.attachable(ctx, id)
	if err != nil {
		return err
	}
	return s.sendInput(ctx, j, []byte{veof})
}

// attachable is the live job id, when it takes input.
func (s *Service) attachable(ctx context.Context, id string) (*job, error) {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.mode != "pty" {
		return nil, errorf(ErrInputUnsupported, "job %s runs in stdio mode without a stdin pipe: it takes no input (run it with mode \"pty\")", id)
	}
	return j, nil
}
