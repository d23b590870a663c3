package e2e

// The attach socket's input is read ahead of what the server has done
// with it and merged into fewer runner requests (internal/api's
// attachinbox.go); these check, through a real server, runner and job,
// that what a client sees did not change: every byte in order, a control
// message exactly where it was sent.

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/shellctl/shellctl/internal/client"
)

// TestAttachManySmallInputsThenEOF: 400 small messages sent at once (so
// that they queue and are merged) to a stdio job's `cat`, then eof, then
// more messages: cat gives back exactly the 400 in order and ends 0; no
// byte sent after the eof reaches it (the eof was done after every byte
// before it and before any after it).
func TestAttachManySmallInputsThenEOF(t *testing.T) {
	s := startServer(t, serverOpts{})
	id := runPiped(t, s, "echo ready; exec cat", "ready")
	a := attachTo(t, s, id, client.AttachOptions{})
	var want bytes.Buffer
	for i := 0; i < 400; i++ {
		line := fmt.Sprintf("line %03d %s\n", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%37))
		want.WriteString(line)
		a.input(line)
	}
	if err := a.conn.EOF(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// cat may end, and the server close the socket after the exit
	// message, before all of these are sent: a send then fails, and the
	// exit must have come (ended below).
	for i := 0; i < 20; i++ {
		if err := a.conn.Input(ctx(t), []byte(fmt.Sprintf("after eof %d\n", i))); err != nil {
			break
		}
	}
	e := a.ended()
	if got := a.output(); got != want.String() {
		t.Errorf("cat gave back %d bytes, want exactly the %d sent before eof, in order:\ngot  %q\nwant %q", len(got), want.Len(), got, want.String())
	}
	if e.ExitCode == nil || *e.ExitCode != 0 || e.Offset != int64(len("ready\n")+want.Len()) {
		t.Errorf("exit message %+v, want exit 0 at offset %d", e, len("ready\n")+want.Len())
	}
	// Input after the eof: refused (stdin_closed) while cat still ran, or
	// dropped quietly once it had ended; never any other error.
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.ctl {
		if c.Type == "error" && c.Code != "stdin_closed" {
			t.Errorf("error message %+v, want none but stdin_closed for the input after eof", c)
		}
	}
}
