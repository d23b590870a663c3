package jobs

// Attach (spec/extended-api.md §8, GET /v1/jobs/{id}/attach): what the
// WebSocket needs of a job beside the Follower that reads its output. Input
// goes the way /input's does (sendInput): one method for every writer of a
// job's input, so what reaches the job, and in which order, does not depend
// on the route it came by. A pty job's input goes to its terminal; a stdio
// job run with "stdin":"pipe" has its input go to the pipe (pipes.go).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
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
	if j.mode != "pty" {
		return s.sendPipeHeld(ctx, j, data, false)
	}
	return s.sendBlocking(ctx, j, data)
}

// attachPipeWait is how long one try at a stdin pipe waits for a job that
// does not read before it is tried again with the bytes not yet taken. It
// bounds how long the runner's writer still holds an input after its
// client left (the input after it waits in the runner's queue meanwhile),
// not how long a client is held back, which has no bound but the client.
const attachPipeWait = 5 * time.Second

// sendPipeHeld is sendInput for attach to a stdin pipe: a job that does
// not read holds the client back (its reader waits here, so it stops
// reading the socket) until it reads, or the client or the job goes; the
// bytes are never refused or dropped: after backpressure the ones not
// taken are sent again. Each try waits in the runner (the pipe's write
// deadline), never in the server.
func (s *Service) sendPipeHeld(ctx context.Context, j *job, data []byte, eof bool) error {
	for {
		taken, err := s.sendInput(ctx, j, data, eof, attachPipeWait)
		var bp *BackpressureError
		if !errors.As(err, &bp) {
			return err
		}
		data = data[taken:]
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// sendBlocking is sendInput for attach: the runner holds its answer until
// the bytes are queued for the terminal (proto Block), so a client that
// types or pastes faster than the job reads is held back, never told its
// bytes were refused.
func (s *Service) sendBlocking(ctx context.Context, j *job, text []byte) error {
	j.inputMu.Lock()
	defer j.inputMu.Unlock()
	for len(text) > 0 {
		piece := text[:min(len(text), inputPiece)]
		text = text[len(piece):]
		a, err := s.requestUntilEnd(ctx, j, &proto.Msg{T: proto.TInput, Data: piece, Block: true})
		if err == nil && a.Err == "" {
			j.inputAcked(a.InputSeq) // input-wait
			continue
		}
		if j.done() || errors.Is(err, ErrNotRunning) || (a != nil && a.Err == "job_not_running") {
			return errorf(ErrNotRunning, "job %s is no longer running", j.id)
		}
		if err == nil {
			err = errors.New(a.Err)
		}
		return fmt.Errorf("send input to job %s: %w", j.id, err)
	}
	return nil
}

// AttachEOF ends the job's input: for a stdio job, its stdin pipe is
// closed (the job reads end of file; ErrStdinClosed if it already was);
// for a pty job, the terminal's end of file character (Ctrl-D), which a
// program reading a line at its start takes as end of file.
func (s *Service) AttachEOF(ctx context.Context, id string) error {
	j, err := s.attachable(ctx, id)
	if err != nil {
		return err
	}
	if j.mode != "pty" {
		return s.sendPipeHeld(ctx, j, nil, true)
	}
	return s.sendBlocking(ctx, j, []byte{veof})
}

// attachable is the live job id, when it takes input: a pty job, or a
// stdio job with a stdin pipe.
func (s *Service) attachable(ctx context.Context, id string) (*job, error) {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.mode != "pty" && j.stdin != StdinPipe {
		return nil, errorf(ErrInputUnsupported, "job %s runs in stdio mode without a stdin pipe: it takes no input (run it with \"stdin\":\"pipe\", or mode \"pty\")", id)
	}
	return j, nil
}

// ErrRawGone: the raw bytes asked for are no longer kept (the runner's
// ring moved past them, or the job ended and its runner left without
// them): the attach redraws instead.
var ErrRawGone = errors.New("raw output no longer kept")

// AttachRaw is pty job id's raw terminal bytes from off (at most 64 KiB;
// none yet when off is the end). Once the job has ended they are read from
// the ring its runner left (runner.RawFile); ErrRawGone when they are not
// kept, ErrNotRunning when the job ended and left none. While the job
// runs, bytes the last out event carried are answered from memory (no
// round trip to the runner): perhaps fewer than the runner would give, the
// caller asks again from where they end.
func (s *Service) AttachRaw(ctx context.Context, id string, off int64) ([]byte, error) {
	j := s.lookup(id)
	if j == nil || j.done() {
		return s.rawLeft(id, off)
	}
	if b := j.rawInlined(off); b != nil {
		return b, nil
	}
	a, err := s.requestUntilEnd(ctx, j, &proto.Msg{T: proto.TRaw, RawSize: off})
	if err != nil {
		if errors.Is(err, ErrNotRunning) || j.done() {
			return s.rawLeft(id, off)
		}
		return nil, fmt.Errorf("read the raw output of job %s: %w", id, err)
	}
	switch a.Err {
	case "":
		return a.Data, nil
	case runner.ErrRawGone:
		return nil, errorf(ErrRawGone, "job %s: raw output from %d is no longer kept", id, off)
	case "runner gone", "job_not_running":
		return s.rawLeft(id, off)
	}
	return nil, fmt.Errorf("read the raw output of job %s: %s", id, a.Err)
}

// rawInlined is a copy of the raw bytes from off to the end of the last
// chunk an out event carried, when that chunk holds off (nil otherwise:
// the runner is asked).
func (j *job) rawInlined(off int64) []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	if off < j.rawChunkAt || off >= j.rawChunkAt+int64(len(j.rawChunk)) {
		return nil
	}
	return append([]byte(nil), j.rawChunk[off-j.rawChunkAt:]...)
}

// AttachRedraw is the bytes that redraw pty job id's screen now, and the
// raw offset the raw bytes that follow them start at.
func (s *Service) AttachRedraw(ctx context.Context, id string) ([]byte, int64, error) {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if j.mode != "pty" {
		return nil, 0, errorf(ErrScreenUnsupported, "job %s runs in %s mode: it has no screen to redraw", id, j.mode)
	}
	a, err := s.requestUntilEnd(ctx, j, &proto.Msg{T: proto.TRaw, Redraw: true})
	if err != nil {
		if errors.Is(err, ErrNotRunning) || j.done() {
			return nil, 0, errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return nil, 0, fmt.Errorf("redraw the screen of job %s: %w", id, err)
	}
	if a.Err != "" {
		if a.Err == "runner gone" || a.Err == "job_not_running" || j.done() {
			return nil, 0, errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return nil, 0, fmt.Errorf("redraw the screen of job %s: %s", id, a.Err)
	}
	return a.Data, a.RawSize, nil
}

// rawLeft reads the raw bytes from off out of the ring a finished job's
// runner left: all of them from off, at most rawLeftMax.
func (s *Service) rawLeft(id string, off int64) ([]byte, error) {
	f, err := s.sd.Open(jobRel(id)+"/"+runner.RawFile, os.O_RDONLY, 0)
	if err != nil {
		return nil, errorf(ErrNotRunning, "job %s is no longer running and left no raw output", id)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, rawLeftMax))
	if err != nil || len(b) < 8 {
		return nil, errorf(ErrNotRunning, "job %s is no longer running and left no raw output", id)
	}
	start := int64(binary.LittleEndian.Uint64(b))
	b = b[8:]
	if off < start || off > start+int64(len(b)) {
		return nil, errorf(ErrRawGone, "job %s: raw output from %d is no longer kept", id, off)
	}
	return b[off-start:], nil
}

// rawLeftMax bounds what is read of a raw ring file: the ring and its
// header.
const rawLeftMax = 2 << 20
