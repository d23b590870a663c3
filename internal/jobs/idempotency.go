package jobs

// Retries that are safe: Idempotency-Key on run and input
// (extended-api.md §5).
//
// A run's key and the fingerprint of what its body asks for are stored in
// the job's row when the row is made; an input's key and fingerprint in
// input_keys, before its text is sent. A request with a key first takes
// the key's place in flights, so a repeat that arrives meanwhile waits for
// the first to have started its job (or sent its text, or failed) rather
// than racing it, then answers from what is stored.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/shellctl/shellctl/internal/reqctx"
	"github.com/shellctl/shellctl/internal/store"
)

// ErrKeyReused is a key that came again with a different body.
var ErrKeyReused = errors.New("idempotency key reused with a different request")

// KeyReusedError is an ErrKeyReused, naming the job the key belongs to.
type KeyReusedError struct {
	JobID string
	msg   string
}

func (e *KeyReusedError) Error() string { return e.msg }
func (e *KeyReusedError) Unwrap() error { return ErrKeyReused }

// RunPrint is what a run's fingerprint covers: what defines the work,
// after the API's defaults and normalisation (mode "" is "pty", cwd made
// absolute and clean, the default terminal size filled in). The wait
// parameters (timeout, output_limit, idle_flush_seconds and the like) are
// the repeat's own and are not part of it.
type RunPrint struct {
	ScriptSHA256 string            `json:"script_sha256"` // hex sha256 of the script's bytes
	Mode         string            `json:"mode"`
	Cwd          string            `json:"cwd"`
	Env          map[string]string `json:"env"`
	Cols         int               `json:"cols"`
	Rows         int               `json:"rows"`
	SessionID    string            `json:"session_id"`
	// Stdin: "pipe" for a stdin pipe (omitted otherwise, so the keys of
	// runs without one keep their fingerprints).
	Stdin string `json:"stdin,omitempty"`
}

// fingerprint is "v1:" and the hex sha256 of v's JSON (encoding/json
// writes struct fields in their order and map keys sorted: one canonical
// text for one value).
func fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings, ints and a string map always encode
	}
	sum := sha256.Sum256(b)
	return "v1:" + hex.EncodeToString(sum[:])
}

// Fingerprint of a run request.
func (p RunPrint) Fingerprint() string {
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	return fingerprint(p)
}

// InputFingerprint is the fingerprint of an input: its job and its text.
func InputFingerprint(jobID string, text []byte) string {
	return inputFingerprint(jobID, text, false)
}

// inputFingerprint: an input that closes stdin (eof) differs from the
// same bytes without; without eof it is InputFingerprint's.
func inputFingerprint(jobID string, text []byte, eof bool) string {
	sum := sha256.Sum256(text)
	return fingerprint(struct {
		JobID      string `json:"job_id"`
		TextSHA256 string `json:"text_sha256"`
		EOF        bool   `json:"eof,omitempty"`
	}{jobID, hex.EncodeToString(sum[:]), eof})
}

// flights are the keys being handled now.
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// acquire takes key's place, waiting while another request holds it.
// release gives it up (it may be called more than once).
func (f *flights) acquire(ctx context.Context, key string) (release func(), err error) {
	for {
		f.mu.Lock()
		if f.m == nil {
			f.m = map[string]chan struct{}{}
		}
		ch, busy := f.m[key]
		if !busy {
			ch = make(chan struct{})
			f.m[key] = ch
			f.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					f.mu.Lock()
					delete(f.m, key)
					f.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the first request with this idempotency key: %w", ctx.Err())
		}
	}
}

// RunIdempotent is Run for a request with an Idempotency-Key
// (req.IdempotencyKey and req.IdempotencyFP set). The first request with
// the key starts the job; a repeat with the same fingerprint answers as
// that job now stands, waiting by wp (replayed is true); one with another
// fingerprint is a KeyReusedError.
func (s *Service) RunIdempotent(ctx context.Context, req RunRequest, wp WaitParams) (res *Result, replayed bool, err error) {
	release, err := s.flights.acquire(ctx, "run\x00"+req.IdempotencyKey)
	if err != nil {
		return nil, false, err
	}
	defer release()
	row, err := s.st.JobByIdempotencyKey(ctx, req.IdempotencyKey)
	switch {
	case err == nil:
		release()
		if row.IdempotencyFP != req.IdempotencyFP {
			return nil, false, &KeyReusedError{JobID: row.ID, msg: fmt.Sprintf("Idempotency-Key %q was used by job %s for a different request: send that request again unchanged, or use a new key for a new one", req.IdempotencyKey, row.ID)}
		}
		s.log.Info("run repeated with its idempotency key: no new job", "job", row.ID, "request_id", reqctx.ID(ctx))
		res, err := s.Wait(ctx, row.ID, wp)
		return res, true, err
	case !errors.Is(err, store.ErrNotFound):
		return nil, false, err
	}
	res, err = s.run(ctx, req, wp, release)
	return res, false, err
}

// InputIdempotent is Input for a request with an Idempotency-Key. The
// key is stored before the text is sent (and dropped again when it could
// not be sent): a repeat never sends the text a second time, even after a
// crash between the two, where it would rather not have been sent at all.
func (s *Service) InputIdempotent(ctx context.Context, id, key string, text []byte, eof bool, wp WaitParams, sent func()) (res *Result, replayed bool, err error) {
	release, err := s.flights.acquire(ctx, "input\x00"+id+"\x00"+key)
	if err != nil {
		if sent != nil {
			sent()
		}
		return nil, false, err
	}
	defer release()
	fp := inputFingerprint(id, text, eof)
	stored, err := s.st.InputKey(ctx, id, key)
	switch {
	case err == nil:
		release()
		if sent != nil {
			sent()
		}
		if stored != fp {
			return nil, false, &KeyReusedError{JobID: id, msg: fmt.Sprintf("Idempotency-Key %q was used for a different input to job %s: send that input again unchanged, or use a new key for a new one", key, id)}
		}
		s.log.Info("input repeated with its idempotency key: not sent again", "job", id, "request_id", reqctx.ID(ctx))
		res, err := s.Wait(ctx, id, wp)
		return res, true, err
	case !errors.Is(err, store.ErrNotFound):
		if sent != nil {
			sent()
		}
		return nil, false, err
	}
	h := inputHooks{
		mark: func() error {
			err := s.st.AddInputKey(ctx, id, key, fp)
			if errors.Is(err, store.ErrNotFound) {
				return errorf(ErrNotFound, "job %s not found", id)
			}
			return err
		},
		unmark: func() {
			if err := s.st.DropInputKey(context.WithoutCancel(ctx), id, key); err != nil {
				s.log.Warn("drop the key of an input not sent", "job", id, "err", err)
			}
		},
		sent: func() {
			if sent != nil {
				sent()
			}
			release()
		},
	}
	res, err = s.input(ctx, id, text, eof, wp, h)
	return res, false, err
}
