package jobs

// The screen of a pty job (docs/api.md "Screen and keys"): asked of its runner
// while there is one, read from the job's screen.json after.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/screen"
	"github.com/shellctl/shellctl/internal/store"
)

// Error kinds of the screen routes.
var (
	// ErrScreenUnsupported: a stdio job has no terminal, so no screen.
	ErrScreenUnsupported = errors.New("stdio jobs have no screen")
	// ErrScreenUnavailable: a pty job whose screen is not emulated
	// (its terminal is too large) or was not kept.
	ErrScreenUnavailable = errors.New("the job's screen is not available")
	// ErrBadKey: a key that is neither a name nor text.
	ErrBadKey = errors.New("bad key")
)

// KeysParams are the settling of a keys request (0: defaults).
type KeysParams struct {
	QuietMS, TimeoutMS, Scrollback int
}

// Screen is the screen of job id, with up to scrollback rows of scrollback
// (0: none), as JSON in the shape of screen.Snapshot.
func (s *Service) Screen(ctx context.Context, id string, scrollback int) (json.RawMessage, error) {
	if j := s.lookup(id); j != nil {
		if j.mode != "pty" {
			return nil, errorf(ErrScreenUnsupported, "job %s runs in stdio mode: it has no terminal, so no screen (run it with \"mode\": \"pty\")", id)
		}
		a, err := s.request(ctx, j, &proto.Msg{T: proto.TScreen, Scrollback: scrollback})
		switch {
		case err == nil && a.Err == "":
			return json.RawMessage(a.Screen), nil
		case err == nil && a.Err != "runner gone":
			return nil, screenErr(id, a.Err)
		case err != nil && !errors.Is(err, ErrNotRunning):
			return nil, fmt.Errorf("screen of job %s: %w", id, err)
		}
		// The runner is gone: its last screen is on disk.
	}
	row, err := s.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(ErrNotFound, "job %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if row.Mode != "pty" {
		return nil, errorf(ErrScreenUnsupported, "job %s runs in stdio mode: it has no terminal, so no screen (run it with \"mode\": \"pty\")", id)
	}
	return s.savedScreen(id, scrollback)
}

// savedScreen reads the last screen the job's runner kept.
func (s *Service) savedScreen(id string, scrollback int) (json.RawMessage, error) {
	// Beneath the state dir's handle, no link followed.
	var b []byte
	f, err := s.sd.Open(jobRel(id)+"/"+runner.ScreenFile, os.O_RDONLY, 0)
	if err == nil {
		b, err = io.ReadAll(f)
		f.Close()
	}
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(b) == 0) {
		// Missing, or still empty as it was made with the job's directory.
		return nil, errorf(ErrScreenUnavailable, "job %s kept no last screen (it never started, its runner or its screen process died, or its terminal was larger than %d cells)", id, screen.MaxCells)
	}
	if err != nil {
		return nil, fmt.Errorf("read the last screen of job %s: %w", id, err)
	}
	var snap screen.Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("decode the last screen of job %s: %w", id, err)
	}
	if scrollback > 0 {
		sb := []string{}
		if snap.Scrollback != nil {
			sb = *snap.Scrollback
		}
		sb = sb[max(0, len(sb)-scrollback):]
		snap.Scrollback = &sb
	} else {
		snap.Scrollback = nil
	}
	return json.Marshal(snap)
}

// Keys types keys on the terminal of job id and returns its screen once
// the program has settled.
func (s *Service) Keys(ctx context.Context, id string, keys []string, p KeysParams) (json.RawMessage, error) {
	j, err := s.liveJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.mode != "pty" {
		return nil, errorf(ErrInputUnsupported, "job %s runs in stdio mode: it has no terminal to type keys on (run it with \"mode\": \"pty\")", id)
	}
	j.inputMu.Lock()
	defer j.inputMu.Unlock()
	a, err := s.request(ctx, j, &proto.Msg{T: proto.TKeys, Keys: keys, QuietMS: p.QuietMS, TimeoutMS: p.TimeoutMS, Scrollback: p.Scrollback})
	if err != nil {
		if errors.Is(err, ErrNotRunning) || j.done() {
			return nil, errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return nil, fmt.Errorf("keys for job %s: %w", id, err)
	}
	if a.Err != "" {
		if a.Err == "runner gone" || a.Err == "job_not_running" {
			return nil, errorf(ErrNotRunning, "job %s is no longer running", id)
		}
		return nil, screenErr(id, a.Err)
	}
	return json.RawMessage(a.Screen), nil
}

// screenErr turns a runner's answer into an error of its kind.
func screenErr(id, why string) error {
	switch {
	case why == "input_unsupported":
		return errorf(ErrScreenUnsupported, "job %s runs in stdio mode: it has no terminal, so no screen", id)
	case why == "job_not_running":
		return errorf(ErrNotRunning, "job %s is no longer running", id)
	case strings.HasPrefix(why, "screen_unavailable: "):
		return errorf(ErrScreenUnavailable, "job %s: %s", id, strings.TrimPrefix(why, "screen_unavailable: "))
	case strings.HasPrefix(why, "screen_too_large: "):
		return errorf(ErrScreenUnavailable, "job %s: %s", id, strings.TrimPrefix(why, "screen_too_large: "))
	case strings.HasPrefix(why, "bad_key: "):
		return errorf(ErrBadKey, "%s", strings.TrimPrefix(why, "bad_key: "))
	case strings.HasPrefix(why, "input queue full"), why == "the job has not started yet":
		return errorf(ErrScreenUnavailable, "job %s: %s", id, why)
	}
	return fmt.Errorf("screen of job %s: %s", id, why)
}
