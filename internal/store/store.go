// Package store keeps job records in SQLite: the schema and its forward
// migrations, and the compare-and-set state transitions that the server, the
// runners and shellctl-runner-exit all go through. It knows nothing of
// processes or HTTP.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/shellctl/shellctl/internal/jobstate" // the pure-Go SQLite driver (no cgo, static binaries)
)

// Job states (see package jobstate).
const (
	StatusCreated    = jobstate.StatusCreated
	StatusStarting   = jobstate.StatusStarting
	StatusRunning    = jobstate.StatusRunning
	StatusExited     = jobstate.StatusExited
	StatusTerminated = jobstate.StatusTerminated
	StatusFailed     = jobstate.StatusFailed
	StatusLost       = jobstate.StatusLost
)

// IsTerminal reports whether a job in status s is done.
func IsTerminal(s string) bool { return jobstate.IsTerminal(s) }

// ValidStatus reports whether s names a job state.
func ValidStatus(s string) bool { return jobstate.Valid(s) }

// ErrNotFound is returned when no job has the given id.
var ErrNotFound = errors.New("job not found")

// ErrNotChanged is returned by a compare-and-set that found the job in a state
// it must not leave (typically: already terminal).
var ErrNotChanged = errors.New("job state not changed")

// DBFile is the database's name inside the state dir.
const DBFile = "shellctl.db"

// busyTimeout bounds how long a writer waits for another writer (the server
// and the runners share the file). Writes are tiny, so waits are short; the
// bound only matters when something holds the lock abnormally long.
const busyTimeout = 5 * time.Second

// Job is one row.
type Job struct {
	ID        string
	Seq       int64
	Status    string
	ExitCode  *int
	Mode      string
	Cwd       string
	SessionID string
	CreatedAt time.Time
	StartedAt *time.Time
	EndedAt   *time.Time
	Reason    string
	Signal    int
	RunnerPID int
	PID       int
	Isolation string // JSON of what isolation was applied, as the runner reported it
	// ControlKey is what a server proves itself with to the job's runner
	// (never served by the API).
	ControlKey string
	// Cgroup is the job's cgroup directory ("" without one): a job whose
	// runner died is ended through it.
	Cgroup string

	// Home, Cols and Rows (0 for stdio) and EnvNames (a JSON array of the
	// request's env names, never values) are the job as run.
	Home     string
	Cols     int
	Rows     int
	EnvNames string
	// Limits is JSON of the limits asked (the server's configuration);
	// LimitsApplied JSON of those the runner applied.
	Limits        string
	LimitsApplied string
	// Pgid is the job's process group (0: never started).
	Pgid int
	// Usage is JSON of the job's tree's resource usage, once known.
	Usage string
	// IdempotencyKey is the run's Idempotency-Key ("" = none) and
	// IdempotencyFP the fingerprint of its body (extended-api.md §5).
	IdempotencyKey string
	IdempotencyFP  string
	// Stdin is "pipe" for a stdio job run with a stdin pipe, else "".
	Stdin string
	// Egress is JSON of the egress proxy as the job got it ("" = off).
	Egress string
}

// Store is an open database.
type Store struct {
	db  *sql.DB // reads
	wdb *sql.DB // writes: one connection

	stmtGet, stmtGetMany, stmtInsert, stmtStarting, stmtRunner, stmtRunning, stmtFinish, stmtDelete, stmtTerminal *sql.Stmt
	// Idempotency keys (idempotency.go).
	stmtByKey, stmtInputKey, stmtAddInputKey, stmtDropInputKey *sql.Stmt

	// ended holds rows Get read in a terminal state, by id, so the reads
	// of a finished job (its pages above all: a SQLite read was a sixth
	// of a page read's CPU) cost no query. A terminal row changes only by
	// Delete and SetTerminal, and every write of another process (an
	// exit recorded by shellctl-runner-exit) is a compare-and-set on a
	// row that is not terminal, so the copy stays true. endedGen counts
	// those two changes: a read that raced one is not kept.
	endedMu  sync.Mutex
	ended    map[string]*Job
	endedGen uint64
}

// endedMax bounds the terminal rows Get keeps (about a kilobyte each).
const endedMax = 256

// Open opens (creating when missing) the database in stateDir and migrates
// it forward. A database written by a newer shellctl is refused.
func Open(ctx context.Context, stateDir string) (*Store, error) {
	path := filepath.Join(stateDir, DBFile)
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate",
		path, busyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// Readers proceed beside the writer in WAL mode.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(0)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	// All writes of this process go through one connection, so they queue
	// in Go and hand over at once. Two connections writing at the same
	// time would meet SQLite's busy handler instead, which sleeps (1 ms,
	// then longer) before it retries — on the path of every job.
	wdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	s := &Store{db: db, wdb: wdb}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	err := s.wdb.Close()
	if rerr := s.db.Close(); err == nil {
		err = rerr
	}
	return err
}

const jobColumns = `id, seq, status, exit_code, mode, cwd, session_id, created_at, started_at, ended_at, reason, signal, runner_pid, pid, isolation, control_key, cgroup, home, cols, rows, env_names, limits, limits_applied, pgid, usage, idempotency_key, idempotency_fp, stdin, egress`

// listColumns are what a listing shows of a job (List, GetMany): reading
// only these is most of a 200-job list's cost saved (every column read is
// a copy and an allocation; jobColumns made a list of 200 take 5 ms here).
const listColumns = `id, seq, status, created_at, started_at, ended_at`

func (s *Store) prepare(ctx context.Context) error {
	var err error
	p := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		db := s.wdb
		if strings.HasPrefix(q, "SELECT") {
			db = s.db
		}
		var st *sql.Stmt
		st, err = db.PrepareContext(ctx, q)
		if err != nil {
			err = fmt.Errorf("prepare %q: %w", q, err)
		}
		return st
	}
	s.stmtGet = p(`SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`)
	s.stmtGetMany = p(`SELECT ` + listColumns + ` FROM jobs WHERE id IN (SELECT value FROM json_each(?)) ORDER BY seq DESC`)
	s.stmtInsert = p(`INSERT INTO jobs (id, status, mode, cwd, session_id, created_at, runner_pid, control_key, home, cols, rows, env_names, limits, idempotency_key, idempotency_fp, stdin, egress) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	s.stmtRunner = p(`UPDATE jobs SET runner_pid = ? WHERE id = ? AND status IN ('created','starting')`)
	s.stmtStarting = p(`UPDATE jobs SET status = 'starting', runner_pid = ? WHERE id = ? AND status = 'created'`)
	s.stmtRunning = p(`UPDATE jobs SET status = 'running', pid = ?, started_at = ?, isolation = ?, cgroup = ?, pgid = ?, limits_applied = ? WHERE id = ? AND status IN ('created','starting')`)
	s.stmtFinish = p(`UPDATE jobs SET status = ?, exit_code = ?, ended_at = ?, reason = ?, signal = ?,
		started_at = COALESCE(started_at, ?),
		pid = CASE WHEN pid = 0 THEN ? ELSE pid END,
		isolation = CASE WHEN isolation = '' THEN ? ELSE isolation END,
		pgid = CASE WHEN pgid = 0 THEN ? ELSE pgid END,
		limits_applied = CASE WHEN limits_applied = '' THEN ? ELSE limits_applied END,
		usage = ?
		WHERE id = ? AND status NOT IN ('exited','terminated','failed','lost')`)
	s.stmtDelete = p(`DELETE FROM jobs WHERE id = ?`)
	s.stmtTerminal = p(`UPDATE jobs SET cols = ?, rows = ? WHERE id = ?`)
	s.stmtByKey = p(`SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ?`)
	s.stmtInputKey = p(`SELECT fp FROM input_keys WHERE job_id = ? AND key = ?`)
	s.stmtAddInputKey = p(`INSERT INTO input_keys (job_id, key, fp, created_at) SELECT id, ?, ?, ? FROM jobs WHERE id = ?`)
	s.stmtDropInputKey = p(`DELETE FROM input_keys WHERE job_id = ? AND key = ?`)
	return err
}

func nsOrNil(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func scanJob(sc interface{ Scan(...any) error }) (*Job, error) {
	var j Job
	var exit, started, ended sql.NullInt64
	var created int64
	var key sql.NullString
	if err := sc.Scan(&j.ID, &j.Seq, &j.Status, &exit, &j.Mode, &j.Cwd, &j.SessionID, &created, &started, &ended,
		&j.Reason, &j.Signal, &j.RunnerPID, &j.PID, &j.Isolation, &j.ControlKey, &j.Cgroup,
		&j.Home, &j.Cols, &j.Rows, &j.EnvNames, &j.Limits, &j.LimitsApplied, &j.Pgid, &j.Usage, &key, &j.IdempotencyFP, &j.Stdin, &j.Egress); err != nil {
		return nil, err
	}
	j.CreatedAt = time.Unix(0, created).UTC()
	j.IdempotencyKey = key.String
	if exit.Valid {
		c := int(exit.Int64)
		j.ExitCode = &c
	}
	j.StartedAt, j.EndedAt = timeOrNil(started), timeOrNil(ended)
	return &j, nil
}

// Insert records a new job: in state created, or starting when its runner
// is already known (j.RunnerPID set).
func (s *Store) Insert(ctx context.Context, j *Job) error {
	status := StatusCreated
	if j.RunnerPID != 0 {
		status = StatusStarting
	}
	_, err := s.stmtInsert.ExecContext(ctx, j.ID, status, j.Mode, j.Cwd, j.SessionID, j.CreatedAt.UnixNano(), j.RunnerPID, j.ControlKey,
		j.Home, j.Cols, j.Rows, j.EnvNames, j.Limits, strOrNil(j.IdempotencyKey), j.IdempotencyFP, j.Stdin, j.Egress)
	if err != nil {
		if j.IdempotencyKey != "" && isUnique(err) {
			return fmt.Errorf("insert job %s: %w", j.ID, ErrKeyTaken)
		}
		return fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	return nil
}

// Get reads one job; a terminal row comes from the copy kept of it.
func (s *Store) Get(ctx context.Context, id string) (*Job, error) {
	s.endedMu.Lock()
	kept, gen := s.ended[id], s.endedGen
	s.endedMu.Unlock()
	if kept != nil {
		return kept.clone(), nil
	}
	j, err := scanJob(s.stmtGet.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	if IsTerminal(j.Status) {
		s.endedMu.Lock()
		if s.endedGen == gen {
			if s.ended == nil {
				s.ended = make(map[string]*Job)
			}
			if len(s.ended) >= endedMax {
				for k := range s.ended { // any one
					delete(s.ended, k)
					break
				}
			}
			s.ended[id] = j.clone()
		}
		s.endedMu.Unlock()
	}
	return j, nil
}

// forgetEnded drops the kept copy of id's row after a change to it.
func (s *Store) forgetEnded(id string) {
	s.endedMu.Lock()
	delete(s.ended, id)
	s.endedGen++
	s.endedMu.Unlock()
}

// clone is a copy of j that shares nothing with it.
func (j *Job) clone() *Job {
	c := *j
	if j.ExitCode != nil {
		v := *j.ExitCode
		c.ExitCode = &v
	}
	if j.StartedAt != nil {
		v := *j.StartedAt
		c.StartedAt = &v
	}
	if j.EndedAt != nil {
		v := *j.EndedAt
		c.EndedAt = &v
	}
	return &c
}

func changed(res sql.Result, err error, what, id string) error {
	if err != nil {
		return fmt.Errorf("%s job %s: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s job %s: %w", what, id, err)
	}
	if n == 0 {
		return ErrNotChanged
	}
	return nil
}

// MarkStarting moves created → starting once the runner was spawned.
func (s *Store) MarkStarting(ctx context.Context, id string, runnerPID int) error {
	res, err := s.stmtStarting.ExecContext(ctx, runnerPID, id)
	return changed(res, err, "mark starting", id)
}

// SetRunner records the runner of a job that is not yet running.
func (s *Store) SetRunner(ctx context.Context, id string, runnerPID int) error {
	res, err := s.stmtRunner.ExecContext(ctx, runnerPID, id)
	return changed(res, err, "set runner of", id)
}

// Running is what a job's running event tells.
type Running struct {
	PID       int
	StartedAt time.Time
	Isolation string
	Cgroup    string
	Pgid      int
	// LimitsApplied is JSON of the limits the runner applied.
	LimitsApplied string
}

// MarkRunning moves created|starting → running.
func (s *Store) MarkRunning(ctx context.Context, id string, r Running) error {
	res, err := s.stmtRunning.ExecContext(ctx, r.PID, r.StartedAt.UnixNano(), r.Isolation, r.Cgroup, r.Pgid, r.LimitsApplied, id)
	return changed(res, err, "mark running", id)
}

// Exit describes how a job ended.
type Exit struct {
	Status   string // one of the terminal states
	ExitCode *int   // nil for failed and lost
	Signal   int    // the signal that killed the process, 0 when it exited
	Reason   string
	EndedAt  time.Time
	// StartedAt, PID and Isolation fill what a job that ended before its
	// running event was recorded would otherwise lack.
	StartedAt *time.Time
	PID       int
	Isolation string
	// Pgid and LimitsApplied fill the same way; Usage (JSON of the job's
	// tree's resource usage) is recorded with the end.
	Pgid          int
	LimitsApplied string
	Usage         string
}

// Finish records a terminal state with compare-and-set: a job that is
// already terminal keeps its state, and ErrNotChanged says so.
func (s *Store) Finish(ctx context.Context, id string, e Exit) error {
	if !IsTerminal(e.Status) {
		return fmt.Errorf("finish job %s: status %q is not terminal", id, e.Status)
	}
	var code any
	if e.ExitCode != nil {
		code = *e.ExitCode
	}
	res, err := s.stmtFinish.ExecContext(ctx, e.Status, code, e.EndedAt.UnixNano(), e.Reason, e.Signal, nsOrNil(e.StartedAt), e.PID, e.Isolation,
		e.Pgid, e.LimitsApplied, e.Usage, id)
	return changed(res, err, "finish", id)
}

// SetTerminal records a job's terminal size after a resize.
func (s *Store) SetTerminal(ctx context.Context, id string, cols, rows int) error {
	res, err := s.stmtTerminal.ExecContext(ctx, cols, rows, id)
	s.forgetEnded(id)
	return changed(res, err, "set terminal of", id)
}

// Delete removes a job's row.
func (s *Store) Delete(ctx context.Context, id string) error {
	res, err := s.stmtDelete.ExecContext(ctx, id)
	s.forgetEnded(id)
	if err := changed(res, err, "delete", id); err != nil {
		if errors.Is(err, ErrNotChanged) {
			return ErrNotFound
		}
		return err
	}
	return nil
}

// List returns up to limit jobs, newest first (creation order breaks ties),
// optionally only those in status. Each has only what a listing shows:
// ID, Seq, Status, CreatedAt, StartedAt and EndedAt (Get reads the rest).
func (s *Store) List(ctx context.Context, status string, limit int) ([]*Job, error) {
	q := `SELECT ` + listColumns + ` FROM jobs`
	args := []any{}
	if status != "" {
		q += ` WHERE status = ?`
		args = append(args, status)
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, limit)
	return s.query(ctx, scanListed, q, args...)
}

// GetMany reads the jobs of ids in one query, newest first, with List's
// fields only; ids with no row (deleted meanwhile) are left out. The ids
// go in as one JSON array, so the statement is prepared once whatever
// their number, and each is looked up by the index of id.
func (s *Store) GetMany(ctx context.Context, ids []string) ([]*Job, error) {
	if len(ids) == 0 {
		return []*Job{}, nil
	}
	arg, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("read jobs %v: %w", ids, err)
	}
	rows, err := s.stmtGetMany.QueryContext(ctx, string(arg))
	if err != nil {
		return nil, fmt.Errorf("read %d jobs: %w", len(ids), err)
	}
	jobs, err := scanListed(rows)
	if err != nil {
		return nil, fmt.Errorf("read %d jobs: %w", len(ids), err)
	}
	return jobs, nil
}

// Unfinished returns every job that is not in a terminal state.
func (s *Store) Unfinished(ctx context.Context) ([]*Job, error) {
	return s.query(ctx, scanJobs, `SELECT `+jobColumns+` FROM jobs WHERE status NOT IN ('exited','terminated','failed','lost') ORDER BY seq`)
}

// EndedBefore returns the ids of terminal jobs that ended before t.
func (s *Store) EndedBefore(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM jobs WHERE status IN ('exited','terminated','failed','lost') AND ended_at < ?`, t.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("list ended jobs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list ended jobs: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// query runs q and reads its rows with scan (scanJobs: every column,
// scanListed: a listing's).
func (s *Store) query(ctx context.Context, scan func(*sql.Rows) ([]*Job, error), q string, args ...any) ([]*Job, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := scan(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// scanJobs reads every row of rows as a job, and closes them.
func scanJobs(rows *sql.Rows) ([]*Job, error) {
	defer rows.Close()
	jobs := []*Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// scanListed reads every row of rows as listColumns, and closes them.
func scanListed(rows *sql.Rows) ([]*Job, error) {
	defer rows.Close()
	jobs := []*Job{}
	for rows.Next() {
		var j Job
		var created int64
		var started, ended sql.NullInt64
		if err := rows.Scan(&j.ID, &j.Seq, &j.Status, &created, &started, &ended); err != nil {
			return nil, err
		}
		j.CreatedAt = time.Unix(0, created).UTC()
		j.StartedAt, j.EndedAt = timeOrNil(started), timeOrNil(ended)
		jobs = append(jobs, &j)
	}
	return jobs, rows.Err()
}

// timeOrNil turns a nullable column of unix nanoseconds into a time.
func timeOrNil(ns sql.NullInt64) *time.Time {
	if !ns.Valid {
		return nil
	}
	t := time.Unix(0, ns.Int64).UTC()
	return &t
}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}
