package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// newTestService is a service over a fresh state dir, with no runner (its
// jobs are made by hand: addLive).
func newTestService(t testing.TB) *Service {
	t.Helper()
	dir := t.TempDir()
	home, state := filepath.Join(dir, "home"), filepath.Join(dir, "state")
	for _, d := range []string{home, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, Config{StateDir: state, RunnerPath: filepath.Join(dir, "no-runner"), Home: home}, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); st.Close() })
	return s
}

// addLive makes job id as start does with a warm runner: its row
// "starting", its live job.
func addLive(t testing.TB, s *Service, id string) *job {
	t.Helper()
	now := time.Now()
	if err := s.st.Insert(context.Background(), &store.Job{ID: id, Mode: "stdio", Cwd: "/", CreatedAt: now, RunnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	j := newJob(id, runner.JobDir(s.cfg.StateDir, id), "stdio")
	j.status, j.created = store.StatusStarting, now
	s.mu.Lock()
	s.live[id] = j
	s.mu.Unlock()
	return j
}

func rowOf(t *testing.T, s *Service, id string) *store.Job {
	t.Helper()
	r, err := s.st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func code0() *int { c := 0; return &c }

// A job's running record is written only while it runs: one that ended
// first gets the same facts from its end's record, in one write.
func TestRunningRecordIsSkippedForAJobThatEnded(t *testing.T) {
	s := newTestService(t)
	s.runningDelay = time.Hour // the timer's own write stays out of the way
	r := store.Running{PID: 4242, StartedAt: time.Now(), Pgid: 4242}

	ended := addLive(t, s, "00000000000000e1")
	s.applyProgress(ended, &proto.Msg{T: proto.TRunning, Status: store.StatusRunning, PID: r.PID, Pgid: r.Pgid, StartedAt: r.StartedAt.UnixNano()})
	s.finish(ended, store.Exit{Status: store.StatusExited, ExitCode: code0(), Reason: runner.ReasonExited, EndedAt: time.Now(), PID: r.PID, StartedAt: &r.StartedAt, Pgid: r.Pgid})
	if s.recordRunning(ended, r) {
		t.Fatal("the running record of an ended job was written")
	}
	if row := rowOf(t, s, ended.id); row.Status != store.StatusExited || row.PID != r.PID || row.Pgid != r.Pgid || row.StartedAt == nil {
		t.Fatalf("row of the ended job = %+v: want exited with the start's facts (pid, pgid, started_at)", row)
	}

	running := addLive(t, s, "00000000000000e2")
	s.applyProgress(running, &proto.Msg{T: proto.TRunning, Status: store.StatusRunning, PID: r.PID, Pgid: r.Pgid, StartedAt: r.StartedAt.UnixNano()})
	if row := rowOf(t, s, running.id); row.Status != store.StatusStarting {
		t.Fatalf("row right after the running event = %q: the write should wait %s", row.Status, s.runningDelay)
	}
	if !s.recordRunning(running, r) {
		t.Fatal("the running record of a running job was not written")
	}
	if row := rowOf(t, s, running.id); row.Status != store.StatusRunning || row.PID != r.PID {
		t.Fatalf("row of the running job = %+v: want running with pid %d", row, r.PID)
	}
}

// The end is answered from memory before its write is taken: a waiter is
// woken while the database is locked by another writer, the record shows
// the end's reason meanwhile, and the job leaves the live set only once
// its row says it ended.
func TestEndIsAnsweredBeforeItsWrite(t *testing.T) {
	s := newTestService(t)
	j := addLive(t, s, "00000000000000f1")
	changed := j.look().changed

	// Another writer holds the database (a runner recording an exit, a
	// slow disk): the server's Finish waits for it.
	locker, err := sql.Open("sqlite", "file:"+filepath.Join(s.cfg.StateDir, store.DBFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	conn, err := locker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	finished := make(chan struct{})
	go func() {
		s.finish(j, store.Exit{Status: store.StatusExited, ExitCode: code0(), Reason: runner.ReasonExited, EndedAt: time.Now()})
		close(finished)
	}()
	select {
	case <-changed:
	case <-time.After(3 * time.Second):
		conn.ExecContext(ctx, "ROLLBACK")
		t.Fatal("the waiter was not woken while the end's write waited for the database")
	}
	if v := j.view(); !v.Done || v.Status != store.StatusExited {
		t.Fatalf("live view = %+v: want exited", v)
	}
	if s.lookup(j.id) == nil {
		t.Fatal("the job left the live set before its end was recorded")
	}
	rec, err := s.Record(ctx, j.id)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Done || rec.Reason == nil || *rec.Reason != "exited" {
		t.Fatalf("record while the end's write waits: done %v reason %v: want done, exited", rec.Done, rec.Reason)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	<-finished
	if row := rowOf(t, s, j.id); row.Status != store.StatusExited {
		t.Fatalf("row after the write = %q: want exited", row.Status)
	}
	if s.lookup(j.id) != nil {
		t.Fatal("the job is still live after its end was recorded")
	}
}

// Listing one status finds the live jobs whose events say so before their
// rows do: a running job whose running record is not yet written, an ended
// one whose end is not yet taken.
func TestListStatusFindsJobsAheadOfTheirRows(t *testing.T) {
	s := newTestService(t)
	s.runningDelay = time.Hour
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		j := addLive(t, s, fmt.Sprintf("00000000000000a%d", i))
		ids = append(ids, j.id)
		if i < 2 {
			s.applyProgress(j, &proto.Msg{T: proto.TRunning, Status: store.StatusRunning, PID: 100 + i, StartedAt: time.Now().UnixNano()})
		}
	}
	got, err := s.List(ctx, store.StatusRunning, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[0] || got[0].Status != store.StatusRunning {
		t.Fatalf("list running = %v: want %s, %s (newest first), running", listIDs(got), ids[1], ids[0])
	}
	if got, _ := s.List(ctx, store.StatusRunning, 1); len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("list running, limit 1 = %v: want %s", listIDs(got), ids[1])
	}
	if got, _ := s.List(ctx, store.StatusStarting, 10); len(got) != 1 || got[0].ID != ids[2] {
		t.Fatalf("list starting = %v: want only %s", listIDs(got), ids[2])
	}
}

func listIDs(rows []*store.Job) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ID+":"+r.Status)
	}
	return out
}

// childrenOf finds a child whichever thread forked it.
func TestChildrenOfListsOurChildren(t *testing.T) {
	var cmds []*exec.Cmd
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 { // from several goroutines, so likely several threads
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.Command("sleep", "30")
			if err := c.Start(); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			cmds = append(cmds, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	kids := map[int]bool{}
	for _, p := range childrenOf(os.Getpid()) {
		kids[p] = true
	}
	for _, c := range cmds {
		if !kids[c.Process.Pid] {
			t.Errorf("child %d not among %v", c.Process.Pid, kids)
		}
	}
}

// A job's directory made ahead brings its script file, made and open: the
// script is written into it (made executable for "#!"), or a spooled
// script takes its place.
func TestReadyDirBringsTheScriptFile(t *testing.T) {
	s := newTestService(t)
	for _, tc := range []struct {
		name, script string
		spooled      bool
		mode         os.FileMode
	}{
		{"shell", "echo hi\n", false, 0o600},
		{"shebang", "#!/bin/sh\necho hi\n", false, 0o700},
		{"spooled", "#!/bin/sh\necho spooled\n", true, 0o700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Wait for one to be ready; the channel may have been filled
			// again meanwhile: then another is.
			d := <-s.readyDirs
			select {
			case s.readyDirs <- d:
			default:
				s.discardDir(d)
			}
			id := NewID()
			ready, err := s.makeJobDir(id)
			if err != nil || ready == nil {
				t.Fatalf("makeJobDir = %v, %v: want the ready script file", ready, err)
			}
			req := RunRequest{Script: tc.script}
			if tc.spooled {
				f, err := s.SpoolFile()
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(tc.script)
				f.Close()
				req = RunRequest{ScriptPath: f.Name()}
			}
			path := filepath.Join(runner.JobDir(s.cfg.StateDir, id), runner.ScriptFile)
			argv, perm := []string{"/bin/sh", path}, os.FileMode(0o600)
			if err := s.writeScript(id, path, req, &argv, &perm, ready); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			fi, _ := os.Stat(path)
			if err != nil || string(b) != tc.script || fi.Mode().Perm() != tc.mode {
				t.Fatalf("script = %q %v (mode %v): want %q mode %v", b, err, fi.Mode().Perm(), tc.script, tc.mode)
			}
			// The script, and the empty files the runner writes.
			ents, _ := os.ReadDir(filepath.Dir(path))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
				if fi, err := e.Info(); err != nil || (e.Name() != runner.ScriptFile && fi.Size() != 0) {
					t.Fatalf("%s in the job dir: %v %v", e.Name(), fi, err)
				}
			}
			if strings.Join(names, " ") != strings.Join([]string{runner.OutputFile, runner.ScreenFile, runner.ScriptFile}, " ") {
				t.Fatalf("job dir holds %v, want the script, output.log and screen.json", names)
			}
		})
	}
}
