package jobs

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// runnerPair is a control channel: the server's end attached to j, the
// runner's end returned.
func runnerPair(t *testing.T, s *Service, j *job) *proto.Conn {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *proto.Conn {
		f := os.NewFile(uintptr(fd), "ctl")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return proto.NewConn(c)
	}
	ours, theirs := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	s.attach(j, ours)
	return theirs
}

// lockDB holds the database's write lock (another writer, or a disk that
// refuses writes) until the returned function is called.
func lockDB(t *testing.T, s *Service) func() {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.cfg.StateDir, store.DBFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			c.ExecContext(ctx, "ROLLBACK")
			c.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

func addLivePTY(t *testing.T, s *Service, id string) *job {
	t.Helper()
	j := addLive(t, s, id)
	j.mode = "pty"
	dir := runner.JobDir(s.cfg.StateDir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runner.OutputFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return j
}

// A wait on a pty job asks its runner for a fresh input-wait look; when
// the job's exit comes instead of the answer, and its end cannot be
// written yet (the database is held: a full disk held it for good), the
// wait answers all the same instead of waiting on the runner until its own
// deadline (seen: TestFullDiskKeepsTheExit hung in such a wait).
func TestWaitDoesNotHangOnTheLookAtTheEnd(t *testing.T) {
	s := newTestService(t)
	j := addLivePTY(t, s, "00000000000000a1")
	rn := runnerPair(t, s, j)
	release := lockDB(t, s)
	defer release()
	go func() {
		// The runner: the look's query arrives, its job's exit goes out
		// and the query is never answered.
		if m, err := rn.Recv(); err != nil || m.T != proto.TInputWaitQuery {
			return
		}
		rn.Send(&proto.Msg{T: proto.TExit, Status: store.StatusExited, ExitCode: code0(), Reason: runner.ReasonExited, EndedAt: time.Now().UnixNano(), Done: true})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Wait(ctx, j.id, WaitParams{}); err != nil {
		t.Fatalf("wait while the end's write is held: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the wait answered only at its context's deadline: it waited for the runner's answer to the look")
	}
}

// Acks that follow a job's exit (a terminate's) reach their requests while
// the end's write is still held up.
func TestAcksAfterTheExitArriveWhileTheEndIsWritten(t *testing.T) {
	s := newTestService(t)
	j := addLivePTY(t, s, "00000000000000a2")
	rn := runnerPair(t, s, j)
	release := lockDB(t, s)
	defer release()
	go func() {
		m, err := rn.Recv()
		if err != nil {
			return
		}
		rn.Send(&proto.Msg{T: proto.TExit, Status: store.StatusTerminated, ExitCode: code0(), Reason: runner.ReasonTerminate, EndedAt: time.Now().UnixNano(), Done: true})
		rn.Send(&proto.Msg{T: proto.TAck, ID: m.ID})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := s.request(ctx, j, &proto.Msg{T: proto.TTerminate})
	if err != nil || a == nil || a.Err != "" {
		t.Fatalf("terminate's ack while the end's write is held: %+v %v", a, err)
	}
}

// A restarted server waits for the runners of the jobs a crash cut off
// while they started all at once: with several such jobs it serves after
// about one startupGrace, not one per job (12 jobs kept it from serving
// for 24 s: TestFaultServerKilledDuringRunBurst flaked on it).
func TestReconcileWaitsForRunnersAtOnce(t *testing.T) {
	s := newTestService(t)
	const n = 5
	ids := make([]string, n)
	for i := range ids {
		ids[i] = NewID()
		// "created", no runner recorded: the previous server may have
		// handed the job to a runner just before it died.
		if err := s.st.Insert(context.Background(), &store.Job{ID: ids[i], Mode: "stdio", Cwd: "/", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(runner.JobDir(s.cfg.StateDir, ids[i]), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := s.reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*startupGrace {
		t.Errorf("reconcile of %d starting jobs took %v: the waits for their runners did not overlap (one grace is %v)", n, took, startupGrace)
	}
	for _, id := range ids {
		if row := rowOf(t, s, id); row.Status != store.StatusFailed {
			t.Errorf("job %s after reconcile: %s, want failed (its runner never came)", id, row.Status)
		}
	}
}

// A server that stops while the end's write is held up never tells the
// runner the exit is recorded: the runner keeps it and records it itself.
func TestExitNotAckedWhenTheServerStopsBeforeItsWrite(t *testing.T) {
	s := newTestService(t)
	j := addLivePTY(t, s, "00000000000000a3")
	rn := runnerPair(t, s, j)
	release := lockDB(t, s)
	defer release()
	changed := j.look().changed
	if err := rn.Send(&proto.Msg{T: proto.TExit, Status: store.StatusExited, ExitCode: code0(), Reason: runner.ReasonExited, EndedAt: time.Now().UnixNano(), Done: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed: // the end is known in memory; its write waits
	case <-time.After(10 * time.Second):
		t.Fatal("the exit was not taken")
	}
	go s.Close()
	for {
		m, err := rn.Recv()
		if err != nil {
			return // the channel closed with no ack
		}
		if m.T == proto.TExitAck {
			t.Fatal("the runner was told its exit is recorded, but the server stopped before writing it")
		}
	}
}
