package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] takes the schema from version i to i+1. Only ever append:
// a database records its version in PRAGMA user_version and is migrated
// forward from there on open.
var migrations = []string{
	// 0 → 1: the jobs table.
	`CREATE TABLE jobs (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT,
		id         TEXT NOT NULL UNIQUE,
		status     TEXT NOT NULL,
		exit_code  INTEGER,
		mode       TEXT NOT NULL DEFAULT 'pty',
		cwd        TEXT NOT NULL DEFAULT '',
		session_id TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		started_at INTEGER,
		ended_at   INTEGER,
		reason     TEXT NOT NULL DEFAULT '',
		signal     INTEGER NOT NULL DEFAULT 0,
		runner_pid INTEGER NOT NULL DEFAULT 0,
		pid        INTEGER NOT NULL DEFAULT 0,
		isolation  TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX jobs_status ON jobs(status);
	CREATE INDEX jobs_ended ON jobs(ended_at) WHERE ended_at IS NOT NULL;`,
	// 1 → 2: the key a restarted server proves itself with to a runner's
	// control socket (it used to sit in a spec file in the job directory).
	`ALTER TABLE jobs ADD COLUMN control_key TEXT NOT NULL DEFAULT '';`,
	// 2 → 3: the job's cgroup, so a job whose runner died is ended by
	// it (cgroup.kill) however its processes left its session.
	`ALTER TABLE jobs ADD COLUMN cgroup TEXT NOT NULL DEFAULT '';`,
	// 3 → 4: what the full job record (GET /v1/jobs/{id}/record) shows and
	// the rows did not hold: the job's HOME, terminal size and env names
	// as run, the limits asked (the server's) and applied (the runner's,
	// JSON), the job's process group and its tree's resource usage (JSON).
	`ALTER TABLE jobs ADD COLUMN home TEXT NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN cols INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN rows INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN env_names TEXT NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN limits TEXT NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN limits_applied TEXT NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN pgid INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN usage TEXT NOT NULL DEFAULT '';`,
	// 4 → 5: Idempotency-Key (extended-api.md §5). A run's key and the
	// fingerprint of its body live in the job's row (unique among the
	// rows that have one); the keys of a job's inputs in input_keys, whose
	// rows go with the job's row (the trigger), whoever deletes it.
	`ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
	ALTER TABLE jobs ADD COLUMN idempotency_fp TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX jobs_idempotency_key ON jobs(idempotency_key) WHERE idempotency_key IS NOT NULL;
	CREATE TABLE input_keys (
		job_id     TEXT NOT NULL,
		key        TEXT NOT NULL,
		fp         TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (job_id, key)
	) WITHOUT ROWID;
	CREATE TRIGGER jobs_input_keys_gone AFTER DELETE ON jobs BEGIN
		DELETE FROM input_keys WHERE job_id = OLD.id;
	END;`,
	// 5 → 6: a stdio job's stdin as run (extended-api.md §8): 'pipe' when
	// it was a pipe for input, '' otherwise (/dev/null, or a pty job's
	// terminal).
	`ALTER TABLE jobs ADD COLUMN stdin TEXT NOT NULL DEFAULT '';`,
	// 6 → 7: the egress proxy as the job got it (JSON: policy, proxy
	// address, the credentials' provider/name; never a value).
	`ALTER TABLE jobs ADD COLUMN egress TEXT NOT NULL DEFAULT '';`,
}

// SchemaVersion is the version this build writes.
var SchemaVersion = len(migrations)

func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var v int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("database schema version %d is newer than this shellctl supports (%d): use a newer shellctl or another state dir", v, SchemaVersion)
	}
	for ; v < SchemaVersion; v++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate schema %d→%d: %w", v, v+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate schema %d→%d: %w", v, v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate schema %d→%d: %w", v, v+1, err)
		}
	}
	return nil
}
