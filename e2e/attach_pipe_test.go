package e2e

// GET /v1/jobs/{id}/attach to a stdio job run with "stdin":"pipe"
// (spec/extended-api.md §8): binary messages go to the job's stdin pipe,
// the job's stdout (output.log) comes back from offset, {"type":"eof"}
// closes the pipe. A real server, runner and job.

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// runPiped starts script as a stdio job with a stdin pipe and waits until
// its output holds ready.
func runPiped(t *testing.T, s *server, script, ready string) string {
	t.Helper()
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Mode: "stdio", Stdin: "pipe", Timeout: 5})
	if err != nil || !strings.Contains(res.Output, ready) || res.Status != "running" {
		t.Fatalf("run %q: %+v %v, want it running with %q in its output", script, res, err, ready)
	}
	return res.JobID
}

// noErrors fails the test on any error message the server sent.
func (a *attached) noErrors() {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.ctl {
		if c.Type == "error" {
			a.t.Errorf("the server answered an error on the socket: %+v", c)
		}
	}
}

// TestAttachPipeCatBytes: bytes 0–255 (twice, in three messages) through
// `cat` in a stdio job with a stdin pipe come back byte-exact over the
// socket; the output starts at the current end by default (what the job
// printed before the attach is not sent) and at offset when asked, to two
// clients at once; eof ends cat, and the exit message (exit 0, the
// output's end offset) and a normal close arrive on both.
func TestAttachPipeCatBytes(t *testing.T) {
	s := startServer(t, serverOpts{})
	id := runPiped(t, s, "echo before; exec cat", "before")
	now := attachTo(t, s, id, client.AttachOptions{})
	zero := int64(0)
	from0 := attachTo(t, s, id, client.AttachOptions{Offset: &zero})
	from0.waitFor("before\n", 0)

	var all [256]byte
	for i := range all {
		all[i] = byte(i)
	}
	// One client sends (two clients' inputs would interleave in the pipe).
	now.input(string(all[:128]))
	now.input(string(all[128:]))
	now.input(string(all[:]))
	want := append(append([]byte(nil), all[:]...), all[:]...)
	now.waitFor(string(want), 0)
	from0.waitFor(string(want), 0)
	if err := now.conn.EOF(ctx(t)); err != nil {
		t.Fatal(err)
	}
	endNow, end0 := now.ended(), from0.ended()
	if got := []byte(now.output()); !bytes.Equal(got, want) {
		t.Errorf("attached at the current end: got %d bytes %q, want exactly the 512 bytes sent %q", len(got), got, want)
	}
	if got, w := []byte(from0.output()), append([]byte("before\n"), want...); !bytes.Equal(got, w) {
		t.Errorf("attached at offset 0: got %q, want %q", got, w)
	}
	for _, e := range []client.AttachControl{endNow, end0} {
		if e.Status != "exited" || e.ExitCode == nil || *e.ExitCode != 0 || e.Offset != int64(len("before\n")+512) {
			t.Errorf("exit message %+v, want exited, exit 0, offset %d", e, len("before\n")+512)
		}
	}
	now.noErrors()
	from0.noErrors()
	// The pipe is closed: the record says so.
	j, err := s.c.Record(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Stdin != "closed" {
		t.Errorf("record's stdin after eof: %q, want \"closed\"", j.Stdin)
	}
}

// TestAttachPipeHeldBackNeverDropped: 4 MiB sent at once into a stdio job
// that does not read its pipe for longer than one try at the pipe waits
// (attachPipeWait, 5 s) all arrive, followed by eof: the client is held
// back while the pipe is full and the bytes not taken are sent again,
// never refused (POST /input would answer input_backpressure).
func TestAttachPipeHeldBackNeverDropped(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	id := runPiped(t, s, "echo ready; sleep 7; wc -c", "ready")
	a := attachTo(t, s, id, client.AttachOptions{})
	const total = 4 << 20
	chunk := bytes.Repeat([]byte("0123456789abcde\n"), 4096) // 64 KiB
	for i := 0; i < total/len(chunk); i++ {
		if err := a.conn.Input(ctx(t), chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.conn.EOF(ctx(t)); err != nil {
		t.Fatal(err)
	}
	a.waitFor(strconv.Itoa(total), 0)
	if e := a.ended(); e.ExitCode == nil || *e.ExitCode != 0 {
		t.Errorf("exit message %+v, want exit 0", e)
	}
	a.noErrors()
}

// TestAttachPipeRefusals: a stdio job without a stdin pipe is refused (409
// input_unsupported, saying to run it with "stdin":"pipe"); raw_offset
// (a pty job's raw terminal) is refused for a piped stdio job; on the
// socket, a second eof answers an error message stdin_closed and a resize
// one input_unsupported, and the socket stays open.
func TestAttachPipeRefusals(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 30", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.c.Attach(ctx(t), res.JobID, client.AttachOptions{})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "input_unsupported" || !strings.Contains(ae.Message, `"stdin":"pipe"`) {
		t.Errorf("attach to a stdio job without a pipe: %v, want 409 input_unsupported naming \"stdin\":\"pipe\"", err)
	}
	id := runPiped(t, s, "echo ready; cat; echo drained; exec sleep 60", "ready")
	zero := int64(0)
	_, err = s.c.Attach(ctx(t), id, client.AttachOptions{RawOffset: &zero})
	if !errors.As(err, &ae) || ae.Status != 422 || !strings.Contains(ae.Message, "raw_offset") {
		t.Errorf("attach to a piped stdio job with raw_offset: %v, want 422 naming raw_offset", err)
	}

	a := attachTo(t, s, id, client.AttachOptions{})
	if err := a.conn.EOF(ctx(t)); err != nil {
		t.Fatal(err)
	}
	a.waitFor("drained\n", 0)
	if err := a.conn.EOF(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := a.conn.Resize(ctx(t), 100, 30); err != nil {
		t.Fatal(err)
	}
	a.input("after\n")
	var codes []string
	deadline := time.After(30 * time.Second)
	for len(codes) < 3 {
		a.mu.Lock()
		codes = codes[:0]
		for _, c := range a.ctl {
			codes = append(codes, c.Type+":"+c.Code)
		}
		grew, err := a.grew, a.err
		a.mu.Unlock()
		if len(codes) >= 3 {
			break
		}
		if err != nil {
			t.Fatalf("the socket ended (%v) after %v", err, codes)
		}
		select {
		case <-grew:
		case <-deadline:
			t.Fatalf("only %v after 30s", codes)
		}
	}
	if want := []string{"error:stdin_closed", "error:input_unsupported", "error:stdin_closed"}; strings.Join(codes, " ") != strings.Join(want, " ") {
		t.Errorf("control messages after a second eof, a resize and input: %v, want %v", codes, want)
	}
}
