package runner

import (
	"testing"
	"time"
)

// iwSim runs an iwSchedule on a clock of its own, as loop does: the
// program's events at given times, the checks when the timer fires.
type iwSim struct {
	s       iwSchedule
	now     time.Time
	armed   bool
	armedAt time.Time
	looks   int
}

// until runs the checks due before end; waiting says what a check at a
// time finds (and the inputs written then). With stop, it stops at the
// first check that finds the job waiting and returns when that was (zero:
// none).
func (m *iwSim) until(end time.Time, stop bool, waiting func(time.Time) (bool, int64)) time.Time {
	for m.armed && !m.armedAt.After(end) {
		m.now = m.armedAt
		m.armed = false
		m.looks++
		w, seq := waiting(m.now)
		if d, ok := m.s.looked(m.now, w, seq); ok {
			m.armed, m.armedAt = true, m.now.Add(d)
		}
		if w && stop {
			return m.now
		}
	}
	m.now = end
	return time.Time{}
}

func (m *iwSim) event(at time.Time, waiting func(time.Time) (bool, int64)) {
	m.until(at, false, waiting)
	due := m.s.event()
	if due.Before(at) {
		due = at
	}
	if !m.armed || m.armedAt.After(due) {
		m.armed, m.armedAt = true, due
	}
}

// TestInputWaitScheduleAnswersEachInput: a program driven input by input
// (it echoes the input, prints a line and its prompt, and reads) is seen
// waiting within a few ms of blocking in its read every time, not up to
// the back-off's 16 ms after the check before (as when each check that
// followed events doubled the gap, whichever input they came from).
func TestInputWaitScheduleAnswersEachInput(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	m := &iwSim{now: time.Unix(1000, 0)}
	var blockAt time.Time // the program blocks in its read
	var seq int64         // the inputs written
	waiting := func(at time.Time) (bool, int64) { return !at.Before(blockAt), seq }
	// The start: the program prints its first prompt and reads.
	start := m.now
	m.event(start, waiting)
	m.event(start.Add(ms(2)), waiting)
	blockAt = start.Add(ms(2.1))
	answered := m.until(start.Add(time.Second), true, waiting)
	if answered.IsZero() {
		t.Fatal("the first prompt was never seen")
	}
	var worst time.Duration
	for i := range 50 {
		// The client sends the next input 0.3 ms after its answer.
		in := answered.Add(ms(0.3))
		seq++
		blockAt = in.Add(time.Hour) // busy until it blocks again
		m.event(in, waiting)        // the input written
		m.event(in.Add(ms(0.2)), waiting)
		m.event(in.Add(ms(0.5)), waiting) // the stamp and the prompt
		blockAt = in.Add(ms(0.6 + float64(i%3)))
		answered = m.until(in.Add(time.Second), true, waiting)
		if answered.IsZero() {
			t.Fatalf("input %d: never seen waiting", i)
		}
		worst = max(worst, answered.Sub(blockAt))
	}
	if worst > ms(3) {
		t.Fatalf("a program driven input by input was seen waiting up to %v after it blocked, want within 3 ms", worst)
	}
}

// TestInputWaitScheduleBoundedWhenBusy: a program that prints all the
// time is looked at at most once per inputWaitMaxGap (and the series at
// the start), whether it never waits or sleeps in a timed read of the
// terminal between its lines; an input adds the quick checks and the
// back-off's ramp (1, 2, 4, 8 ms) at most.
func TestInputWaitScheduleBoundedWhenBusy(t *testing.T) {
	for _, c := range []struct {
		name    string
		waits   bool
		inputMS int // an input every this many ms (0: none)
		most    int
	}{
		{"never waits", false, 0, 2000/16 + 12},
		{"waits between its lines", true, 0, 2000/16 + 12},
		{"waits between its lines, an input every 100 ms", true, 100, 2000/16 + 12 + 20*(inputWaitQuick+5)},
	} {
		m := &iwSim{now: time.Unix(1000, 0)}
		start := m.now
		var seq int64
		waiting := func(time.Time) (bool, int64) { return c.waits, seq }
		for us := 0; us < 2_000_000; us += 500 {
			at := start.Add(time.Duration(us) * time.Microsecond)
			if c.inputMS > 0 && us%(c.inputMS*1000) == 0 {
				seq++
			}
			m.event(at, waiting)
		}
		m.until(start.Add(2*time.Second), false, waiting)
		if m.looks > c.most {
			t.Errorf("%s: %d looks in 2 s of continuous output, want at most %d", c.name, m.looks, c.most)
		}
		t.Logf("%s: %d looks in 2 s", c.name, m.looks)
	}
}
