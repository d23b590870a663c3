package runner

// The terminal's raw bytes for attach (GET /v1/jobs/{id}/attach, spec
// §8): output.log is sanitized (the compatible contract), so a terminal
// attached to a pty job is fed from here instead — a redraw of the screen
// from the emulator's state, then the bytes as the program wrote them.
//
// Raw offsets count every byte read from the terminal since the job
// started (the bytes the screen is fed, screen.go's put). The ring keeps
// the last rawRingSize of them, so a client that reconnects with its raw
// offset resumes without a gap; it is made by the first raw request (a
// job never attached to pays nothing but a counter), and from then on
// every read of the terminal is copied into it under the lock the screen's
// queue already takes, and announced with the size events (RawSize).
//
// When the output is drained, the ring's bytes are written to RawFile in
// the job's directory (when there is a ring): the server reads the last
// bytes there once the runner has left.

import (
	"encoding/binary"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// rawRingSize is how much raw output a reconnecting client may have
// missed and still resume from: a few screens of a full-screen program's
// redraws, or thousands of lines; past it, it gets a fresh redraw.
const rawRingSize = 1 << 20

// rawReadMax is the most one raw answer carries: base64 makes it 88 KiB in
// a control message, and the server sends it on as one WebSocket message.
const rawReadMax = 64 << 10

// Small raw growth is carried inside the size event that announces it
// (the event's Data: exactly the raw bytes from RawSize-len(Data) to
// RawSize), so the server answers an attached client's next read from
// memory instead of asking for the bytes (a second round trip per echoed
// line or prompt). Only while someone is attached: the runner inlines
// for rawInlineFor after it last served a raw request; a job nobody
// attaches to never has a ring, and one whose client left stops inlining
// once the window passes. A client whose reads are all answered from
// memory sends no raw request, so the window lapses during a long attach
// too: the next growth then goes without bytes, the server asks for
// them, and that request opens the window again (one round trip per
// window, not per line).
//
// rawInlineMax bounds what one event carries: an echoed line, a prompt,
// a keystroke's redraw, a pty read (at most 4 KiB from the line
// discipline) fit, so the exchanges that wait on the round trip lose it;
// larger growth is a flood, where one request fetches up to 64 KiB and
// its cost is spread over them, and events stay small (under 6 KiB of
// base64) so they never hold the channel up for the answers behind them.
const (
	rawInlineMax = 4 << 10
	rawInlineFor = 5 * time.Second
)

// rawInlining is whether a raw request was served within rawInlineFor of
// now.
func (r *Runner) rawInlining(now time.Time) bool {
	asked := r.rawAsked.Load()
	return asked != 0 && now.UnixNano()-asked < int64(rawInlineFor)
}

// rawBetween is a copy of the raw bytes from..to when the ring holds all
// of them (nil otherwise): to is a raw size already announced by put, so
// at most the ring's current end, and from must not have been written
// over since (checked against the current end, under the lock put takes).
func (r *Runner) rawBetween(from, to int64) []byte {
	r.mu.Lock()
	f := r.screen
	r.mu.Unlock()
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.ring
	if g == nil || from >= to || from < g.first || from < f.raw-int64(len(g.buf)) || to > f.raw {
		return nil
	}
	b, _ := g.read(from, to, int(to-from))
	return b
}

// RawFile holds the raw ring of a pty job once its output is drained
// (only when one was made): the offset of its first byte (8 bytes, little
// endian), then the bytes.
const RawFile = "raw.ring"

// ErrRawGone is the ack's error for raw bytes the ring no longer holds.
const ErrRawGone = "raw_gone"

type rawRing struct {
	buf   []byte
	first int64 // the offset of the first byte ever kept
}

// keep copies p, whose last byte is at end-1, into the ring.
func (g *rawRing) keep(p []byte, end int64) {
	if len(p) > len(g.buf) {
		p = p[len(p)-len(g.buf):]
	}
	at := int((end - int64(len(p))) % int64(len(g.buf)))
	n := copy(g.buf[at:], p)
	copy(g.buf, p[n:])
}

// read copies the bytes from off (up to end, at most max) into a new
// slice; false when the ring no longer holds off.
func (g *rawRing) read(off, end int64, max int) ([]byte, bool) {
	if off < g.first || off < end-int64(len(g.buf)) || off > end {
		return nil, false
	}
	n := int(min(end-off, int64(max)))
	out := make([]byte, n)
	at := int(off % int64(len(g.buf)))
	k := copy(out, g.buf[at:])
	copy(out[k:], g.buf)
	return out, true
}

// startRaw makes the ring, if not made yet; grew is called (under f.mu)
// with the raw size after each read of the terminal from then on.
func (f *screenFeed) startRaw(grew func(int64)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ring != nil {
		return
	}
	g := &rawRing{buf: make([]byte, rawRingSize), first: f.raw}
	// While the screen is cold it holds every byte the job wrote (a few
	// KiB at most): the ring then starts at the job's first byte, and a
	// client that started the job (run -it) attaches at raw offset 0 with
	// nothing lost and no redraw. Only when no read is between the queue
	// and the term (taken from one, not yet fed to the other). f.mu, then
	// tmu: nothing takes them the other way round.
	f.tmu.Lock()
	if t := f.term; t != nil && t.cold != nil && f.termRaw+int64(len(f.buf)) == f.raw && int64(len(t.cold.Raw())) == f.termRaw {
		all := append(append([]byte(nil), t.cold.Raw()...), f.buf...)
		g.first = 0
		g.keep(all, f.raw)
	}
	f.tmu.Unlock()
	f.ring = g
	f.rawGrew = grew
}

// rawFrom is the ring's bytes from off.
func (f *screenFeed) rawFrom(off int64) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ring == nil {
		return nil, false
	}
	return f.ring.read(off, f.raw, rawReadMax)
}

// rawRequest answers a raw request (proto.TRaw).
func (r *Runner) rawRequest(m *proto.Msg) *proto.Msg {
	ack := &proto.Msg{T: proto.TAck, ID: m.ID}
	f, why := r.screenFeed()
	if f == nil {
		ack.Err = why
		return ack
	}
	f.startRaw(r.rawGrew)
	r.rawAsked.Store(time.Now().UnixNano())
	if m.Redraw {
		ack.Data, ack.RawSize, ack.Err = r.redraw(f)
		return ack
	}
	b, ok := f.rawFrom(m.RawSize)
	if !ok {
		ack.Err = ErrRawGone
		return ack
	}
	ack.Data, ack.RawSize = b, m.RawSize
	return ack
}

// rawGrew announces raw output (the size events carry rawSize).
func (r *Runner) rawGrew(n int64) {
	r.rawSize.Store(n)
	r.sizeChanged(0)
}

// redraw is the bytes that draw the screen now, and the raw offset the
// screen stands at: once the emulator has fed what was read before the
// request (as a screen request waits), under the term's lock, so no byte
// fed is left out or counted twice.
func (r *Runner) redraw(f *screenFeed) ([]byte, int64, string) {
	now := time.Now()
	f.settle(now, 0, now.Add(screenCatchUp), f.done, nil)
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if f.term == nil {
		// Too large to emulate: the raw bytes alone, from here.
		return nil, f.termRaw, ""
	}
	b, why := f.term.Redraw()
	if why != "" {
		// No screen any more (its process failed): the terminal's bytes
		// still come, from here, as for a terminal too large to emulate.
		r.log.Warn("attach without a redraw", "why", why)
		return nil, f.termRaw, ""
	}
	return b, f.termRaw, ""
}

// saveRaw writes the ring to RawFile once the output is drained (the
// screen's queue is closed: nothing is put any more).
func (r *Runner) saveRaw() {
	r.mu.Lock()
	f := r.screen
	r.mu.Unlock()
	if f == nil {
		return
	}
	f.mu.Lock()
	g, end := f.ring, f.raw
	f.mu.Unlock()
	if g == nil {
		return
	}
	start := max(g.first, end-int64(len(g.buf)))
	b, _ := g.read(start, end, len(g.buf))
	out, err := r.jobDir.OpenFresh(RawFile, 0o600)
	if err != nil {
		r.log.Warn("keep the raw ring", "err", err)
		return
	}
	defer out.Close()
	hdr := binary.LittleEndian.AppendUint64(nil, uint64(start))
	if _, err := out.Write(append(hdr, b...)); err != nil {
		r.log.Warn("keep the raw ring", "err", err)
	}
}

// inputBlocking queues input for the terminal as input does, waiting for
// room in the queue (an attached client's bytes are held back, never
// dropped, while the job does not read its terminal).
func (r *Runner) inputBlocking(in termInput) (string, int64) {
	if r.spec.Mode != "pty" {
		in.release()
		return "input_unsupported", 0
	}
	seq, ok := r.iw.queueWait(r.inputCh, in, r.done)
	if !ok {
		in.release()
		return "job_not_running", 0
	}
	return "", seq
}
