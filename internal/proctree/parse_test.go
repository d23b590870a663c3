package proctree

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		line string
		want procStat
		bad  bool
	}{
		{
			name: "plain",
			line: "4242 (sleep) S 4200 4200 4100 34816 4200 4194304 100 0 0 0 0 0 0 0 20 0 1 0 987654 2400000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
			want: procStat{pid: 4242, state: 'S', ppid: 4200, pgrp: 4200, start: 987654},
		},
		{
			name: "comm with spaces and parens",
			line: "7 (a) b ) (c) Z 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0",
			want: procStat{pid: 7, state: 'Z', ppid: 1, pgrp: 7, start: 55},
		},
		{name: "truncated", line: "7 (x) S 1 7 7", bad: true},
		{name: "no comm", line: "7 S 1 7 7", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if tt.bad {
				if err == nil {
					t.Fatalf("parseStat(%q) = %+v, want error", tt.line, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseStat = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if !(procStat{state: 'Z'}).gone() || (procStat{state: 'T'}).gone() || (procStat{state: 'S'}).gone() {
		t.Fatal("gone classifies states wrongly")
	}
}

const hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
50 23 0:40 /jobs /mnt/my\040cg rw,relatime - cgroup2 cgroup2 rw
`

func TestCgroupDir(t *testing.T) {
	mounts := parseCgroup2Mounts([]byte(hybridMountinfo))
	if len(mounts) != 2 || mounts[0].point != "/sys/fs/cgroup/unified" || mounts[1].point != "/mnt/my cg" || mounts[1].root != "/jobs" {
		t.Fatalf("mounts = %+v", mounts)
	}
	tests := []struct {
		mounts []cgroup2Mount
		path   string
		want   string
		bad    bool
	}{
		{mounts: mounts, path: "/", want: "/sys/fs/cgroup/unified"},
		{mounts: mounts, path: "/user.slice/a.scope", want: "/sys/fs/cgroup/unified/user.slice/a.scope"},
		{mounts: mounts[1:], path: "/jobs/x", want: "/mnt/my cg/x"},
		{mounts: mounts[1:], path: "/jobs", want: "/mnt/my cg"},
		{mounts: mounts[1:], path: "/jobsx", bad: true},
		{mounts: mounts, path: "/../..", bad: true},
		{mounts: nil, path: "/", bad: true},
	}
	for _, tt := range tests {
		got, err := cgroupDir(tt.mounts, tt.path)
		if tt.bad != (err != nil) || got != tt.want {
			t.Errorf("cgroupDir(%v, %q) = %q, %v; want %q (error %v)", tt.mounts, tt.path, got, err, tt.want, tt.bad)
		}
	}
	p, err := parseCgroupV2Path([]byte("4:memory:/x\n0::/user.slice/s.scope\n"))
	if err != nil || p != "/user.slice/s.scope" {
		t.Fatalf("parseCgroupV2Path = %q, %v", p, err)
	}
	if _, err := parseCgroupV2Path([]byte("4:memory:/x\n")); err == nil {
		t.Fatal("v1-only cgroup file: want error")
	}
}

func TestParseKeyedAndNames(t *testing.T) {
	if n, ok := parseKeyed([]byte("populated 1\nfrozen 0\n"), "populated"); !ok || n != 1 {
		t.Fatalf("populated = %d, %v", n, ok)
	}
	if n, ok := parseKeyed([]byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n"), "oom_kill"); !ok || n != 2 {
		t.Fatalf("oom_kill = %d, %v", n, ok)
	}
	if !hasWord([]byte("cpu memory pids\n"), "pids") || hasWord([]byte("hugetlb\n"), "memory") {
		t.Fatal("hasWord")
	}
	for _, bad := range []string{"", ".", "..", "a/b", "x\x00"} {
		if validName(bad) == nil {
			t.Errorf("validName(%q) accepted", bad)
		}
	}
	if err := validName("shellctl-ab12-7"); err != nil {
		t.Fatal(err)
	}
}

// fakeTracker is a tree that empties on the signal named in dieOn.
type fakeTracker struct {
	mu      sync.Mutex
	alive   bool
	dieOn   string // "term", "kill" or "never"
	signals []string
	changed chan struct{}
}

func newFake(alive bool, dieOn string) *fakeTracker {
	return &fakeTracker{alive: alive, dieOn: dieOn, changed: make(chan struct{}, 1)}
}

func (f *fakeTracker) Kind() string     { return "fake" }
func (f *fakeTracker) Add(int) error    { return nil }
func (f *fakeTracker) Notify()          {}
func (f *fakeTracker) Exempt(int) error { return nil }
func (f *fakeTracker) OOMKilled() bool  { return false }
func (f *fakeTracker) Close() error     { return nil }
func (f *fakeTracker) Kill() error      { f.record("kill"); return nil }
func (f *fakeTracker) Pids() ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.alive {
		return []int{100}, nil
	}
	return nil, nil
}
func (f *fakeTracker) Signal(sig syscall.Signal) error {
	if sig == syscall.SIGTERM {
		f.record("term")
	}
	return nil
}
func (f *fakeTracker) record(s string) {
	f.mu.Lock()
	f.signals = append(f.signals, s)
	if f.dieOn == s {
		f.alive = false
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}
func (f *fakeTracker) WaitEmpty(ctx context.Context) error {
	for {
		if p, _ := f.Pids(); len(p) == 0 {
			return nil
		}
		select {
		case <-f.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func TestLadderSteps(t *testing.T) {
	tests := []struct {
		name  string
		fake  *fakeTracker
		grace time.Duration
		want  []string
		min   time.Duration
		max   time.Duration
	}{
		{name: "empty tree is a no-op", fake: newFake(false, "never"), grace: time.Second, max: 50 * time.Millisecond},
		{name: "ends on sigterm without waiting the grace", fake: newFake(true, "term"), grace: 10 * time.Second, want: []string{"term"}, max: 50 * time.Millisecond},
		{name: "sigkill when grace runs out", fake: newFake(true, "kill"), grace: 200 * time.Millisecond, want: []string{"term", "kill"}, min: 200 * time.Millisecond, max: time.Second},
		{name: "zero grace kills at once", fake: newFake(true, "kill"), grace: 0, want: []string{"kill"}, max: 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Now()
			err := Ladder(context.Background(), tt.fake, 0, tt.grace)
			el := time.Since(t0)
			if err != nil {
				t.Fatalf("Ladder: %v", err)
			}
			if el < tt.min || el > tt.max {
				t.Errorf("Ladder took %v, want %v..%v", el, tt.min, tt.max)
			}
			if len(tt.fake.signals) != len(tt.want) {
				t.Fatalf("signals %v, want %v", tt.fake.signals, tt.want)
			}
			for i := range tt.want {
				if tt.fake.signals[i] != tt.want[i] {
					t.Fatalf("signals %v, want %v", tt.fake.signals, tt.want)
				}
			}
		})
	}
	t.Run("cancelled context stops the ladder", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := Ladder(ctx, newFake(true, "never"), 0, time.Minute)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ladder = %v, want deadline exceeded", err)
		}
	})
}
