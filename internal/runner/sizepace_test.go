package runner

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// pacedRunner is a runner with only what sendSizes needs, its events
// read (with when they arrived) from the other end of a socket pair.
func pacedRunner(t *testing.T) (*Runner, <-chan time.Time) {
	a, b := net.Pipe()
	c := proto.NewConn(a)
	r := &Runner{sizeCh: make(chan struct{}, 1), done: make(chan struct{}),
		conns: map[*proto.Conn]struct{}{c: {}}}
	got := make(chan time.Time, 1<<16)
	onOutputEvents(b, func(*proto.Msg) { got <- time.Now() })
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
