package runner

import (
	"bytes"
	"testing"
	"time"

	"github.com/creack/pty"
)

// An event wakes the input-wait loop only when its timer is not already
// armed for the time the event asks: otherwise it is noted, and counted
// when the timer fires.
func TestInputWaitEventWakesTheLoopOnlyWhenNeeded(t *testing.T) {
	iw := &inputWait{kick: make(chan struct{}, 1)}
	iw.on.Store(true)
	iw.covered.Store(true)
	iw.event()
	if len(iw.kick) != 0 || !iw.pending.Load() {
		t.Fatalf("covered: kick queued %d, pending %v; want no kick and the event noted", len(iw.kick), iw.pending.Load())
	}
	iw.covered.Store(false)
	iw.event()
	if len(iw.kick) != 1 {
		t.Fatalf("not covered: kick queued %d, want 1", len(iw.kick))
	}
}

// TestInputWaitFloodIsCovered: while a job prints without pause (an event
// at each read of its terminal, thousands a second), the loop's timer is
// armed for the time the next event asks, so the events do not wake it.
// Its times used to be taken from the clock when armed, a little after
// the schedule's, and every event woke the loop and re-armed its timer:
// a fifth of a flooding pty job's runner CPU with the checks' reads.
func TestInputWaitFloodIsCovered(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a terminal (a runner cannot run pty jobs without one): %v", err)
	}
	defer master.Close()
	defer slave.Close()
	// Output the pump has not read: each check finds the job printing.
	if _, err := slave.Write(bytes.Repeat([]byte("x"), 1000)); err != nil {
		t.Fatal(err)
	}
	r := &Runner{done: make(chan struct{})}
	iw := &r.iw
	iw.r, iw.master, iw.kick = r, master, make(chan struct{}, 1)
	iw.on.Store(true)
	go iw.loop()
	defer close(r.done)
	// The back-off takes the checks to inputWaitMaxGap apart.
	flood := func(d time.Duration) (covered, all int) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			iw.event()
			if iw.covered.Load() {
				covered++
			}
			all++
			time.Sleep(50 * time.Microsecond)
		}
		return covered, all
	}
	flood(20 * inputWaitMaxGap)
	covered, all := flood(20 * inputWaitMaxGap)
	if covered*2 < all {
		t.Fatalf("during a flood, %d of %d events found the loop covered: want most of them (the rest woke it)", covered, all)
	}
}
