package runner

import (
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// pacedRunner is a runner with only what sendSizes needs, its events
// read (with when they arrived) from the other end of a socket pair.
func pacedRunner(t *testing.T) (*Runner, <-chan time.Time) {
	r, events := pacedRunnerEvents(t, 0)
	got := make(chan time.Time, 1<<16)
	go func() {
		for e := range events {
			got <- e.at
		}
	}()
	return r, got
}

// pacedEvent is an output event as pacedRunnerEvents reads it.
type pacedEvent struct {
	at   time.Time
	size int64
}

// pacedRunnerEvents is pacedRunner with each event's output.log size, and
// gap between events (0: sizeEventGap).
func pacedRunnerEvents(t *testing.T, gap time.Duration) (*Runner, <-chan pacedEvent) {
	a, b := net.Pipe()
	c := proto.NewConn(a)
	r := &Runner{sizeCh: make(chan struct{}, 1), pauseCh: make(chan struct{}, 1), done: make(chan struct{}),
		conns: map[*proto.Conn]struct{}{c: {}}, sizeGap: gap}
	got := make(chan pacedEvent, 1<<16)
	onOutputEvents(b, func(m *proto.Msg) { got <- pacedEvent{time.Now(), m.Size} })
	go r.sendSizes()
	t.Cleanup(func() { close(r.done); a.Close(); b.Close() })
	return r, got
}

// TestSizeEventAfterPauseAtOnce: output that comes after the job paused
// (an answer to input) is announced at once, even within sizeEventGap of
// the last event; it used to wait out the rest of the gap, the most of a
// round trip of a line through cat over attach.
func TestSizeEventAfterPauseAtOnce(t *testing.T) {
	r, got := pacedRunner(t)
	var lat []time.Duration
	last := time.Now()
	for i := 0; i < 41; i++ {
		// Each growth comes 300 µs (over sizeEventQuiet, under the
		// gap) after the last event arrived: a back and forth. (A
		// spin: a sleep this short may take a millisecond.)
		for time.Since(last) < 300*time.Microsecond {
		}
		start := time.Now()
		r.grew(10)
		last = <-got
		if i > 0 {
			lat = append(lat, last.Sub(start))
		}
	}
	slices.Sort(lat)
	// The old pacing waited 700 µs here; at once is the socket's and the
	// scheduler's time.
	if p50 := lat[len(lat)/2]; p50 > 400*time.Microsecond {
		t.Fatalf("event after a pause: p50 %v after the growth, want it at once (the gap's rest would be about %v)", p50, sizeEventGap-300*time.Microsecond)
	}
}

// TestSizeEventAfterPauseWhileAGapIsWaited: growth after a pause is
// announced at once even while the sender waits out a gap, whether for
// growth that came without a pause or for growth an event already
// carried. A pty job's answer grows two sizes, one right after the other
// (the raw bytes, then output.log), and the sender used to wait out a gap
// for the second even when the first event carried both; the next line's
// answer, in a round trip through cat over attach, waited out the rest of
// it (about 0.7 ms of the round trip's p50 of 1 ms). The gap here is long
// (50 ms), so the test tells the pacing from the scheduler's wake-ups.
func TestSizeEventAfterPauseWhileAGapIsWaited(t *testing.T) {
	const gap = 50 * time.Millisecond
	r, events := pacedRunnerEvents(t, gap)
	until := func(size int64) time.Time {
		for e := range events {
			if e.size >= size {
				return e.at
			}
		}
		return time.Time{}
	}
	// noPause grows output.log as if right after the last growth, however
	// late this goroutine runs.
	noPause := func() {
		r.size.Add(10)
		r.sizeChanged(r.lastGrowth.Load() + 1)
	}
	for _, tc := range []struct {
		name string
		grow func()
	}{
		{"growth without a pause is waiting", func() {
			r.grew(10) // after a pause: at once
			until(r.size.Load())
			noPause() // waits for the gap
		}},
		{"a wake-up for growth already announced", func() {
			r.rawSize.Add(10)
			r.sizeChanged(0) // the raw bytes, after a pause
			noPause()        // then output.log
			until(r.size.Load())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 5; i++ {
				time.Sleep(2 * gap) // no gap left
				tc.grow()
				// The sender has taken its wake-up: from there it waits
				// out a gap, if it waits, with nothing to wait for first.
				for len(r.sizeCh) > 0 {
					runtime.Gosched()
				}
				// The pause itself: no growth for longer than the quiet.
				time.Sleep(2 * sizeEventQuiet)
				start := time.Now()
				r.grew(10) // after a pause
				if d := until(r.size.Load()).Sub(start); d > gap/3 {
					t.Fatalf("round %d: growth after a pause announced %v after it, want at once (the gap is %v)", i, d, gap)
				}
			}
		})
	}
}

// TestSizeEventsOfAFloodCoalesced: a job printing without pause still
// costs at most about one event per sizeEventGap.
func TestSizeEventsOfAFloodCoalesced(t *testing.T) {
	r, got := pacedRunner(t)
	const span = 100 * time.Millisecond
	end := time.Now().Add(span)
	// A write after sizeEventQuiet of silence goes out at once (the pause
	// rule): a slow machine, or the race detector, stretches some of the
	// sleeps that long, and each such pause may cost one event more.
	pauses := 0
	last := time.Now()
	for now := last; now.Before(end); now = time.Now() {
		if now.Sub(last) >= sizeEventQuiet {
			pauses++
		}
		last = now
		r.grew(100)
		time.Sleep(5 * time.Microsecond)
	}
	time.Sleep(5 * sizeEventGap)
	if n, most := len(got), int(span/sizeEventGap)+5+pauses; n > most {
		t.Fatalf("%d events for %v of output (%d pauses of %v or more), want at most %d (one per %v, and one per pause)", n, span, pauses, sizeEventQuiet, most, sizeEventGap)
	}
}

// onOutputEvents calls each with every output event read from conn, the
// runner's end of which is a test's; it stops when conn closes.
func onOutputEvents(conn net.Conn, each func(*proto.Msg)) {
	go func() {
		pc := proto.NewConn(conn)
		for {
			m, err := pc.Recv()
			if err != nil {
				return
			}
			if m.T == proto.TOutput {
				each(m)
			}
		}
	}()
}
