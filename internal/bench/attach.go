package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/creack/pty"

	"github.com/shellctl/shellctl/internal/client"
)

// benchAttach measures the attach WebSocket (GET /v1/jobs/{id}/attach)
// with `cat` in a pty job whose terminal is raw (`stty raw -echo`: the
// bytes go through untouched, none echoed): the round trip of one line
// (sent as a binary message, read back from the raw terminal) against
// the same line through a bare pipe to a local `cat`, and the throughput
// of bytes sent and read back at once against the same through a bare
// raw pty to a local `cat` (a terminal carries less than a pipe: the
// line discipline's buffers are 4 KiB). And the throughput of a stdio
// job's `cat` on a stdin pipe over attach against bare pipes.
func benchAttach(ctx context.Context, e *Env, s Sizes) []*Row {
	rt := &Row{Figure: "attach round trip, one line through cat (pty)", Unit: Millis, Target: Target{DiffAtMost, 1}}
	tp := &Row{Figure: fmt.Sprintf("attach throughput, %d MiB through cat (pty)", s.PTYMiB), Unit: MBps, Target: Target{RatioAtLeast, 0.7}}
	tpp := &Row{Figure: fmt.Sprintf("attach throughput, %d MiB through cat (stdio pipe)", s.StdioMiB), Unit: MBps, Target: Target{RatioAtLeast, 0.7}}
	rows := []*Row{rt, tp, tpp}
	benchAttachPipe(ctx, e, s, tpp)
	a, stop, err := attachCat(ctx, e, "pty")
	if err != nil {
		rt.Err, tp.Err = err.Error(), err.Error()
		return rows
	}
	defer stop()
	floor, err := startPipeCat()
	if err != nil {
		rt.FloorErr = err.Error()
	} else {
		defer floor.close()
	}
	ptyFloor, err := startPTYCat()
	if err != nil {
		tp.FloorErr = err.Error()
	} else {
		defer ptyFloor.close()
	}
	var rts, fls []float64
	for i := 0; i < s.Runs; i++ {
		line := []byte(fmt.Sprintf("%s %06d\n", line99[:80], i))
		d, err := a.roundTrip(ctx, line)
		if err != nil {
			rt.Err = err.Error()
			break
		}
		rts = append(rts, ms(d))
		if floor != nil {
			if d, err := floor.roundTrip(line); err == nil {
				fls = append(fls, ms(d))
			} else {
				rt.FloorErr = err.Error()
			}
		}
	}
	rt.Runtime, rt.Floor = Summarize(rts), Summarize(fls)
	rt.Notes = append(rt.Notes, fmt.Sprintf("%d lines of 88 bytes, each sent over one attach WebSocket to `stty raw -echo; exec cat` in a pty job and read back from its raw terminal, vs the same through a bare pipe to a local `cat`", len(rts)))

	n := s.PTYMiB << 20
	var tps, tfl []float64
	for r := 0; r < s.Reps && tp.Err == ""; r++ {
		d, err := a.through(ctx, n)
		if err != nil {
			tp.Err = err.Error()
			break
		}
		tps = append(tps, mbps(n, d))
		if ptyFloor != nil {
			if d, err := ptyFloor.through(n); err == nil {
				tfl = append(tfl, mbps(n, d))
			} else {
				tp.FloorErr = err.Error()
			}
		}
	}
	tp.Runtime, tp.Floor = Summarize(tps), Summarize(tfl)
	tp.Notes = append(tp.Notes, fmt.Sprintf("%d × %d MiB of text sent in 64 KiB binary messages to the same job while read back from its raw terminal, vs the same through a bare raw pty (`stty raw -echo; exec cat`)", len(tps), s.PTYMiB))
	if tp.Err == "" {
		tp.Notes = append(tp.Notes, wsPumpNote(ctx, "pty", n, tp.Floor))
	}
	return rows
}

// benchAttachPipe measures a stdio job's `exec cat` on a stdin pipe over
// attach (its stdout is output.log, read from the end) against bare pipes.
func benchAttachPipe(ctx context.Context, e *Env, s Sizes, row *Row) {
	a, stop, err := attachCat(ctx, e, "stdio")
	if err != nil {
		row.Err = err.Error()
		return
	}
	defer stop()
	floor, err := startPipeCat()
	if err != nil {
		row.FloorErr = err.Error()
	} else {
		defer floor.close()
	}
	n := s.StdioMiB << 20
	var rt, fl []float64
	for r := 0; r < s.Reps; r++ {
		d, err := a.through(ctx, n)
		if err != nil {
			row.Err = err.Error()
			return
		}
		rt = append(rt, mbps(n, d))
		if floor != nil {
			if d, err := floor.through(n); err == nil {
				fl = append(fl, mbps(n, d))
			} else {
				row.FloorErr = err.Error()
			}
		}
	}
	row.Runtime, row.Floor = Summarize(rt), Summarize(fl)
	row.Notes = append(row.Notes, fmt.Sprintf("%d × %d MiB of text sent in 64 KiB binary messages to a stdio job `exec cat` run with \"stdin\":\"pipe\", read back over the same WebSocket (its stdout, output.log), vs the same through bare pipes to a local `cat`", len(rt), s.StdioMiB),
		wsEchoNote(ctx, n, row.Floor), wsPumpNote(ctx, "stdio", n, row.Floor))
}

// attachedCat is one attach to a raw-terminal cat job.
type attachedCat struct {
	conn *client.AttachConn
	got  []byte // read past what was asked for so far
}

func attachCat(ctx context.Context, e *Env, mode string) (*attachedCat, func(), error) {
	req := client.RunRequest{Script: "stty raw -echo; echo ready; exec cat", Mode: "pty", Timeout: 5}
	if mode == "stdio" {
		req = client.RunRequest{Script: "echo ready; exec cat", Mode: "stdio", Stdin: "pipe", Timeout: 5}
	}
	res, err := e.Client.Run(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	id := res.JobID
	stop := func() { _ = e.Client.Delete(context.Background(), id, true, 1) }
	if !strings.Contains(res.Output, "ready") {
		stop()
		return nil, nil, fmt.Errorf("the cat job did not start: %q", res.Output)
	}
	c := &client.Client{BaseURL: e.Client.BaseURL, Token: e.Client.Token, HTTP: e.HTTP}
	conn, err := c.Attach(ctx, id, client.AttachOptions{})
	if err != nil {
		stop()
		return nil, nil, err
	}
	a := &attachedCat{conn: conn}
	// The redraw, and its message, are not cat's (a stdio job's output
	// starts at the end of output.log: no redraw).
	for redraw := mode == "stdio"; !redraw; {
		m, err := conn.Next(ctx)
		if err != nil {
			stop()
			return nil, nil, err
		}
		if m.Control != nil && m.Control.Type == "redraw" {
			if _, err := conn.Next(ctx); err != nil {
				stop()
				return nil, nil, err
			}
			redraw = true
		}
	}
	return a, func() { conn.CloseNow(); stop() }, nil
}

// roundTrip sends line and reads until it came back.
func (a *attachedCat) roundTrip(ctx context.Context, line []byte) (time.Duration, error) {
	start := time.Now()
	if err := a.conn.Input(ctx, line); err != nil {
		return 0, err
	}
	for !bytes.Contains(a.got, line) {
		m, err := a.conn.Next(ctx)
		if err != nil {
			return 0, err
		}
		a.got = append(a.got, m.Output...)
	}
	d := time.Since(start)
	a.got = a.got[:0]
	return d, nil
}

// attachWindow bounds the bytes in flight (sent, not yet read back): a
// client more than the raw ring (1 MiB) behind the terminal gets a redraw
// instead of the bytes it missed, as a terminal reconnecting to tmux does.
const attachWindow = 512 << 10

// through sends n bytes while reading them back, at most attachWindow
// ahead.
func (a *attachedCat) through(ctx context.Context, n int64) (time.Duration, error) {
	// Lines ending CR LF: the raw terminal does not add the CR, and a
	// screen of bare LFs (a staircase) is slow work for the job's screen
	// emulator, which a terminal flood is held to.
	chunk := []byte(strings.Repeat(line99[:98]+"\r\n", 64<<10/100))
	start := time.Now()
	sent := make(chan error, 1)
	credit := make(chan int64, 1024)
	go func() {
		sent <- sendWindowed(ctx, n, chunk, credit, func(b []byte) error { return a.conn.Input(ctx, b) })
	}()
	var got int64
	for got < n {
		m, err := a.conn.Next(ctx)
		if err != nil {
			return 0, err
		}
		if m.Control != nil && m.Control.Type == "redraw" {
			return 0, fmt.Errorf("the client fell behind the raw ring after %d of %d bytes", got, n)
		}
		got += int64(len(m.Output))
		select {
		case credit <- int64(len(m.Output)):
		default:
		}
	}
	if err := <-sent; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// sendWindowed writes n bytes, chunk by chunk, with at most attachWindow
// of them not yet credited back (read back by the other side).
func sendWindowed(ctx context.Context, n int64, chunk []byte, credit <-chan int64, write func([]byte) error) error {
	var room int64 = attachWindow
	for left := n; left > 0; {
		k := min(left, int64(len(chunk)))
		for room < k {
			select {
			case c := <-credit:
				room += c
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := write(chunk[:k]); err != nil {
			return err
		}
		room -= k
		left -= k
	}
	return nil
}

// pipeCat is the floor: a local cat on two pipes, or on a raw pty
// (startPTYCat: in and out are its master).
type pipeCat struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.Reader
	buf []byte
}

// startPTYCat starts `stty raw -echo; exec cat` in a bare pty, as the
// attach bench's job runs.
func startPTYCat() (*pipeCat, error) {
	cmd := exec.Command("bash", "-c", "stty raw -echo; echo ready; exec cat")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		return nil, err
	}
	p := &pipeCat{cmd: cmd, in: f, out: f, buf: make([]byte, 64<<10)}
	var got []byte
	for !bytes.Contains(got, []byte("ready")) {
		k, err := f.Read(p.buf)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("the floor's pty cat did not start: %v (%q)", err, got)
		}
		got = append(got, p.buf[:k]...)
	}
	return p, nil
}

func startPipeCat() (*pipeCat, error) {
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &pipeCat{cmd: cmd, in: in, out: out, buf: make([]byte, 64<<10)}, nil
}

func (p *pipeCat) roundTrip(line []byte) (time.Duration, error) {
	start := time.Now()
	if _, err := p.in.Write(line); err != nil {
		return 0, err
	}
	var got []byte
	for !bytes.Contains(got, line) {
		k, err := p.out.Read(p.buf)
		if err != nil {
			return 0, err
		}
		got = append(got, p.buf[:k]...)
	}
	return time.Since(start), nil
}

func (p *pipeCat) through(n int64) (time.Duration, error) {
	chunk := []byte(strings.Repeat(line99[:98]+"\r\n", 64<<10/100))
	start := time.Now()
	sent := make(chan error, 1)
	go func() {
		for left := n; left > 0; {
			k := min(left, int64(len(chunk)))
			if _, err := p.in.Write(chunk[:k]); err != nil {
				sent <- err
				return
			}
			left -= k
		}
		sent <- nil
	}()
	var got int64
	for got < n {
		k, err := p.out.Read(p.buf)
		if err != nil {
			return 0, err
		}
		got += int64(k)
	}
	if err := <-sent; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// close ends cat: the end of its input (a pty's master closed: hung up).
func (p *pipeCat) close() {
	p.in.Close()
	_ = p.cmd.Wait()
}
