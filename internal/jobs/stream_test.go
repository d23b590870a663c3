package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/statedir"
	"github.com/shellctl/shellctl/internal/store"
)

// liveService is a service holding one live job, as its runner's events
// left it (no database, no runner: Follow of a live job needs neither).
func liveService(t *testing.T, mode string) (*Service, *job) {
	t.Helper()
	s := &Service{cfg: Config{StateDir: t.TempDir()}, live: map[string]*job{}}
	j := newJob("0123456789abcdef", runner.JobDir(s.cfg.StateDir, "0123456789abcdef"), mode)
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.live[j.id] = j
	sd, err := statedir.OpenDir(s.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	s.sd = sd
	return s, j
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestFollowLive: a follower sees the size the runner's events announced
// (output.log's, or stderr.log's for the stderr channel), is woken by each
// event, and once the end is known reads the size on disk.
func TestFollowLive(t *testing.T) {
	s, j := liveService(t, "stdio")
	ctx := context.Background()
	out, err := s.Follow(ctx, j.id, ChannelOutput)
	if err != nil {
		t.Fatal(err)
	}
	errf, err := s.Follow(ctx, j.id, ChannelStderr)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := out.State(ctx)
	if st.Done || st.Size != 0 || st.Changed == nil || st.Status != store.StatusCreated {
		t.Fatalf("fresh job: %+v", st)
	}
	if closedWithin(st.Changed, 10*time.Millisecond) {
		t.Fatal("changed closed with no event")
	}
	s.applyProgress(j, &proto.Msg{T: proto.TOutput, Size: 10, ErrSize: 4})
	if !closedWithin(st.Changed, time.Second) {
		t.Fatal("a size event did not wake the follower")
	}
	if st, _ = out.State(ctx); st.Size != 10 {
		t.Fatalf("output size %d after an event of 10", st.Size)
	}
	if st, _ = errf.State(ctx); st.Size != 4 {
		t.Fatalf("stderr size %d after an event of 4", st.Size)
	}
	// The end: the runner drained more than its last event said.
	if err := os.WriteFile(filepath.Join(j.dir, runner.OutputFile), []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	code := 0
	j.setEnd(store.Exit{Status: store.StatusExited, ExitCode: &code, EndedAt: time.Now()})
	if !closedWithin(st.Changed, time.Second) {
		t.Fatal("the end did not wake the follower")
	}
	st, _ = out.State(ctx)
	if !st.Done || st.Size != 16 || st.Changed != nil || st.Status != store.StatusExited {
		t.Fatalf("ended job: %+v, want done at the size on disk (16)", st)
	}
	buf := make([]byte, 6)
	if n, err := out.ReadAt(buf, 10); err != nil || string(buf[:n]) != "abcdef" {
		t.Fatalf("ReadAt: %q, %v", buf[:n], err)
	}
	out.Close()
	errf.Close()
}

// TestFollowStderrOfPTY: a pty job has no stderr channel.
func TestFollowStderrOfPTY(t *testing.T) {
	s, j := liveService(t, "pty")
	_, err := s.Follow(context.Background(), j.id, ChannelStderr)
	if !errors.Is(err, ErrChannelUnsupported) {
		t.Fatalf("got %v, want ErrChannelUnsupported", err)
	}
}

// TestFollowInputWait: a pty job's follower carries its input-wait state
// as the runner published it; a stdio job's has none.
func TestFollowInputWait(t *testing.T) {
	s, j := liveService(t, "pty")
	ctx := context.Background()
	fw, err := s.Follow(ctx, j.id, ChannelOutput)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	st, _ := fw.State(ctx)
	if st.InputWait == nil || *st.InputWait {
		t.Fatalf("fresh pty job: input wait %v, want false", st.InputWait)
	}
	s.applyInputWait(j, &proto.Msg{T: proto.TInputWait, Waiting: true, Size: 6})
	if !closedWithin(st.Changed, time.Second) {
		t.Fatal("an input-wait event did not wake the follower")
	}
	if st, _ = fw.State(ctx); st.InputWait == nil || !*st.InputWait || st.Size != 6 {
		t.Fatalf("after waiting: %+v", st)
	}
	s2, j2 := liveService(t, "stdio")
	fw2, _ := s2.Follow(ctx, j2.id, ChannelOutput)
	defer fw2.Close()
	if st, _ := fw2.State(ctx); st.InputWait != nil {
		t.Fatalf("stdio job: input wait %v, want none", *st.InputWait)
	}
}
