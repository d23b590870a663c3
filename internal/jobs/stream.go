package jobs

// Following a job for the live output stream (spec/extended-api.md §1).
// A Follower is a cursor's view of one job: its status and how far one of
// its files (output.log, or stderr.log of a stdio job) may be read, and a
// channel closed at the job's next change — the same notifications that
// wake waits (the runner's size events, status changes). It holds no
// output: the stream reads the file itself, at its reader's pace.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/store"
)

// Stream channels: which file of the job a stream reads.
const (
	ChannelOutput = "output" // output.log (a pty job's terminal, a stdio job's stdout)
	ChannelStderr = "stderr" // stderr.log of a stdio job
)

// ErrChannelUnsupported: the job has no such file to stream (stderr of a
// pty job, whose stderr is its terminal).
var ErrChannelUnsupported = errors.New("channel not supported for this job")

// Follower follows one job for one stream. It is not safe for concurrent
// use; Close it when the stream ends.
type Follower struct {
	s    *Service
	id   string
	mode string
	// stdin: StdinPipe for a stdio job run with a stdin pipe, "" otherwise.
	stdin string
	name  string // runner.OutputFile or runner.StderrFile
	j     *job   // nil when the job's end was recorded before Follow
	f     *os.File
}

// FollowState is one consistent look at the followed job.
type FollowState struct {
	Status   string
	ExitCode *int
	// Done: the job's end is known and its output drained, so Size is
	// final (read from disk).
	Done bool
	// Size is how far the channel's file may be read now.
	Size int64
	// InputWait is whether a pty job waits for terminal input (spec §4);
	// nil for stdio jobs and for jobs whose end was recorded before Follow.
	InputWait *bool
	// Changed is closed at the job's next change; nil when Done.
	Changed <-chan struct{}
	// RawSize is how far a pty job's raw terminal bytes go, as far as the
	// server heard (attach.go; 0 until an attach asked for them).
	RawSize int64
}

// FollowEnd is how the job ended, for the stream's end event.
type FollowEnd struct {
	Status   string
	ExitCode *int
	Signal   *string
	Reason   *string
}

// Follow starts following job id's channel (ChannelOutput or
// ChannelStderr). Unknown job: ErrNotFound; stderr of a pty job:
// ErrChannelUnsupported.
func (s *Service) Follow(ctx context.Context, id, channel string) (*Follower, error) {
	name := runner.OutputFile
	switch channel {
	case ChannelOutput, "":
	case ChannelStderr:
		name = runner.StderrFile
	default:
		return nil, fmt.Errorf("follow job %s: unknown channel %q", id, channel)
	}
	fw := &Follower{s: s, id: id, name: name}
	if j := s.lookup(id); j != nil {
		fw.j, fw.mode, fw.stdin = j, j.mode, j.stdin
	} else {
		row, err := s.st.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(ErrNotFound, "job %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		fw.mode = row.Mode
		if row.Stdin == StdinPipe {
			fw.stdin = StdinPipe
		}
		// The row's end is written before the job leaves the live set:
		// a job not live now has its end recorded.
	}
	if channel == ChannelStderr && fw.mode != "stdio" {
		return nil, errorf(ErrChannelUnsupported, "job %s runs in %s mode: its stderr is its terminal, in the output channel; channel \"stderr\" is for stdio jobs", id, fw.mode)
	}
	return fw, nil
}

// Mode is the job's mode ("pty" or "stdio").
func (fw *Follower) Mode() string { return fw.mode }

// Piped is whether the job is a stdio job run with a stdin pipe (as run:
// also once the pipe was closed), the stdio jobs attach serves.
func (fw *Follower) Piped() bool { return fw.mode == "stdio" && fw.stdin == StdinPipe }

// State looks at the job now.
func (fw *Follower) State(ctx context.Context) (FollowState, error) {
	if j := fw.j; j != nil {
		j.mu.Lock()
		st := FollowState{Status: j.status, ExitCode: j.exitCode, Size: j.size, InputWait: j.inputWaitFlag(), Changed: j.changed, RawSize: j.rawSize}
		if fw.name == runner.StderrFile {
			st.Size = j.errSize
		}
		j.mu.Unlock()
		if !store.IsTerminal(st.Status) {
			return st, nil
		}
		// Its end is known, so its runner is done writing: what is on disk
		// is all there is, whatever the last size event said.
		return FollowState{Status: st.Status, ExitCode: st.ExitCode, Done: true, Size: fw.diskSize(), InputWait: st.InputWait, RawSize: st.RawSize}, nil
	}
	row, err := fw.s.st.Get(ctx, fw.id)
	if errors.Is(err, store.ErrNotFound) {
		return FollowState{}, errorf(ErrNotFound, "job %s not found (deleted while followed)", fw.id)
	}
	if err != nil {
		return FollowState{}, err
	}
	return FollowState{Status: row.Status, ExitCode: row.ExitCode, Done: true, Size: fw.diskSize()}, nil
}

// inputWaitFlag is where the job's input-wait state (spec §4) reaches
// streams: whether a pty job waits for terminal input as far as this
// server knows (inputwait.go; false once it is done), nil for stdio jobs,
// which have no terminal. j.mu is held.
func (j *job) inputWaitFlag() *bool {
	if j.mode != "pty" {
		return nil
	}
	w := j.waitingLocked()
	return &w
}

func (fw *Follower) diskSize() int64 {
	return lsize(filepath.Join(runner.JobDir(fw.s.cfg.StateDir, fw.id), fw.name))
}

// ReadAt reads the channel's file at off (opened on first use, beneath
// the state dir's handle: a link there is refused, never followed).
func (fw *Follower) ReadAt(p []byte, off int64) (int, error) {
	if fw.f == nil {
		f, err := fw.s.sd.Open(jobRel(fw.id)+"/"+fw.name, os.O_RDONLY, 0)
		if err != nil {
			return 0, fmt.Errorf("open %s of job %s: %w", fw.name, fw.id, err)
		}
		fw.f = f
	}
	n, err := fw.f.ReadAt(p, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(p)) {
		return n, fmt.Errorf("read %s of job %s at %d: %w", fw.name, fw.id, off, err)
	}
	return n, nil
}

// End is how the job ended (its record), once State says Done.
func (fw *Follower) End(ctx context.Context) (*FollowEnd, error) {
	rec, err := fw.s.Record(ctx, fw.id)
	if err != nil {
		return nil, err
	}
	return &FollowEnd{Status: rec.Status, ExitCode: rec.ExitCode, Signal: rec.Signal, Reason: rec.Reason}, nil
}

// Close releases the file.
func (fw *Follower) Close() error {
	if fw.f != nil {
		return fw.f.Close()
	}
	return nil
}

// DiskSize is the channel's file size on disk now (ahead of the size
// events by at most a write while the job runs).
func (fw *Follower) DiskSize() int64 { return fw.diskSize() }
