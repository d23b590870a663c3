package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/client"
)

// TestCLIScreen: shellctl screen and shellctl keys drive less on a real
// server, through the real binary.
func TestCLIScreen(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	file := numbered(t, s.Home, 500)
	id := runPTY(t, s, "echo before less; less "+file+"; echo after less", 80, 24)
	s.screenShows(t, id, "line 0023") // less has drawn its first page

	r := cli(t, s, dir, "", "screen", id)
	rows := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(rows) != 25 || !strings.HasPrefix(rows[0], "screen 80x24 cursor 23,") || !strings.Contains(rows[0], " alt-screen") {
		t.Fatalf("screen: %v", r)
	}
	for i := 1; i <= 23; i++ {
		if want := fmt.Sprintf("line %04d", i); rows[i] != want {
			t.Fatalf("screen row %d = %q, want %q:\n%s", i-1, rows[i], want, r.stdout)
		}
	}
	// keys: Space pages on; the answer is the settled screen.
	r = cli(t, s, dir, "", "keys", id, "Space")
	rows = strings.Split(r.stdout, "\n")
	if r.code != 0 || len(rows) < 24 || rows[1] != "line 0024" || rows[23] != "line 0046" {
		t.Fatalf("keys Space: %v", r)
	}
	r = cli(t, s, dir, "", "keys", "--timeout", "5", id, "Down", "Down")
	if rows = strings.Split(r.stdout, "\n"); r.code != 0 || rows[1] != "line 0026" {
		t.Fatalf("keys Down Down: %v", r)
	}
	// --json: the API's answer.
	r = cli(t, s, dir, "", "screen", "--json", id)
	var sc client.Screen
	if err := json.Unmarshal([]byte(r.stdout), &sc); err != nil || r.code != 0 || !sc.AltScreen || sc.Rows != 24 || sc.Cols != 80 || sc.Lines[0] != "line 0026" {
		t.Fatalf("screen --json: %v (%v)", r, err)
	}
	// q leaves less: the main screen, where the shell wrote.
	r = cli(t, s, dir, "", "keys", id, "q")
	if r.code != 0 || !strings.Contains(strings.SplitN(r.stdout, "\n", 2)[0], " main-screen") {
		t.Fatalf("keys q: %v; want the main screen", r)
	}
	s.screenShows(t, id, "after less")
	r = cli(t, s, dir, "", "screen", id)
	if rows = strings.Split(r.stdout, "\n"); r.code != 0 || rows[1] != "before less" || !strings.Contains(r.stdout, "after less\n") {
		t.Fatalf("screen after less: %v", r)
	}

	// Scrollback: rows that scrolled off the main screen come first.
	id2 := runPTY(t, s, "seq 1 60; read x", 80, 24)
	s.screenShows(t, id2, "60")
	r = cli(t, s, dir, "", "screen", "--scrollback", "5", id2)
	rows = strings.Split(r.stdout, "\n")
	if r.code != 0 || len(rows) < 8 || strings.Join(rows[1:7], ",") != "33,34,35,36,37,--- screen ---" || rows[7] != "38" {
		t.Fatalf("screen --scrollback 5: %v", r)
	}

	// Failures are shellctl's own: 125, and why.
	stdio, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 30", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"screen", stdio.JobID}, "screen_unsupported"},
		{[]string{"keys", stdio.JobID, "q"}, "input_unsupported"},
		{[]string{"screen", "0123456789abcdef"}, "404"},
		{[]string{"keys", id2, "C-1"}, `keys[0] "C-1"`},
		{[]string{"keys", id2}, "requires at least 2 arg"},
		{[]string{"screen", "--scrollback", "5000", id2}, "--scrollback 5000"},
		{[]string{"keys", "--timeout", "90", id2, "q"}, "--timeout 90"},
		{[]string{"keys", id, "q"}, "job_not_running"},
	} {
		r := cli(t, s, dir, "", tc.args...)
		if r.code != 125 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("shellctl %q: %v; want exit 125 and %q on stderr", tc.args, r, tc.want)
		}
	}
}
