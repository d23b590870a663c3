package runner

// A pty job's screen, kept in two places: cold in the runner, warm in a
// screen process.
//
// The runner follows plain output itself: first screen.Cold (printable
// text, line ends, colours, a screenful at most, a few KiB), then, while
// everything written is plain lines, screen.Lines (the last lines, enough
// for the screen and its scrollback: a build log or any flood of lines
// scrolls through without an emulator; an attach's redraw is drawn from
// them too). Once the output needs more (any other sequence, a resize), it
// starts the screen process (cmd/shellctl-screen,
// beside the runner's binary, by a handle) and feeds it the kept bytes
// (screen.Lines' seed) and everything after over a pipe
// (internal/screen/wire.go); screens are
// asked of it over the same pipe, in order with the bytes. So the
// emulator, its dependencies and their initialisation are in no runner:
// a runner's binary is a third smaller, and so is the memory of every
// running job, and a job that never needs an emulator never starts one.
//
// The process is the runner's child, in its own session, outside the job:
// not in the job's cgroup, exempted from the subreaper tracker, never in
// the job's Landlock domain. It exits at end of file on its stdin (when
// the runner closes it, or dies). Each write to it and each answer is
// bounded by screenProcTimeout: a screen process that stops (stopped,
// stuck) is killed and the screen is unavailable from then on; the job
// and its output go on, and the runner never waits on it past the bound.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/shellctl/shellctl/internal/jsonstr"
	"github.com/shellctl/shellctl/internal/screen"
)

// ScreenBinary is the screen process's binary, beside the runner's.
const ScreenBinary = "shellctl-screen"

// screenProcTimeout bounds one write to the screen process and one
// answer from it.
var screenProcTimeout = 5 * time.Second

// screenUnavailable starts the error of a screen request when the screen
// process could not be started or failed.
const screenUnavailable = "screen_unavailable: "

// screenConn is a started screen process.
type screenConn struct {
	proc *os.Process
	in   *os.File // frames to it
	out  *os.File // its answers
	rbuf []byte
}

// screenStarter starts a screen process for a cols × rows terminal, its
// start frame sent.
type screenStarter func(cols, rows int) (*screenConn, error)

// liveTerm is the screen of one terminal: cold, then lines, then warm in a
// screen process (lines may be skipped). Its owner (screenFeed)
// serializes every call.
type liveTerm struct {
	cols, rows int
	cold       *screen.Cold  // nil once past cold
	lines      *screen.Lines // while past cold and still plain lines
	conn       *screenConn   // the screen process, once warm
	broken     string        // why there is no screen any more
	start      screenStarter
	wbuf       []byte
}

func newLiveTerm(cols, rows int, start screenStarter) *liveTerm {
	return &liveTerm{cols: cols, rows: rows, cold: &screen.Cold{}, start: start}
}

// Emulating reports whether the screen went warm (its process started,
// or failed to).
func (t *liveTerm) Emulating() bool { return t.cold == nil && t.lines == nil }

// warm starts the screen process and feeds it what was kept cold, or the
// seed of the lines kept.
func (t *liveTerm) warm() {
	var raw []byte
	switch {
	case t.cold != nil:
		raw = t.cold.Raw()
	case t.lines != nil:
		raw = t.lines.Seed()
	default:
		return
	}
	t.cold, t.lines = nil, nil
	c, err := t.start(t.cols, t.rows)
	if err != nil {
		t.broken = "no screen process: " + err.Error()
		return
	}
	t.conn = c
	t.send(screen.FrameWrite, raw)
}

// send writes one frame to the screen process.
func (t *liveTerm) send(k byte, p []byte) {
	if t.conn == nil {
		return
	}
	t.wbuf = screen.AppendFrame(t.wbuf[:0], k, p)
	t.write(t.wbuf)
}

func (t *liveTerm) write(b []byte) {
	c := t.conn
	_ = c.in.SetWriteDeadline(time.Now().Add(screenProcTimeout))
	if _, err := c.in.Write(b); err != nil {
		t.fail(err)
	}
}

// fail ends the screen process after err: the reason it gave, if it
// answered one, says why.
func (t *liveTerm) fail(err error) {
	c := t.conn
	t.conn = nil
	why := err.Error()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		why = fmt.Sprintf("the screen process made no progress for %v and was killed", screenProcTimeout)
	} else {
		// A process that refused (another build, a broken frame) said why
		// before it exited.
		_ = c.out.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if k, p, _, rerr := screen.ReadFrame(c.out, nil, screen.MaxAnswer); rerr == nil && k == screen.FrameError {
			why = "the screen process failed: " + string(p)
		} else {
			why = "the screen process failed: " + why
		}
	}
	t.broken = why
	c.close()
}

// Write feeds bytes the program wrote.
func (t *liveTerm) Write(p []byte) {
	if t.cold != nil {
		if t.cold.Write(p, t.cols, t.rows) {
			return
		}
		// Past cold: plain lines so far (and in p) go on without an
		// emulator.
		if l := screen.NewLines(t.cols, t.rows); l.Write(t.cold.Raw()) && l.Write(p) {
			t.cold, t.lines = nil, l
			return
		}
		t.warm()
	}
	if t.lines != nil {
		if t.lines.Write(p) {
			return
		}
		t.warm()
	}
	t.send(screen.FrameWrite, p)
}

// Resize changes the terminal's size (screen.Fits must hold).
func (t *liveTerm) Resize(cols, rows int) {
	t.warm()
	t.cols, t.rows = cols, rows
	if t.conn != nil {
		t.wbuf = screen.AppendInts(t.wbuf[:0], screen.FrameResize, cols, rows)
		t.write(t.wbuf)
	}
}

// ask sends a request and reads its answer of kind k.
func (t *liveTerm) ask(req []byte, k byte) ([]byte, bool) {
	t.write(req)
	c := t.conn
	if c == nil {
		return nil, false
	}
	_ = c.out.SetReadDeadline(time.Now().Add(screenProcTimeout))
	ak, p, buf, err := screen.ReadFrame(c.out, c.rbuf, screen.MaxAnswer)
	c.rbuf = buf
	switch {
	case err != nil:
		t.fail(err)
		return nil, false
	case ak == screen.FrameError:
		t.conn = nil
		t.broken = "the screen process failed: " + string(p)
		c.close()
		return nil, false
	case ak != k:
		t.fail(fmt.Errorf("answered a frame %q to a request for %q", ak, k))
		return nil, false
	}
	return p, true
}

// Snapshot is the screen now as JSON, or why there is none.
func (t *liveTerm) Snapshot(scrollback int) ([]byte, string) {
	if t.cold != nil {
		return appendSnapshot(nil, t.cold.Snapshot(t.cols, t.rows, scrollback)), ""
	}
	if t.lines != nil {
		if s, ok := t.lines.Snapshot(scrollback); ok {
			return appendSnapshot(nil, s), ""
		}
		t.warm()
	}
	if t.conn != nil {
		t.wbuf = screen.AppendInts(t.wbuf[:0], screen.FrameSnapshot, max(0, scrollback))
		if p, ok := t.ask(t.wbuf, screen.FrameSnapshot); ok {
			// It goes into a control message as it is: one compact JSON
			// value, or the screen process is not the one this runner
			// speaks to.
			if r := jsonstr.NewReader(p); !r.Skip() || !r.End() || bytes.IndexByte(p, '\n') >= 0 {
				t.fail(fmt.Errorf("answered a screen (%d bytes) that is not one compact JSON value", len(p)))
			} else {
				return append([]byte(nil), p...), ""
			}
		}
	}
	return nil, screenUnavailable + t.broken
}

// Redraw is the bytes that redraw the screen now (attach), or why there
// are none.
func (t *liveTerm) Redraw() ([]byte, string) {
	if t.cold != nil {
		// The cold bytes drew the screen from a blank one: the screen
		// process's own redraw of a cold screen is the same.
		return append([]byte(screen.RedrawReset), t.cold.Raw()...), ""
	}
	if t.lines != nil {
		return t.lines.Redraw(), ""
	}
	if t.conn != nil {
		t.wbuf = screen.AppendFrame(t.wbuf[:0], screen.FrameRedraw, nil)
		if p, ok := t.ask(t.wbuf, screen.FrameRedraw); ok {
			return append([]byte(nil), p...), ""
		}
	}
	return nil, screenUnavailable + t.broken
}

// Broken is why the screen is unavailable ("" while it works).
func (t *liveTerm) Broken() string { return t.broken }

// AppCursor reports whether the program asked for application cursor
// keys (false while cold or lines: nothing in plain output sets it).
func (t *liveTerm) AppCursor() bool {
	if t.conn == nil {
		return false
	}
	t.wbuf = screen.AppendFrame(t.wbuf[:0], screen.FrameCursor, nil)
	p, ok := t.ask(t.wbuf, screen.FrameCursor)
	return ok && len(p) == 1 && p[0] == 1
}

// Close ends the screen process (it exits at end of file; the runner's
// reaper collects it).
func (t *liveTerm) Close() {
	if t.conn != nil {
		t.conn.close()
		t.conn = nil
		t.broken = "the job's runner ended its screen process (it is leaving)"
	}
}

func (c *screenConn) close() {
	c.in.Close()
	c.out.Close()
	if c.proc == nil {
		return // a test's screen, served in the test's process
	}
	// Killed as well: a process that does not read its stdin (stopped)
	// would not see the end of file. By its pidfd: a pid the reaper
	// already collected is not signalled.
	_ = c.proc.Signal(syscall.SIGKILL)
	_ = c.proc.Release()
}

// startScreenProc starts the screen process of this runner's job.
func (r *Runner) startScreenProc(cols, rows int) (*screenConn, error) {
	exe, err := openBeside(ScreenBinary)
	if err != nil {
		return nil, err
	}
	defer exe.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the screen process's pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("make the screen process's pipe: %w", err)
	}
	proc, err := os.StartProcess(fdPath(exe), []string{ScreenBinary, screen.ProcessArg}, &os.ProcAttr{
		// One P: it does one thing at a time.
		Env:   []string{"GOMAXPROCS=1"},
		Files: []*os.File{inR, outW, os.Stderr},
		// Its own session: no controlling terminal, no signal of the
		// job's terminal or group reaches it.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", exe.Name(), err)
	}
	c := &screenConn{proc: proc, in: inW, out: outR}
	r.rmu.Lock()
	tr := r.tracker
	r.rmu.Unlock()
	if tr == nil {
		err = errors.New("the job's process tracker is not made yet")
	} else {
		err = tr.Exempt(proc.Pid)
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("start %s: %w", exe.Name(), err)
	}
	_ = inW.SetWriteDeadline(time.Now().Add(screenProcTimeout))
	if _, err := inW.Write(screen.AppendInts(nil, screen.FrameStart, screen.Protocol, cols, rows)); err != nil {
		c.close()
		return nil, fmt.Errorf("start %s: %w", exe.Name(), err)
	}
	return c, nil
}

// appendSnapshot writes s as encoding/json writes a screen.Snapshot (the
// runner links no encoding/json; TestAppendSnapshotIsEncodingJSON).
func appendSnapshot(b []byte, s screen.Snapshot) []byte {
	b = append(b, `{"cols":`...)
	b = strconv.AppendInt(b, int64(s.Cols), 10)
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, int64(s.Rows), 10)
	b = append(b, `,"cursor":{"row":`...)
	b = strconv.AppendInt(b, int64(s.Cursor.Row), 10)
	b = append(b, `,"col":`...)
	b = strconv.AppendInt(b, int64(s.Cursor.Col), 10)
	b = append(b, `,"visible":`...)
	b = strconv.AppendBool(b, s.Cursor.Visible)
	b = append(b, `},"alt_screen":`...)
	b = strconv.AppendBool(b, s.AltScreen)
	b = append(b, `,"title":`...)
	b = jsonstr.Append(b, s.Title)
	b = append(b, `,"lines":`...)
	b = jsonstr.AppendStrings(b, s.Lines)
	if s.Scrollback != nil {
		b = append(b, `,"scrollback":`...)
		b = jsonstr.AppendStrings(b, *s.Scrollback)
	}
	return append(b, '}')
}
