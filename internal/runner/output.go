package runner

// Output: output.log written, counted and announced (coalesced size
// events), bounded by --max-output-bytes, and never blocking the job when
// the disk refuses it.

import (
	"os"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// sizeEventGap is the least time between two "output grew" events while
// output streams: a flood costs at most one event per gap instead of one
// per write (which for a job printing hundreds of MB/s would make the
// events, not the output, the work). A millisecond is far below anything
// a waiter can tell.
//
// Output that follows a pause of at least sizeEventQuiet (no growth of
// any of the sizes for that long) is announced at once, gap or not: an answer to input (a line back
// from cat, a shell's prompt, a keystroke's echo) comes after the program
// waited for that input, and a client going back and forth with the job
// faster than the gap would otherwise wait out the rest of the gap on
// every exchange. A job that prints without pause grows again at once
// after each event, so it is still coalesced to one event per gap; at
// worst (output in bursts spaced just over sizeEventQuiet) the events are
// one per sizeEventQuiet.
const (
	sizeEventGap   = time.Millisecond
	sizeEventQuiet = sizeEventGap / 4
)

// sendSizes publishes output growth, coalesced: never a queue that grows
// with the output.
func (r *Runner) sendSizes() {
	gap := r.sizeGap
	if gap == 0 {
		gap = sizeEventGap
	}
	var last, lastErr, lastRaw int64 = -1, -1, -1
	var lastSent time.Time
	for {
		select {
		case <-r.sizeCh:
		case <-r.done:
			return
		}
		// A wake-up for growth the last event already carried waits for
		// nothing: a pty job's read grows the raw size, then output.log's,
		// and one event may carry both. (It used to wait out a gap, and
		// an answer to the next input waited out its rest.)
		if r.size.Load() == last && r.errSize.Load() == lastErr && r.rawSize.Load() == lastRaw {
			continue
		}
		// Taken before the sizes are read: growth after a pause that
		// this event misses leaves another.
		paused := false
		select {
		case <-r.pauseCh:
			paused = true
		default:
		}
		if wait := gap - time.Since(lastSent); wait > 0 && !paused {
			if !r.waitGap(wait) {
				return
			}
		}
		// (Sizes only grow: they still differ from the last event's.)
		now := time.Now()
		n, e, raw := r.size.Load(), r.errSize.Load(), r.rawSize.Load()
		// An attached client's raw bytes ride along when few (raw.go).
		var inline []byte
		if lastRaw >= 0 && raw > lastRaw && raw-lastRaw <= rawInlineMax && r.rawInlining(now) {
			inline = r.rawBetween(lastRaw, raw)
		}
		last, lastErr, lastRaw = n, e, raw
		lastSent = now
		r.broadcast(&proto.Msg{T: proto.TOutput, Size: n, ErrSize: e, RawSize: raw, Data: inline})
		r.iw.event() // input-wait: a prompt may have been printed
	}
}

// waitGap waits out the rest of a gap between events, or less: growth
// after a pause while it waits ends it, and goes out at once (the pause
// rule holds whenever the growth comes). It wakes only for that (pauseCh),
// not for each growth of a flood (sizeCh). False: the runner is done.
func (r *Runner) waitGap(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-r.pauseCh:
			return true
		case <-r.done:
			return false
		}
	}
}

// outWriter writes output.log, counts it and enforces --max-output-bytes.
// Only one goroutine writes at a time (the pump of the job's output).
type outWriter struct {
	r *Runner
	// screen takes the terminal's raw reads (pty jobs with a screen).
	screen *screenFeed
	f      *os.File
	max    int64
	hit    bool
}

func (w *outWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.max > 0 {
		room := w.max - w.r.size.Load()
		if int64(len(p)) > room {
			if room < 0 {
				room = 0
			}
			p = p[:room]
			if !w.hit {
				w.hit = true
				go w.r.terminate(ReasonMaxOutput, limitGrace)
			}
		}
	}
	if len(p) > 0 && w.r.outputFailed() == nil {
		// The runner is output.log's only writer and size is where it
		// ends: positioned writes let splice (which refuses append-mode
		// files) share the file with Write.
		m, err := w.f.WriteAt(p, w.r.size.Load())
		if m > 0 {
			w.r.grew(int64(m))
		}
		if err != nil {
			// A full disk or an I/O error: what made it to disk stays,
			// the rest is read and dropped so the job is not blocked on
			// its terminal or pipe, and its end records why.
			w.r.failOutput(err)
		}
	}
	// Bytes past the limit are consumed and dropped, so the job's writes do
	// not block while the ladder ends it.
	return n, nil
}

// failOutput records the first error writing the job's output.
func (r *Runner) failOutput(err error) {
	r.mu.Lock()
	if r.outErr == nil {
		r.outErr = err
		r.log.Error("output cannot be written: the rest is dropped", "err", err, "on_disk", r.size.Load())
	}
	r.mu.Unlock()
}

// outputFailed is the error that stopped output being written, if any.
func (r *Runner) outputFailed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outErr
}

func (r *Runner) grew(n int64) {
	outputBusy(r.size.Add(n))
	now := time.Now().UnixNano()
	r.lastWrite.Store(now)
	r.sizeChanged(now)
}

// sizeChanged wakes sendSizes, noting whether this growth came after the
// output had been quiet for sizeEventQuiet (now: the time, when the
// caller has it; 0: take it).
func (r *Runner) sizeChanged(now int64) {
	if now == 0 {
		now = time.Now().UnixNano()
	}
	if prev := r.lastGrowth.Swap(now); now-prev >= int64(sizeEventQuiet) {
		select {
		case r.pauseCh <- struct{}{}:
		default:
		}
	}
	select {
	case r.sizeCh <- struct{}{}:
	default:
	}
}
