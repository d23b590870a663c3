package store

import (
	"context"
	"fmt"

	"github.com/shellctl/shellctl/internal/jobstate"
)

// CountByStatus counts the recorded jobs of each status in one query;
// every status is present in the answer, 0 when no job has it.
func (s *Store) CountByStatus(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, st := range []string{jobstate.StatusCreated, jobstate.StatusStarting, jobstate.StatusRunning,
		jobstate.StatusExited, jobstate.StatusTerminated, jobstate.StatusFailed, jobstate.StatusLost} {
		out[st] = 0
	}
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs by status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs by status: %w", err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs by status: %w", err)
	}
	return out, nil
}
