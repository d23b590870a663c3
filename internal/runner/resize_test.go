package runner

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/shellctl/shellctl/internal/screen"
)

// screenSize is the size of r's screen, once it took what came before.
func screenSize(t *testing.T, r *Runner) (cols, rows int) {
	t.Helper()
	b, why := r.screenOf(0)
	if why != "" {
		t.Fatalf("screen: %s", why)
	}
	var s screen.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.Cols, s.Rows
}

// A resize the terminal refuses leaves the screen at the terminal's size:
// the screen takes a new size first (see resize), and is put back to the
// size the terminal still has — the last one it took, not the spec's.
func TestResizeRefusedPutsTheScreenBack(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a terminal (a runner cannot run pty jobs without one): %v", err)
	}
	defer slave.Close()
	r := &Runner{spec: &Spec{Mode: "pty", Cols: 80, Rows: 24}, log: newLogger(io.Discard), screenStart: inProcScreen(t)}
	if err := pty.Setsize(master, &pty.Winsize{Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	r.master, r.cols, r.rows = master, 80, 24 // as startPTY leaves them
	if why := r.resize(100, 30); why != "" {
		t.Fatalf("resize to 100x30: %s", why)
	}
	if c, rw := screenSize(t, r); c != 100 || rw != 30 {
		t.Fatalf("screen %dx%d after a resize to 100x30", c, rw)
	}
	// The terminal is gone (the drain closes it once the job is over):
	// setting its size fails.
	master.Close()
	why := r.resize(120, 40)
	if !strings.Contains(why, "120x40") || !strings.Contains(why, "stays 100x30") {
		t.Fatalf("refused resize: %q, want it to name the size asked and the size kept", why)
	}
	if c, rw := screenSize(t, r); c != 100 || rw != 30 {
		t.Fatalf("screen %dx%d after a refused resize: the terminal is still 100x30", c, rw)
	}
}
