package store

// Idempotency keys (extended-api.md §5): a run's key is a column of its
// job's row; the keys of a job's inputs are rows of input_keys, removed
// with the job's row.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrKeyTaken is returned by Insert when another job has the same
// idempotency key.
var ErrKeyTaken = errors.New("idempotency key already used by another job")

// JobByIdempotencyKey reads the job that was run with key.
func (s *Store) JobByIdempotencyKey(ctx context.Context, key string) (*Job, error) {
	j, err := scanJob(s.stmtByKey.QueryRowContext(ctx, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read job of idempotency key: %w", err)
	}
	return j, nil
}

// InputKey returns the fingerprint stored with job id's input key, or
// ErrNotFound.
func (s *Store) InputKey(ctx context.Context, id, key string) (string, error) {
	var fp string
	err := s.stmtInputKey.QueryRowContext(ctx, id, key).Scan(&fp)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read input key of job %s: %w", id, err)
	}
	return fp, nil
}

// AddInputKey stores an input key of job id with its fingerprint. It is
// ErrNotFound when the job has no row, ErrKeyTaken when the key is stored
// already.
func (s *Store) AddInputKey(ctx context.Context, id, key, fp string) error {
	res, err := s.stmtAddInputKey.ExecContext(ctx, key, fp, time.Now().UnixNano(), id)
	if err != nil {
		if isUnique(err) {
			return fmt.Errorf("store input key of job %s: %w", id, ErrKeyTaken)
		}
		return fmt.Errorf("store input key of job %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return ErrNotFound
	}
	return nil
}

// DropInputKey forgets an input key (its input could not be sent).
func (s *Store) DropInputKey(ctx context.Context, id, key string) error {
	if _, err := s.stmtDropInputKey.ExecContext(ctx, id, key); err != nil {
		return fmt.Errorf("drop input key of job %s: %w", id, err)
	}
	return nil
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint")
}
