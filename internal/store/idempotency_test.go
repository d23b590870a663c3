package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestIdempotencyKeysPersistAreUniqueAndGoWithTheRow(t *testing.T) {
	st, dir := open(t)
	ctx := context.Background()
	a := &Job{ID: "00000000000000a1", Mode: "pty", CreatedAt: time.Now(), IdempotencyKey: "key-1", IdempotencyFP: "fp-a"}
	if err := st.Insert(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Jobs without a key never collide.
	for _, id := range []string{"00000000000000b1", "00000000000000b2"} {
		if err := st.Insert(ctx, &Job{ID: id, Mode: "pty", CreatedAt: time.Now()}); err != nil {
			t.Fatalf("insert a job without a key: %v", err)
		}
	}
	if err := st.Insert(ctx, &Job{ID: "00000000000000a2", Mode: "pty", CreatedAt: time.Now(), IdempotencyKey: "key-1", IdempotencyFP: "fp-b"}); !errors.Is(err, ErrKeyTaken) {
		t.Fatalf("second job with the same key: %v, want ErrKeyTaken", err)
	}
	if j, err := st.Get(ctx, "00000000000000b1"); err != nil || j.IdempotencyKey != "" {
		t.Fatalf("job without a key = %+v %v", j, err)
	}
	if err := st.AddInputKey(ctx, a.ID, "in-1", "fp-in"); err != nil {
		t.Fatal(err)
	}
	if err := st.AddInputKey(ctx, a.ID, "in-1", "fp-other"); !errors.Is(err, ErrKeyTaken) {
		t.Fatalf("same input key twice: %v, want ErrKeyTaken", err)
	}
	// Input keys are per job.
	if err := st.AddInputKey(ctx, "00000000000000b1", "in-1", "fp-b1"); err != nil {
		t.Fatalf("same input key on another job: %v", err)
	}
	if err := st.AddInputKey(ctx, "00000000000000ff", "in-1", "fp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("input key of a job with no row: %v, want ErrNotFound", err)
	}

	// A new Store on the same file (a restarted server) finds them.
	st.Close()
	st2, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	j, err := st2.JobByIdempotencyKey(ctx, "key-1")
	if err != nil || j.ID != a.ID || j.IdempotencyKey != "key-1" || j.IdempotencyFP != "fp-a" {
		t.Fatalf("job by key after reopen = %+v %v", j, err)
	}
	if _, err := st2.JobByIdempotencyKey(ctx, "key-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	if fp, err := st2.InputKey(ctx, a.ID, "in-1"); err != nil || fp != "fp-in" {
		t.Fatalf("input key after reopen = %q %v", fp, err)
	}
	if err := st2.DropInputKey(ctx, a.ID, "in-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.InputKey(ctx, a.ID, "in-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dropped input key: %v", err)
	}
	if err := st2.AddInputKey(ctx, a.ID, "in-2", "fp2"); err != nil {
		t.Fatal(err)
	}
	// Deleting the row frees its run key and removes its input keys.
	if err := st2.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.JobByIdempotencyKey(ctx, "key-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key of a deleted job: %v", err)
	}
	var n int
	if err := st2.db.QueryRow(`SELECT count(*) FROM input_keys WHERE job_id = ?`, a.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("input keys of a deleted job: %d %v", n, err)
	}
	if err := st2.Insert(ctx, &Job{ID: "00000000000000a3", Mode: "pty", CreatedAt: time.Now(), IdempotencyKey: "key-1", IdempotencyFP: "fp-c"}); err != nil {
		t.Fatalf("reuse the key of a deleted job: %v", err)
	}
}

func TestVersion4DatabaseMigratesToIdempotencyKeys(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v < 4; v++ {
		if _, err := db.Exec(migrations[v]); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(`PRAGMA user_version = 4`)
	if _, err := db.Exec(`INSERT INTO jobs (id, status, created_at) VALUES ('00000000000000c4', 'exited', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("migrate a version-4 database: %v", err)
	}
	defer st.Close()
	if SchemaVersion < 5 {
		t.Fatalf("schema version %d, want at least 5", SchemaVersion)
	}
	j, err := st.Get(context.Background(), "00000000000000c4")
	if err != nil || j.IdempotencyKey != "" || j.IdempotencyFP != "" {
		t.Fatalf("version-4 row after migration: %+v %v", j, err)
	}
}
