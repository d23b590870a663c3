package e2e

// The screen of pty jobs (docs/api.md "Screen and keys"): real full-screen
// programs (less, a curses menu, vim) driven by keys, compared with what
// tmux shows for the same program and size.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// screenUntil waits until the screen of job id satisfies ok: between
// looks it blocks on the job's next output (or its end), so a program
// still drawing is given the time it takes.
func (s *server) screenUntil(t *testing.T, id, what string, ok func(*client.Screen) bool) *client.Screen {
	t.Helper()
	var off int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		sc := s.screen(t, id, 0)
		if ok(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			t.Fatalf("screen of %s never showed %s:\n%s", id, what, strings.Join(sc.Lines, "\n"))
		}
		r, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: off, Timeout: f64(2), IdleFlushSeconds: 0.05})
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		if r.Offset == off && r.Done {
			if sc := s.screen(t, id, 0); ok(sc) {
				return sc
			}
			t.Fatalf("job %s ended and its screen shows no %s:\n%s", id, what, strings.Join(sc.Lines, "\n"))
		}
		off = r.Offset
	}
}

// screenShows waits until the screen has a line containing want.
func (s *server) screenShows(t *testing.T, id string, want string) *client.Screen {
	t.Helper()
	return s.screenUntil(t, id, fmt.Sprintf("%q", want), func(sc *client.Screen) bool {
		for _, l := range sc.Lines {
			if strings.Contains(l, want) {
				return true
			}
		}
		return false
	})
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

const menuPy = `import curses
def main(w):
    items = ["apple", "banana", "cherry"]
    sel = 0
    curses.curs_set(0)
    while True:
        w.erase()
        w.addstr(0, 0, "pick a fruit")
        for i, it in enumerate(items):
            w.addstr(2 + i, 2, ("> " if i == sel else "  ") + it)
        w.refresh()
        k = w.getch()
        if k == curses.KEY_DOWN:
            sel = min(sel + 1, len(items) - 1)
        elif k == curses.KEY_UP:
            sel = max(sel - 1, 0)
        elif k in (10, 13, curses.KEY_ENTER):
            return items[sel]
print("chose", curses.wrapper(main))
`

// TestScreenCursesMenu: curses turns on application cursor keys
// (keypad), so Down only works when the keys follow DECCKM.
func TestScreenCursesMenu(t *testing.T) {
	s := startServer(t, serverOpts{})
	menu := filepath.Join(s.Home, "menu.py")
	if err := os.WriteFile(menu, []byte(menuPy), 0o644); err != nil {
		t.Fatal(err)
	}
	id := runPTY(t, s, "/usr/bin/python3 "+menu, 60, 12)
	sc := s.screenShows(t, id, "> apple")
	if !sc.AltScreen || sc.Lines[0] != "pick a fruit" || sc.Lines[3] != "    banana" || sc.Cursor.Visible {
		t.Fatalf("menu: alt %v cursor %+v\n%s", sc.AltScreen, sc.Cursor, strings.Join(sc.Lines, "\n"))
	}
	sc = s.keys(t, id, "Down", "Down")
	if sc.Lines[4] != "  > cherry" || sc.Lines[2] != "    apple" {
		t.Fatalf("after Down Down:\n%s", strings.Join(sc.Lines, "\n"))
	}
	sc = s.keys(t, id, "Up", "Enter")
	var off int64
	var out strings.Builder
	r := s.waitFor(t, id, &off, &out, "chose banana")
	for !r.Done {
		r, _ = s.c.Wait(ctx(t), id, client.WaitRequest{Offset: r.Offset, Timeout: f64(20)})
	}
	sc = s.screen(t, id, 0)
	if sc.AltScreen || !strings.Contains(strings.Join(sc.Lines, "\n"), "chose banana") {
		t.Fatalf("after Enter: alt %v\n%s", sc.AltScreen, strings.Join(sc.Lines, "\n"))
	}
}

func TestScreenVim(t *testing.T) {
	s := startServer(t, serverOpts{})
	file := filepath.Join(s.Home, "notes.txt")
	id := runPTY(t, s, "vim -u NONE -N -n "+file, 80, 24)
	sc := s.screenShows(t, id, "notes.txt")
	if !sc.AltScreen || sc.Lines[1] != "~" {
		t.Fatalf("vim: alt %v\n%s", sc.AltScreen, strings.Join(sc.Lines, "\n"))
	}
	sc = s.keys(t, id, "i", "hello from keys", "Enter", "second line", "Escape")
	if sc.Lines[0] != "hello from keys" || sc.Lines[1] != "second line" || sc.Cursor.Row != 1 {
		t.Fatalf("after typing: cursor %+v\n%s", sc.Cursor, strings.Join(sc.Lines, "\n"))
	}
	s.keys(t, id, ":wq", "Enter")
	r, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: 0, Timeout: f64(20), OutputLimit: 1})
	for err == nil && !r.Done {
		r, err = s.c.Wait(ctx(t), id, client.WaitRequest{Offset: r.Offset, Timeout: f64(20), OutputLimit: 1})
	}
	if err != nil || code(r) != 0 {
		t.Fatalf("vim did not exit: %+v %v", r, err)
	}
	got, err := os.ReadFile(file)
	if err != nil || string(got) != "hello from keys\nsecond line\n" {
		t.Fatalf("file after :wq = %q %v", got, err)
	}
	if sc := s.screen(t, id, 0); sc.AltScreen {
		t.Errorf("vim left: still on the alternate screen")
	}
}

// tmuxScreen runs argv in a tmux of its own (its own socket, killed
// after) at cols × rows and returns what capture-pane shows once want is
// on it.
func tmuxScreen(t *testing.T, cols, rows int, want string, env []string, argv ...string) []string {
	t.Helper()
	sock := fmt.Sprintf("shellctl-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	tm := func(args ...string) ([]byte, error) {
		return exec.Command("tmux", append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).Output()
	}
	cmd := append([]string{"env", "-i"}, env...)
	cmd = append(cmd, argv...)
	if out, err := tm(append([]string{"new-session", "-d", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows)}, cmd...)...); err != nil {
		t.Skipf("tmux cannot start here: %v %s", err, out)
	}
	defer tm("kill-server")
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := tm("capture-pane", "-p")
		if err == nil && strings.Contains(string(out), want) {
			return trimScreen(strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("tmux never showed %q: %s %v", want, out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// trimScreen drops trailing blanks of each line and trailing empty lines.
func trimScreen(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(l, " ")
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func TestScreenMatchesTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	s := startServer(t, serverOpts{})
	file := numbered(t, s.Home, 300)
	menu := filepath.Join(s.Home, "menu.py")
	if err := os.WriteFile(menu, []byte(menuPy), 0o644); err != nil {
		t.Fatal(err)
	}
	// One line of 200 003 characters with no end (as base64 -w 0 prints):
	// it wraps at the margin some 2 500 times.
	long := filepath.Join(s.Home, "long.b64")
	if err := os.WriteFile(long, []byte(strings.Repeat("QUJDREVGR0g", 18200)[:200003]), 0o644); err != nil {
		t.Fatal(err)
	}
	longSh := filepath.Join(s.Home, "long.sh")
	if err := os.WriteFile(longSh, []byte("cat "+long+"; printf END; exec sleep 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Plain lines, followed by the runner itself (screen.Lines); then the
	// same lines and a full-screen program, which the screen process takes
	// over from the lines' seed.
	linesSh := filepath.Join(s.Home, "lines.sh")
	if err := os.WriteFile(linesSh, []byte("seq -f 'row %g of the log' 3000; printf '\\033[32mgreen\\033[m done\\n'; exec sleep 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	linesLess := filepath.Join(s.Home, "lines-less.sh")
	if err := os.WriteFile(linesLess, []byte("seq 1 2000; exec less "+file+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + s.Home, "PATH=/usr/bin:/bin"}
	for _, c := range []struct {
		name       string
		argv       []string
		cols, rows int
		want       string
	}{
		{"less", []string{"less", file}, 80, 24, "line 0023"},
		{"less narrow", []string{"less", "-S", file}, 33, 10, "line 0009"},
		{"curses menu", []string{"/usr/bin/python3", menu}, 50, 9, "> apple"},
		{"vim", []string{"vim", "-u", "NONE", "-N", "-n", file}, 70, 15, "line 0014"},
		{"long line", []string{"/bin/sh", longSh}, 80, 24, "END"},
		{"lines", []string{"/bin/sh", linesSh}, 80, 24, "done"},
		{"lines then less", []string{"/bin/sh", linesLess}, 80, 24, "line 0023"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := tmuxScreen(t, c.cols, c.rows, c.want, env, c.argv...)
			id := runPTY(t, s, strings.Join(c.argv, " "), c.cols, c.rows)
			sc := s.screenShows(t, id, c.want)
			// The program may still be drawing: what it shows once quiet
			// is what counts.
			var off int64
			got := trimScreen(sc.Lines)
			for range 10 {
				if strings.Join(got, "\n") == strings.Join(want, "\n") {
					break
				}
				r, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: off, Timeout: f64(0.3), IdleFlushSeconds: 0.05})
				if err != nil {
					t.Fatal(err)
				}
				off = r.Offset
				got = trimScreen(s.screen(t, id, 0).Lines)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("screen differs from tmux capture-pane\nshellctl:\n%s\ntmux:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			s.c.Terminate(ctx(t), id, 1)
		})
	}
}

func TestScreenResizeRedraws(t *testing.T) {
	s := startServer(t, serverOpts{})
	file := numbered(t, s.Home, 500)
	id := runPTY(t, s, "less "+file, 80, 24)
	s.screenShows(t, id, "line 0023")
	st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+id+"/resize", map[string]any{"cols": 100, "rows": 30})
	if err != nil || st != 200 {
		t.Fatalf("resize = %d %s %v", st, raw, err)
	}
	sc := s.screenUntil(t, id, "line 0029 on row 28", func(sc *client.Screen) bool { return len(sc.Lines) == 30 && sc.Lines[28] == "line 0029" })
	if sc.Cols != 100 || sc.Rows != 30 || len(sc.Lines) != 30 || sc.Lines[28] != "line 0029" {
		t.Fatalf("after resize: %dx%d %d lines\n%s", sc.Cols, sc.Rows, len(sc.Lines), strings.Join(sc.Lines, "\n"))
	}
	// Larger than what is emulated: no screen, said so; back within the
	// bound, the program's redraw is seen again.
	if st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+id+"/resize", map[string]any{"cols": 1000, "rows": 1000}); err != nil || st != 200 {
		t.Fatalf("resize = %d %s %v", st, raw, err)
	}
	st, raw, err = s.c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/screen", nil)
	wantError(t, "screen of a 1000x1000 terminal", st, raw, err, 409, "screen_unavailable")
	st, raw, err = s.c.Do(ctx(t), "POST", "/v1/jobs/"+id+"/keys", map[string]any{"keys": []string{"q"}})
	wantError(t, "keys on a 1000x1000 terminal", st, raw, err, 409, "screen_unavailable")
	if rec := s.getRecord(t, id); rec.ScreenAvailable {
		t.Errorf("record of a 1000x1000 terminal: screen_available true")
	}
	if st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+id+"/resize", map[string]any{"cols": 60, "rows": 12}); err != nil || st != 200 {
		t.Fatalf("resize = %d %s %v", st, raw, err)
	}
	sc = s.screenUntil(t, id, "line 0011 on row 10", func(sc *client.Screen) bool { return len(sc.Lines) == 12 && sc.Lines[10] == "line 0011" })
	if sc.Cols != 60 || sc.Lines[10] != "line 0011" {
		t.Fatalf("after resizing back: %dx%d\n%s", sc.Cols, sc.Rows, strings.Join(sc.Lines, "\n"))
	}
}

// TestScreenErrorsAndLastScreen: stdio jobs have no screen, bad keys are
// named, and a finished job's last screen outlives its runner and the
// server.
func TestScreenErrorsAndLastScreen(t *testing.T) {
	s := startServer(t, serverOpts{})
	srun, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, body any) (int, []byte, error) { return s.c.Do(ctx(t), method, path, body) }
	expectErr(t, "screen of a stdio job", 409, "screen_unsupported")(do("GET", "/v1/jobs/"+srun.JobID+"/screen", nil))
	expectErr(t, "keys for a stdio job", 409, "input_unsupported")(do("POST", "/v1/jobs/"+srun.JobID+"/keys", map[string]any{"keys": []string{"a"}}))
	if rec := s.getRecord(t, srun.JobID); rec.ScreenAvailable {
		t.Errorf("record of a stdio job: screen_available true")
	}
	expectErr(t, "screen of an unknown job", 404, "job_not_found")(do("GET", "/v1/jobs/0123456789abcdef/screen", nil))

	id := runPTY(t, s, "printf 'first\\nsecond\\n'; printf '\\033]0;done title\\007'; read x; echo got $x", 40, 8)
	s.screenShows(t, id, "second")
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"keys": []string{}}, "empty list"},
		{map[string]any{}, "keys is required"},
		{map[string]any{"keys": []string{"Enter", "C-1"}}, `keys[1] "C-1"`},
		{map[string]any{"keys": []string{"F13"}}, `keys[0] "F13"`},
		{map[string]any{"keys": []string{""}}, "is empty"},
		{map[string]any{"keys": []string{"a"}, "quiet_ms": 0}, "quiet_ms"},
	} {
		st, raw, err := do("POST", "/v1/jobs/"+id+"/keys", c.body)
		wantError(t, "keys "+string(mustJSON(c.body)), st, raw, err, 422, "validation_error")
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal(raw, &e)
		if msg := e.Error.Message; !strings.Contains(msg, c.want) || (strings.Contains(c.want, "keys[") && !strings.Contains(msg, "docs/api.md")) {
			t.Errorf("keys %s: %s, want it to say %q and where the names are", mustJSON(c.body), raw, c.want)
		}
	}
	expectErr(t, "scrollback=abc", 422, "validation_error")(do("GET", "/v1/jobs/"+id+"/screen?scrollback=abc", nil))
	expectErr(t, "scrollback=1001", 422, "validation_error")(do("GET", "/v1/jobs/"+id+"/screen?scrollback=1001", nil))
	expectErr(t, "DELETE screen", 405, "method_not_allowed")(do("DELETE", "/v1/jobs/"+id+"/screen", nil))

	sc := s.keys(t, id, "yes", "Enter")
	var off int64
	var out strings.Builder
	r := s.waitFor(t, id, &off, &out, "got yes")
	for !r.Done {
		r, _ = s.c.Wait(ctx(t), id, client.WaitRequest{Offset: r.Offset, Timeout: f64(20)})
	}
	expectErr(t, "keys for a finished job", 409, "job_not_running")(do("POST", "/v1/jobs/"+id+"/keys", map[string]any{"keys": []string{"a"}}))
	last := s.screen(t, id, 5)
	if last.Title != "done title" || last.Lines[0] != "first" || last.Lines[2] != "yes" || last.Lines[3] != "got yes" {
		t.Fatalf("last screen: %+v (keys answered %q)", last, sc.Lines)
	}
	if _, err := os.Stat(filepath.Join(s.StateDir, "jobs", id, "screen.json")); err != nil {
		t.Fatalf("no last screen on disk: %v", err)
	}
	// The server restarted: no runner, no live job; the file answers.
	s.restart(syscall.SIGTERM)
	again := s.screen(t, id, 5)
	if strings.Join(again.Lines, "\n") != strings.Join(last.Lines, "\n") || again.Title != last.Title || again.Cursor != last.Cursor {
		t.Fatalf("after a restart: %+v, want %+v", again, last)
	}
	if again.Scrollback == nil || len(*again.Scrollback) != 0 {
		t.Errorf("scrollback=5 of a screen that never scrolled: %v", again.Scrollback)
	}
	if plain := s.screen(t, id, 0); plain.Scrollback != nil {
		t.Errorf("scrollback not asked for, yet given: %v", plain.Scrollback)
	}
}

// TestScreenMemoryBounded: a job that prints 100 000 lines costs its
// runner and its screen process no more memory than the screen's bound
// (docs/api.md): once with the emulator (the job hides the cursor first,
// which plain lines do not, so the screen process follows the lines), once
// as plain lines alone, which the runner follows itself.
func TestScreenMemoryBounded(t *testing.T) {
	if os.Getenv("SHELLCTL_E2E_RACE") != "" {
		t.Skip("the race detector multiplies a process's memory")
	}
	s := startServer(t, serverOpts{})
	rss := func(first string, n int) (int64, int, *client.Screen) {
		id := runPTY(t, s, fmt.Sprintf("%sseq -f 'row %%06g of a long output line' %d; echo printed; read x", first, n), 200, 50)
		s.screenShows(t, id, "printed")
		rec := s.getRecord(t, id)
		if rec.PID == nil {
			t.Fatal("no pid in the record")
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", *rec.PID))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ppid, _ := strconv.Atoi(f[1])
		// The runner and its screen process, where the emulator is.
		procs := screenProcs(ppid)
		var kib int64
		for _, pid := range append([]int{ppid}, procs...) {
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(status), "\n") {
				if strings.HasPrefix(l, "VmRSS:") {
					k, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
					kib += k
				}
			}
		}
		sc := s.screen(t, id, 1000)
		s.c.Terminate(ctx(t), id, 1)
		return kib << 10, len(procs), sc
	}
	for _, c := range []struct {
		name, first string
		lines       int
		procs       int
		bound       int64
	}{
		// The bound for 200×50: both screens' cells, the scrollback's
		// text (at most 1 MiB) and the emulator's 4 MiB string buffer;
		// 16 MiB leaves room for the Go runtime's heap growth.
		{"emulator", `printf '\033[?25l'; `, 100000, 1, 16 << 20},
		// The runner's lines: 1000 rows of scrollback and two screenfuls
		// (twice over at most before they are moved down), and the Go
		// heap's first 4 MiB, which the runner's garbage (its events)
		// fills before its first collection; 300 000 lines are 10 MB,
		// past the bound were they kept.
		{"lines", "", 300000, 0, 8 << 20},
	} {
		small, _, _ := rss(c.first, 100)
		big, procs, sc := rss(c.first, c.lines)
		if procs != c.procs {
			t.Fatalf("%s: %d screen processes, want %d", c.name, procs, c.procs)
		}
		sb := *sc.Scrollback
		if want := fmt.Sprintf("row %06d of a long output line", c.lines-48); len(sb) != 1000 || sb[999] != want || sc.Lines[48] != "printed" {
			t.Fatalf("%s: after %d lines: %d scrollback rows ending %q (want %q), screen row 48 %q", c.name, c.lines, len(sb), sb[len(sb)-1], want, sc.Lines[48])
		}
		if grew := big - small; grew > c.bound {
			t.Fatalf("%s: runner and screen process grew %d KiB printing %d lines more (RSS %d → %d KiB)", c.name, grew>>10, c.lines, small>>10, big>>10)
		}
		t.Logf("%s: runner and screen process RSS: %d KiB after 100 lines, %d KiB after %d", c.name, small>>10, big>>10, c.lines)
	}
}

// Keys answer as soon as the program waits for input again after reading
// them (input-wait), not after the quiet period: here quiet_ms is 4 s and
// the answer comes long before, with the program's reaction on the screen.
func TestScreenKeysSettleOnInputWait(t *testing.T) {
	s := startServer(t, serverOpts{})
	id := runPTY(t, s, `while read -r -p 'cmd> ' l; do echo "got [$l]"; done`, 80, 24)
	s.screenShows(t, id, "cmd>")
	for i := 0; i < 3; i++ {
		word := fmt.Sprintf("w%d", i)
		start := time.Now()
		sc, err := s.c.Keys(ctx(t), id, client.KeysRequest{Keys: []string{word, "Enter"}, QuietMS: 4000, TimeoutMS: 10000})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if took > 2*time.Second {
			t.Fatalf("keys answered after %v: it waited for the quiet period, not for the prompt", took)
		}
		found := false
		for _, l := range sc.Lines {
			if strings.Contains(l, "got ["+word+"]") {
				found = true
			}
		}
		if !found {
			t.Fatalf("keys answered in %v without the program's reaction to %q:\n%s", took, word, strings.Join(sc.Lines, "\n"))
		}
		t.Logf("keys %d answered in %v", i, took)
	}
}
