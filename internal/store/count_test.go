package store

import (
	"context"
	"testing"
	"time"
)

func TestCountByStatus(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	now := time.Now()
	for i, id := range []string{"0000000000000001", "0000000000000002", "0000000000000003"} {
		if err := st.Insert(ctx, &Job{ID: id, Mode: "pty", Cwd: "/w", CreatedAt: now.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Finish(ctx, "0000000000000001", Exit{Status: StatusExited, ExitCode: intp(0), Reason: "exited", EndedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, "0000000000000002", Exit{Status: StatusLost, Reason: "runner_lost", EndedAt: now}); err != nil {
		t.Fatal(err)
	}
	got, err := st.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"created": 1, "starting": 0, "running": 0, "exited": 1, "terminated": 0, "failed": 0, "lost": 1}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("count of %s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
