package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// listMix fills s with finished jobs and live jobs in every relation to
// their rows: behind nothing (row and events agree), ahead (running heard,
// row starting; ended heard, row starting or running), and returns the
// ids, oldest first.
func listMix(tb testing.TB, s *Service, finished, ahead int) []string {
	tb.Helper()
	s.runningDelay = time.Hour // the running record stays unwritten: the job is ahead of its row
	ctx := context.Background()
	var ids []string
	n := 0
	id := func() string { n++; return fmt.Sprintf("%016x", 0xa0000+n) }
	for range finished {
		i := id()
		now := time.Now()
		if err := s.st.Insert(ctx, &store.Job{ID: i, Mode: "stdio", Cwd: "/", CreatedAt: now}); err != nil {
			tb.Fatal(err)
		}
		code := 0
		if err := s.st.Finish(ctx, i, store.Exit{Status: store.StatusExited, ExitCode: &code, EndedAt: now}); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, i)
	}
	for k := range ahead {
		j := addLive(tb, s, id())
		ids = append(ids, j.id)
		started := time.Now()
		switch k % 5 {
		case 0: // starting, row starting: in step
		case 1, 2: // running heard, row starting
			s.applyProgress(j, &proto.Msg{T: proto.TRunning, Status: store.StatusRunning, PID: 100 + k, StartedAt: started.UnixNano()})
		case 3: // ended heard, row starting
			code := 1
			j.setEnd(store.Exit{Status: store.StatusExited, ExitCode: &code, EndedAt: time.Now(), StartedAt: &started})
		case 4: // running recorded, then ended heard, row running
			if err := s.st.MarkRunning(ctx, j.id, store.Running{PID: 100 + k, StartedAt: started}); err != nil {
				tb.Fatal(err)
			}
			s.applyProgress(j, &proto.Msg{T: proto.TRunning, Status: store.StatusRunning, PID: 100 + k, StartedAt: started.UnixNano()})
			j.setEnd(store.Exit{Status: store.StatusTerminated, EndedAt: time.Now(), StartedAt: &started})
		}
	}
	return ids
}

// listBefore is List as it was, with one read of the store per live job
// ahead of its row: what the answers must stay equal to.
func listBefore(ctx context.Context, s *Service, status string, limit int) ([]*store.Job, error) {
	rows, err := s.st.List(ctx, status, limit)
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	seen := map[string]bool{}
	for _, r := range rows {
		if j := s.lookup(r.ID); j != nil {
			v := j.view()
			r.Status, r.StartedAt = v.Status, v.StartedAt
		}
		if status == "" || r.Status == status {
			out = append(out, r)
			seen[r.ID] = true
		}
	}
	if status == "" {
		return out, nil
	}
	added := false
	for _, j := range s.liveJobs() {
		if seen[j.id] {
			continue
		}
		v := j.view()
		if v.Status != status {
			continue
		}
		full, err := s.st.Get(ctx, j.id)
		if err != nil {
			continue
		}
		// a listing's fields only, as List reads them
		r := &store.Job{ID: full.ID, Seq: full.Seq, Status: v.Status, CreatedAt: full.CreatedAt, StartedAt: v.StartedAt, EndedAt: full.EndedAt}
		out = append(out, r)
		added = true
	}
	if added {
		slices.SortFunc(out, func(a, b *store.Job) int { return cmp.Compare(b.Seq, a.Seq) })
		if len(out) > limit {
			out = out[:limit]
		}
	}
	return out, nil
}

var listStatuses = []string{"", store.StatusCreated, store.StatusStarting, store.StatusRunning,
	store.StatusExited, store.StatusTerminated, store.StatusFailed, store.StatusLost}

// List answers exactly as before, filtered or not, at every limit, with
// live jobs ahead of their rows (running or ended heard, not yet written).
func TestListAnswersAsBeforeWithJobsAhead(t *testing.T) {
	s := newTestService(t)
	ids := listMix(t, s, 4, 10)
	ctx := context.Background()
	for _, status := range listStatuses {
		for limit := 1; limit <= len(ids)+1; limit++ {
			got, err := s.List(ctx, status, limit)
			if err != nil {
				t.Fatal(err)
			}
			want, err := listBefore(ctx, s, status, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("status %q, limit %d:\n got %v\nwant %v", status, limit, listIDs(got), listIDs(want))
			}
		}
	}
	// The mix has every case: the answers above are not all empty.
	for status, want := range map[string]int{store.StatusRunning: 4, store.StatusStarting: 2, store.StatusExited: 6, store.StatusTerminated: 2, "": 14} {
		if got, _ := s.List(ctx, status, 100); len(got) != want {
			t.Errorf("status %q: %d jobs %v, want %d", status, len(got), listIDs(got), want)
		}
	}
}

// BenchmarkListStatusAhead: GET /v1/jobs?status=running with 200
// finished jobs and 50 live ones, most of them ahead of their rows.
func BenchmarkListStatusAhead(b *testing.B) {
	s := newTestService(b)
	listMix(b, s, 200, 50)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.List(ctx, store.StatusRunning, 200); err != nil {
			b.Fatal(err)
		}
	}
}

// countingStore counts List's reads of the store.
type countingStore struct {
	st    *store.Store
	reads int
}

func (c *countingStore) List(ctx context.Context, status string, limit int) ([]*store.Job, error) {
	c.reads++
	return c.st.List(ctx, status, limit)
}

func (c *countingStore) GetMany(ctx context.Context, ids []string) ([]*store.Job, error) {
	c.reads++
	return c.st.GetMany(ctx, ids)
}

// A status-filtered List reads the store twice at most, however many live
// jobs are ahead of their rows (it read once more per such job: 1 + 20
// here); once when none is ahead, and once unfiltered.
func TestListReadsTheStoreAtMostTwice(t *testing.T) {
	s := newTestService(t)
	listMix(t, s, 20, 50) // 20 live jobs running ahead of their "starting" rows
	ctx := context.Background()
	for _, c := range []struct {
		status    string
		reads, at int
	}{
		{store.StatusRunning, 2, 20},
		{store.StatusExited, 2, 30}, // 10 ended heard, rows starting
		{store.StatusFailed, 1, 0},
		{"", 1, 70},
	} {
		cs := &countingStore{st: s.st}
		got, err := s.list(ctx, cs, c.status, 200)
		if err != nil {
			t.Fatal(err)
		}
		if cs.reads != c.reads || len(got) != c.at {
			t.Errorf("status %q: %d reads, %d jobs; want %d reads, %d jobs", c.status, cs.reads, len(got), c.reads, c.at)
		}
	}
}

// endingStore is the store, with a job's end written (and the job let go
// of, as finish does) while the rows are read, after the query saw its
// row unfinished.
type endingStore struct {
	*store.Store
	s   *Service
	j   *job
	end store.Exit
}

func (e *endingStore) List(ctx context.Context, status string, limit int) ([]*store.Job, error) {
	rows, err := e.Store.List(ctx, status, limit)
	if err == nil {
		if err := e.Store.Finish(ctx, e.j.id, e.end); err != nil {
			return nil, err
		}
		e.s.forget(e.j)
	}
	return rows, err
}

// TestListFindsAJobEndedWhileTheRowsAreRead: a job whose end was answered
// before the request, and whose row is written while List reads the rows
// (after the query), is listed: it was live when List began.
// (TestFaultFiftyParallelRuns under -race listed 47 jobs of 50.)
func TestListFindsAJobEndedWhileTheRowsAreRead(t *testing.T) {
	s := newTestService(t)
	s.runningDelay = time.Hour
	j := addLive(t, s, "00000000000000e1")
	code := 0
	end := store.Exit{Status: store.StatusExited, ExitCode: &code, EndedAt: time.Now()}
	j.setEnd(end) // answered from memory; the row still says starting
	got, err := s.list(context.Background(), &endingStore{Store: s.st, s: s, j: j, end: end}, store.StatusExited, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != j.id || got[0].Status != store.StatusExited {
		t.Fatalf("exited jobs: %+v, want %s", got, j.id)
	}
	// Listed as running, it is not: its row says it ended.
	j2 := addLive(t, s, "00000000000000e2")
	s.applyProgress(j2, &proto.Msg{T: proto.TRunning, Status: store.StatusRunning, PID: 7, StartedAt: time.Now().UnixNano()})
	got, err = s.list(context.Background(), &endingStore{Store: s.st, s: s, j: j2, end: end}, store.StatusRunning, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("running jobs: %+v, want none (the job's end is written)", got)
	}
}

// TestDeleteWaitsForTheEndToBeRecorded: a job whose end is answered but
// not yet written is deleted only once its end is in its row and it is no
// longer live: a status right after the delete says not found, and the
// end's write finds its row (TestDeleteRules saw the job's status after a
// forced delete).
func TestDeleteWaitsForTheEndToBeRecorded(t *testing.T) {
	s, j, end := answeredNotRecorded(t, "00000000000000d1", store.StatusExited, "")
	// It waits for the end's record, which does not come here: the bound
	// only ends the wait.
	bounded, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Delete(bounded, j.id, true, 0); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delete before the job's end was recorded: %v, want it to wait", err)
	}
	if _, err := s.st.Get(context.Background(), j.id); err != nil {
		t.Fatalf("the row went before the end was recorded: %v", err)
	}
	if !s.finish(j, end) {
		t.Fatal("the end was not recorded")
	}
	if err := s.Delete(context.Background(), j.id, true, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Status(context.Background(), j.id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status after the delete: %v, want not found", err)
	}
}

// EndAll (a PID 1's stop) returns only once every job's end is in its row,
// not when the end is answered from memory: the database closes after it.
func TestEndAllWaitsForTheEndToBeRecorded(t *testing.T) {
	s, j, end := answeredNotRecorded(t, "00000000000000d2", store.StatusTerminated, "terminate_requested")
	bounded, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.EndAll(bounded, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EndAll before the job's end was recorded: %v, want it to wait", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.EndAll(context.Background(), time.Second)
		done <- err
	}()
	if !s.finish(j, end) {
		t.Fatal("the end was not recorded")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	row, err := s.st.Get(context.Background(), j.id)
	if err != nil || row.Status != store.StatusTerminated {
		t.Fatalf("row after EndAll: %+v %v, want terminated", row, err)
	}
}

// answeredNotRecorded is a service with one live job whose end (status,
// reason, exit 0) is answered from memory while its row still says
// starting: the moment between setEnd and finish's write.
func answeredNotRecorded(t *testing.T, id, status, reason string) (*Service, *job, store.Exit) {
	t.Helper()
	s := newTestService(t)
	s.runningDelay = time.Hour
	j := addLive(t, s, id)
	code := 0
	end := store.Exit{Status: status, ExitCode: &code, Reason: reason, EndedAt: time.Now()}
	j.setEnd(end)
	return s, j, end
}

// A job whose process failed to become the job (its confinement or its
// exec failed) has no running event: the facts of its start come with its
// end only. Its record, read between the end's arrival and its write, has
// them all the same (CI saw an isolation-failed record without isolation).
func TestRecordBeforeTheEndIsWrittenHasTheStartFacts(t *testing.T) {
	s := newTestService(t)
	s.runningDelay = time.Hour
	j := addLive(t, s, "00000000000000d3")
	code, started := 125, time.Now()
	iso := `{"enabled":false,"error":"apply Landlock: forced"}`
	j.setEnd(store.Exit{Status: store.StatusExited, ExitCode: &code, Reason: "isolation_failed", EndedAt: time.Now(),
		StartedAt: &started, PID: 4242, Pgid: 4242, Isolation: iso})
	rec, err := s.Record(context.Background(), j.id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Isolation == nil || rec.Isolation.Error == nil || *rec.Isolation.Error != "apply Landlock: forced" {
		t.Errorf("isolation = %+v, want the end's", rec.Isolation)
	}
	if rec.PID == nil || *rec.PID != 4242 || rec.Pgid == nil || *rec.Pgid != 4242 {
		t.Errorf("pid %v pgid %v, want 4242", rec.PID, rec.Pgid)
	}
}

// TestAnEndedJobHoldsNoRunningSlot: --max-running-jobs counts the live
// jobs whose end is not known. One whose end was answered (a terminate's
// answer) but is not yet written stays live, and holds no slot: a run
// right after that answer is not refused (TestLimitMaxRunningJobs was,
// with 429, under load).
func TestAnEndedJobHoldsNoRunningSlot(t *testing.T) {
	s, ended, _ := answeredNotRecorded(t, "00000000000000f1", store.StatusTerminated, "terminated")
	running := addLive(t, s, "00000000000000f2")
	s.mu.Lock()
	n, live := s.runningLocked(), len(s.live)
	s.mu.Unlock()
	if live != 2 || n != 1 {
		t.Fatalf("%d live jobs, %d counted running; want 2 live (%s's end is not yet written), 1 running (%s)", live, n, ended.id, running.id)
	}
}
