package e2e

// The screen of pty jobs (README "Screen and keys"): real full-screen
// programs (less, a curses menu, vim) driven by keys, compared with what
// tmux shows for the same program and size.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

func (s *server) screen(t *testing.T, id string, scrollback int) *client.Screen {
	t.Helper()
	sc, err := s.c.Screen(ctx(t), id, scrollback)
	if err != nil {
		t.Fatalf("screen of %s: %v", id, err)
	}
	return sc
}

func (s *server) keys(t *testing.T, id string, keys ...string) *client.Screen {
	t.Helper()
	sc, err := s.c.Keys(ctx(t), id, client.KeysRequest{Keys: keys})
	if err != nil {
		t.Fatalf("keys %q for %s: %v", keys, id, err)
	}
	return sc
}

// screenShows waits (with the keys route's settling: an empty key list
// is refused, so a screen read after blocking output waits) until the
// screen has a line containing want.
func (s *server) screenShows(t *testing.T, id string, want string) *client.Screen {
	t.Helper()
	var off int64
	var out strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for {
		sc := s.screen(t, id, 0)
		for _, l := range sc.Lines {
			if strings.Contains(l, want) {
				return sc
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("screen of %s never showed %q:\n%s", id, want, strings.Join(sc.Lines, "\n"))
		}
		// Block until the job prints more (or ends).
		r, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: off, Timeout: f64(5), IdleFlushSeconds: 0.05})
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		out.WriteString(r.Output)
		if r.Offset == off && r.Done {
			sc = s.screen(t, id, 0)
			for _, l := range sc.Lines {
				if strings.Contains(l, want) {
					return sc
				}
			}
			t.Fatalf("job %s ended and its screen shows no %q:\n%s", id, want, strings.Join(sc.Lines, "\n"))
		}
		off = r.Offset
	}
}

func numbered(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %04d\n", i)
	}
	p := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runPTY(t *testing.T, s *server, script string, cols, rows int) string {
	t.Helper()
	run, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Terminal: &client.Terminal{Cols: cols, Rows: rows}, Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return run.JobID
}

func TestScreenLess(t *testing.T) {
	s := startServer(t, serverOpts{})
	file := numbered(t, s.Home, 500)
	id := runPTY(t, s, "echo before less; less "+file+"; echo after less", 80, 24)
	sc := s.screenShows(t, id, "line 0023")
	if !sc.AltScreen || sc.Cols != 80 || sc.Rows != 24 || len(sc.Lines) != 24 {
		t.Fatalf("less: alt %v %dx%d %d lines", sc.AltScreen, sc.Cols, sc.Rows, len(sc.Lines))
	}
	for i := 0; i < 23; i++ {
		if want := fmt.Sprintf("line %04d", i+1); sc.Lines[i] != want {
			t.Fatalf("first page row %d = %q, want %q:\n%s", i, sc.Lines[i], want, strings.Join(sc.Lines, "\n"))
		}
	}
	sc = s.keys(t, id, "Space")
	if sc.Lines[0] != "line 0024" || sc.Lines[22] != "line 0046" {
		t.Fatalf("after Space: %q … %q", sc.Lines[0], sc.Lines[22])
	}
	sc = s.keys(t, id, "Down", "Down")
	if sc.Lines[0] != "line 0026" {
		t.Fatalf("after Down Down: row 0 %q", sc.Lines[0])
	}
	sc = s.keys(t, id, "q")
	if sc.AltScreen {
		t.Fatalf("after q: still on the alternate screen:\n%s", strings.Join(sc.Lines, "\n"))
	}
	sc = s.screenShows(t, id, "after less")
	if sc.Lines[0] != "before less" {
		t.Fatalf("main screen after less: %q", sc.Lines)
	}
	rec := s.getRecord(t, id)
	if !rec.ScreenAvailable {
		t.Errorf("record of a pty job: screen_available false")
	}
}
