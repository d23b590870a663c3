package jobs

import (
	"log/slog"
	"testing"
	"time"
)

// An item taken from a full pool is replaced only once a job's start is
// over (startOver), not beside that start; while the pool is not full,
// items are made back to back.
func TestRefillWaitsForTheStartToBeOver(t *testing.T) {
	s := &Service{stop: make(chan struct{}), log: slog.New(slog.DiscardHandler),
		refillGates: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}
	ch := make(chan int, 1)
	made := make(chan int, 16)
	n := 0
	s.wg.Add(1)
	go keepFilled(s, ch, s.refillGates[0], "test item", func() (int, error) {
		n++
		made <- n
		return n, nil
	}, func(int) {})
	defer func() { close(s.stop); s.wg.Wait() }()

	// The first fill: one in the channel, one waiting to go in.
	for want := 1; want <= 2; want++ {
		if got := <-made; got != want {
			t.Fatalf("item %d made, want %d", got, want)
		}
	}
	// A job takes one: the waiting one goes in, and no third is made
	// while that job starts.
	// An item made while a start is not over fails the test only when it
	// came before refillDelayMax could have passed: on a loaded machine
	// this goroutine may sleep past the delay itself, and then the item
	// is the delay's, as it should be.
	early := func(since time.Time, wait time.Duration, what string) (got int, late bool) {
		select {
		case got = <-made:
			if d := time.Since(since); d < refillDelayMax*3/4 {
				t.Fatalf("item %d made %v after %s, while the start was not over", got, d, what)
			}
			return got, true
		case <-time.After(wait):
			return 0, false
		}
	}
	t1 := time.Now()
	if got := <-ch; got != 1 {
		t.Fatalf("took item %d, want 1", got)
	}
	_, late := early(t1, refillDelayMax/2, "one was taken")
	// Its start is over: the replacement is made at once. (When the delay
	// made it already, there is nothing left to check here.)
	if !late {
		s.startOver()
		select {
		case got := <-made:
			if got != 3 {
				t.Fatalf("item %d made, want 3", got)
			}
		case <-time.After(refillDelayMax / 2):
			t.Fatal("no replacement made after startOver")
		}
	}
	// A start that never says it is over (a runner killed while starting)
	// delays the replacement by refillDelayMax at most.
	<-ch
	t0 := time.Now()
	select {
	case <-made:
		if d := time.Since(t0); d < refillDelayMax/2 {
			t.Fatalf("replacement made after %v with no startOver, want about %v", d, refillDelayMax)
		}
	case <-time.After(10 * refillDelayMax):
		t.Fatalf("no replacement %v after a take with no startOver", 10*refillDelayMax)
	}
	// Several taken at once: the first replacement waits for the start,
	// the next one follows it at once (room is there).
	t2 := time.Now()
	<-ch
	<-ch
	_, late = early(t2, refillDelayMax/4, "two were taken")
	s.startOver()
	want := 2
	if late {
		want = 1
	}
	for i := 0; i < want; i++ {
		select {
		case <-made:
		case <-time.After(refillDelayMax / 2):
			t.Fatalf("replacement %d of two taken at once not made at once", i+1)
		}
	}
}
