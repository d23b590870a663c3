package api

// Idempotency-Key on run and input (extended-api.md §5): the header is
// checked here, before the body is read; the request's fingerprint is made
// here from the decoded, validated request (see jobs.RunPrint); the
// service stores and compares.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
)

// Headers of the extended API.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	// JobIDHeader is on every answer to a run that has a job (and on a
	// 422 idempotency_key_reused: the job the key belongs to).
	JobIDHeader = "X-Shellctl-Job-Id"
	// ReplayHeader says an answer is a repeat's: no job was started and
	// no text sent by this request.
	ReplayHeader = "X-Shellctl-Idempotent-Replay"
)

const maxIdempotencyKey = 255

// idempotencyKey reads the request's Idempotency-Key: ("", true) when it
// has none; on a bad one it has answered and ok is false.
func idempotencyKey(w http.ResponseWriter, r *http.Request) (key string, ok bool) {
	vals := r.Header.Values(IdempotencyKeyHeader)
	if len(vals) == 0 {
		return "", true
	}
	if err := checkIdempotencyKey(vals); err != nil {
		validation(w, "%v", err)
		return "", false
	}
	return vals[0], true
}

func checkIdempotencyKey(vals []string) error {
	if len(vals) > 1 {
		return fmt.Errorf("header %s is given %d times: give it once", IdempotencyKeyHeader, len(vals))
	}
	v := vals[0]
	if len(v) == 0 || len(v) > maxIdempotencyKey {
		return fmt.Errorf("header %s is %d characters long: give 1..%d visible ASCII characters (a UUID will do)", IdempotencyKeyHeader, len(v), maxIdempotencyKey)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("header %s has the byte %q at position %d: give only visible ASCII characters (! to ~, no spaces; a UUID will do)", IdempotencyKeyHeader, c, i)
		}
	}
	return nil
}

// hashSink hashes the big field's bytes on their way to its sink.
type hashSink struct {
	sink
	h hash.Hash
}

func newHashSink(k sink) *hashSink { return &hashSink{sink: k, h: sha256.New()} }

func (k *hashSink) Write(p []byte) (int, error) {
	n, err := k.sink.Write(p)
	k.h.Write(p[:n])
	return n, err
}

func (k *hashSink) Reset() error {
	k.h.Reset()
	return k.sink.Reset()
}

func (k *hashSink) sum() string { return hex.EncodeToString(k.h.Sum(nil)) }

// writeKeyErr answers a service error; a key reused names its job in the
// job id header.
func (s *Server) writeKeyErr(w http.ResponseWriter, err error) {
	var kr *jobs.KeyReusedError
	if errors.As(err, &kr) {
		w.Header().Set(JobIDHeader, kr.JobID)
		httperr.Write(w, http.StatusUnprocessableEntity, "idempotency_key_reused", kr.Error())
		return
	}
	s.writeErr(w, err)
}
