package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

func intp(n int) *int { return &n }

func TestLifecycleAndCompareAndSet(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	now := time.Now()
	if err := st.Insert(ctx, &Job{ID: "0000000000000001", Mode: "pty", Cwd: "/w", SessionID: "s1", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	j, err := st.Get(ctx, "0000000000000001")
	if err != nil || j.Status != StatusCreated || j.ExitCode != nil || j.StartedAt != nil || j.SessionID != "s1" {
		t.Fatalf("new job = %+v %v", j, err)
	}
	if err := st.MarkStarting(ctx, j.ID, 42); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkStarting(ctx, j.ID, 43); !errors.Is(err, ErrNotChanged) {
		t.Fatalf("second MarkStarting = %v, want ErrNotChanged", err)
	}
	if err := st.MarkRunning(ctx, j.ID, Running{PID: 77, StartedAt: now, Isolation: `{"enabled":true}`}); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, j.ID, Exit{Status: StatusExited, ExitCode: intp(3), Reason: "exited", EndedAt: now}); err != nil {
		t.Fatal(err)
	}
	// A terminal state is never overwritten.
	if err := st.Finish(ctx, j.ID, Exit{Status: StatusLost, Reason: "runner_lost", EndedAt: now}); !errors.Is(err, ErrNotChanged) {
		t.Fatalf("finish over a terminal state = %v", err)
	}
	if err := st.MarkRunning(ctx, j.ID, Running{PID: 1, StartedAt: now}); !errors.Is(err, ErrNotChanged) {
		t.Fatalf("running after end = %v", err)
	}
	j, _ = st.Get(ctx, j.ID)
	if j.Status != StatusExited || *j.ExitCode != 3 || j.RunnerPID != 42 || j.PID != 77 || j.Reason != "exited" || j.StartedAt == nil || j.EndedAt == nil {
		t.Fatalf("finished job = %+v", j)
	}
	if err := st.Finish(ctx, j.ID, Exit{Status: StatusRunning}); err == nil {
		t.Fatal("finish with a non-terminal status accepted")
	}
}

func TestFinishFillsTheStartOfAJobThatNeverReportedRunning(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	now := time.Now()
	st.Insert(ctx, &Job{ID: "0000000000000002", Mode: "stdio", CreatedAt: now, RunnerPID: 9})
	j, _ := st.Get(ctx, "0000000000000002")
	if j.Status != StatusStarting || j.RunnerPID != 9 {
		t.Fatalf("job with known runner = %+v", j)
	}
	started := now.Add(time.Millisecond)
	if err := st.Finish(ctx, j.ID, Exit{Status: StatusExited, ExitCode: intp(0), EndedAt: now, StartedAt: &started, PID: 5, Isolation: "x"}); err != nil {
		t.Fatal(err)
	}
	j, _ = st.Get(ctx, j.ID)
	if j.StartedAt == nil || !j.StartedAt.Equal(started.UTC()) || j.PID != 5 || j.Isolation != "x" {
		t.Fatalf("finish did not fill the start: %+v", j)
	}
}

func TestListOrderFilterAndUnfinished(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	same := time.Now()
	ids := []string{"00000000000000a1", "00000000000000a2", "00000000000000a3"}
	for _, id := range ids {
		st.Insert(ctx, &Job{ID: id, CreatedAt: same}) // same time: creation order decides
	}
	st.Finish(ctx, ids[1], Exit{Status: StatusFailed, EndedAt: same})
	all, err := st.List(ctx, "", 10)
	if err != nil || len(all) != 3 || all[0].ID != ids[2] || all[2].ID != ids[0] {
		t.Fatalf("list = %v %v", all, err)
	}
	failed, _ := st.List(ctx, StatusFailed, 10)
	if len(failed) != 1 || failed[0].ID != ids[1] {
		t.Fatalf("filtered = %v", failed)
	}
	two, _ := st.List(ctx, "", 2)
	if len(two) != 2 {
		t.Fatalf("limit: %d", len(two))
	}
	empty, _ := st.List(ctx, StatusLost, 10)
	if empty == nil || len(empty) != 0 {
		t.Fatalf("empty list = %#v, want a non-nil empty slice", empty)
	}
	un, _ := st.Unfinished(ctx)
	if len(un) != 2 {
		t.Fatalf("unfinished = %d", len(un))
	}
	old, _ := st.EndedBefore(ctx, same.Add(time.Second))
	if len(old) != 1 || old[0] != ids[1] {
		t.Fatalf("ended before = %v", old)
	}
	if err := st.Delete(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, ids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete = %v", err)
	}
	if _, err := st.Get(ctx, ids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted = %v", err)
	}
}

func TestSchemaVersionAndNewerDatabaseRefused(t *testing.T) {
	st, dir := open(t)
	st.Close()
	db, err := sql.Open("sqlite", filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	var v int
	db.QueryRow(`PRAGMA user_version`).Scan(&v)
	if v != SchemaVersion {
		t.Fatalf("user_version = %d, want %d", v, SchemaVersion)
	}
	var mode string
	db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	if mode != "wal" {
		t.Fatalf("journal_mode = %q", mode)
	}
	db.Exec(`PRAGMA user_version = 999`)
	db.Close()
	_, err = Open(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "999") || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer database: %v", err)
	}
	// Reopening a current database migrates nothing and keeps the rows.
	dir2 := t.TempDir()
	st2, _ := Open(context.Background(), dir2)
	st2.Insert(context.Background(), &Job{ID: "00000000000000b1", CreatedAt: time.Now()})
	st2.Close()
	st3, err := Open(context.Background(), dir2)
	if err != nil {
		t.Fatal(err)
	}
	defer st3.Close()
	if _, err := st3.Get(context.Background(), "00000000000000b1"); err != nil {
		t.Fatalf("row lost on reopen: %v", err)
	}
}

// The record's facts persist: those of the request at insert, the
// runner's at running (pgid, limits applied) and at the end (usage), and
// a resize's terminal size. A version-3 database (before them) migrates
// and keeps its rows.
func TestRecordFieldsPersistAndVersion3Migrates(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v < 3; v++ {
		if _, err := db.Exec(migrations[v]); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(`PRAGMA user_version = 3`)
	if _, err := db.Exec(`INSERT INTO jobs (id, status, created_at) VALUES ('00000000000000c3', 'exited', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("migrate a version-3 database: %v", err)
	}
	defer st.Close()
	ctx := context.Background()
	if old, err := st.Get(ctx, "00000000000000c3"); err != nil || old.Home != "" || old.Pgid != 0 {
		t.Fatalf("version-3 row after migration: %+v %v", old, err)
	}
	id := "00000000000000c4"
	if err := st.Insert(ctx, &Job{ID: id, Mode: "pty", CreatedAt: time.Now(), Home: "/w/h", Cols: 80, Rows: 24,
		EnvNames: `["A","B"]`, Limits: `{"output_bytes":5}`}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRunning(ctx, id, Running{PID: 9, StartedAt: time.Now(), Pgid: 9, LimitsApplied: `{"memory_bytes":null}`}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetTerminal(ctx, id, 100, 30); err != nil {
		t.Fatal(err)
	}
	c := 0
	if err := st.Finish(ctx, id, Exit{Status: StatusExited, ExitCode: &c, EndedAt: time.Now(), Pgid: 1, Usage: `{"cpu_user_ms":3}`}); err != nil {
		t.Fatal(err)
	}
	j, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Home != "/w/h" || j.Cols != 100 || j.Rows != 30 || j.EnvNames != `["A","B"]` || j.Limits != `{"output_bytes":5}` ||
		j.LimitsApplied != `{"memory_bytes":null}` || j.Pgid != 9 || j.Usage != `{"cpu_user_ms":3}` {
		t.Fatalf("record fields = %+v", j)
	}
}

// GetMany reads the rows of the ids given, newest first, leaves out the
// ids with no row, and takes any number of ids in its one query.
func TestGetMany(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	var ids []string
	for i := range 1200 {
		id := fmt.Sprintf("%016x", 0xb0000+i)
		if err := s.Insert(ctx, &Job{ID: id, Mode: "stdio", Cwd: "/", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	got, err := s.GetMany(ctx, []string{ids[3], "ffffffffffffffff", ids[7], ids[1]})
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, j := range got {
		gotIDs = append(gotIDs, j.ID)
	}
	if want := []string{ids[7], ids[3], ids[1]}; !slices.Equal(gotIDs, want) {
		t.Errorf("GetMany = %v, want %v (newest first, the unknown id left out)", gotIDs, want)
	}
	one, err := s.Get(ctx, ids[7])
	if err != nil {
		t.Fatal(err)
	}
	// GetMany reads what a listing shows, and only that.
	if want := (&Job{ID: one.ID, Seq: one.Seq, Status: one.Status, CreatedAt: one.CreatedAt, StartedAt: one.StartedAt, EndedAt: one.EndedAt}); len(got) > 0 && !reflect.DeepEqual(got[0], want) {
		t.Errorf("GetMany's row %+v differs from Get's listed fields %+v", got[0], want)
	}
	if all, err := s.GetMany(ctx, ids); err != nil || len(all) != len(ids) {
		t.Errorf("GetMany of %d ids: %d rows, %v", len(ids), len(all), err)
	}
	if none, err := s.GetMany(ctx, nil); err != nil || none == nil || len(none) != 0 {
		t.Errorf("GetMany of no ids = %v, %v: want an empty list", none, err)
	}
}

// A terminal row is read once and then served from the copy kept of it;
// its changes (a terminal size, a delete) drop the copy, and a row that
// is not terminal is always read.
func TestEndedRowsAreKeptUntilChanged(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	id := "00000000000000e1"
	if err := st.Insert(ctx, &Job{ID: id, Mode: "pty", Cwd: "/w", CreatedAt: time.Now(), Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	if j, _ := st.Get(ctx, id); j.Status != StatusCreated {
		t.Fatalf("new job is %s", j.Status)
	}
	if err := st.Finish(ctx, id, Exit{Status: StatusExited, ExitCode: intp(3), EndedAt: time.Now(), Reason: "exited"}); err != nil {
		t.Fatal(err)
	}
	j, err := st.Get(ctx, id)
	if err != nil || j.Status != StatusExited || *j.ExitCode != 3 {
		t.Fatalf("ended job = %+v %v: the row read before its end was kept", j, err)
	}
	// Kept: a change made behind the store's back is not seen...
	if _, err := st.wdb.ExecContext(ctx, `UPDATE jobs SET reason = 'changed' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	*j.ExitCode = 99 // ...and what a caller does to its copy is its own
	if j, _ := st.Get(ctx, id); j.Reason != "exited" || *j.ExitCode != 3 {
		t.Fatalf("second read = reason %q code %d, want the kept row (exited, 3)", j.Reason, *j.ExitCode)
	}
	// A resize of the row drops the copy.
	if err := st.SetTerminal(ctx, id, 100, 30); err != nil {
		t.Fatal(err)
	}
	if j, _ := st.Get(ctx, id); j.Cols != 100 || j.Reason != "changed" {
		t.Fatalf("after SetTerminal: cols %d reason %q, want 100 and the row as written", j.Cols, j.Reason)
	}
	if err := st.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
}

// A read that races a delete never leaves the deleted row kept.
func TestEndedRowNotKeptAcrossADelete(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	for n := 0; n < 100; n++ {
		id := fmt.Sprintf("%016x", 0xd000+n)
		if err := st.Insert(ctx, &Job{ID: id, Mode: "pty", Cwd: "/w", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, id, Exit{Status: StatusFailed, EndedAt: time.Now(), Reason: "x"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for k := 0; k < 20; k++ {
				st.Get(ctx, id)
			}
		}()
		if err := st.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		<-done
		if _, err := st.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("job %s read after its delete: %v", id, err)
		}
	}
}

// The copies kept are bounded.
func TestEndedRowsKeptAreBounded(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	for n := 0; n < endedMax+50; n++ {
		id := fmt.Sprintf("%016x", 0xb000+n)
		st.Insert(ctx, &Job{ID: id, Mode: "pty", Cwd: "/w", CreatedAt: time.Now()})
		st.Finish(ctx, id, Exit{Status: StatusFailed, EndedAt: time.Now(), Reason: "x"})
		if _, err := st.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(st.ended); n > endedMax {
		t.Fatalf("%d rows kept, want at most %d", n, endedMax)
	}
}
