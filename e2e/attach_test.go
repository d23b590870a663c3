package e2e

// GET /v1/jobs/{id}/attach (spec/extended-api.md §8): a real WebSocket
// client (internal/client, github.com/coder/websocket) against a real
// server, runner and job.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/screen/emu"
)

// attached reads one attach socket into a buffer, in the background.
type attached struct {
	t    *testing.T
	conn *client.AttachConn
	mu   sync.Mutex
	out  bytes.Buffer
	ctl  []client.AttachControl
	err  error // how reading ended
	// A pty job's raw bytes: redraw holds the image that followed a
	// "redraw" message, rawAt the raw offset the output's end stands at.
	redraw     []byte
	wantRedraw bool
	rawAt      int64
	grew       chan struct{}
	done       chan struct{}
}

func attachTo(t *testing.T, s *server, id string, opt client.AttachOptions) *attached {
	t.Helper()
	c, err := s.c.Attach(ctx(t), id, opt)
	if err != nil {
		t.Fatalf("attach to %s: %v", id, err)
	}
	a := &attached{t: t, conn: c, grew: make(chan struct{}), done: make(chan struct{})}
	go a.read()
	t.Cleanup(func() { c.CloseNow() })
	return a
}

func (a *attached) read() {
	defer close(a.done)
	for {
		m, err := a.conn.Next(context.Background())
		a.mu.Lock()
		if err != nil {
			a.err = err
			close(a.grew)
			a.mu.Unlock()
			return
		}
		switch {
		case m.Control != nil:
			a.ctl = append(a.ctl, *m.Control)
			if c := m.Control; (c.Type == "redraw" || c.Type == "resume") && c.RawOffset != nil {
				a.rawAt = *c.RawOffset
				a.wantRedraw = c.Type == "redraw"
			}
		case a.wantRedraw:
			a.redraw = append([]byte(nil), m.Output...)
			a.wantRedraw = false
		default:
			a.out.Write(m.Output)
			a.rawAt += int64(len(m.Output))
		}
		close(a.grew)
		a.grew = make(chan struct{})
		a.mu.Unlock()
	}
}

// waitFor waits until the output holds want (after from), and returns
// where it ends in the output.
func (a *attached) waitFor(want string, from int) int {
	a.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		a.mu.Lock()
		out := a.out.String()
		grew, err := a.grew, a.err
		a.mu.Unlock()
		if i := strings.Index(out[min(from, len(out)):], want); i >= 0 {
			return from + i + len(want)
		}
		if err != nil {
			a.t.Fatalf("attach ended (%v) before %q came; output:\n%q", err, want, out)
		}
		select {
		case <-grew:
		case <-deadline:
			a.t.Fatalf("no %q in the attached output after 30s:\n%q", want, out)
		}
	}
}

func (a *attached) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

// ended waits for the socket's end: the exit message and a normal close.
func (a *attached) ended() client.AttachControl {
	a.t.Helper()
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		a.t.Fatalf("the attach socket did not end after the job did; output:\n%q", a.output())
	}
	if !errors.Is(a.err, client.ErrAttachClosed) {
		a.t.Fatalf("the attach socket ended with %v, want a normal close (1000)", a.err)
	}
	var exit *client.AttachControl
	for i := range a.ctl {
		if a.ctl[i].Type == "exit" {
			exit = &a.ctl[i]
		}
	}
	if exit == nil {
		a.t.Fatalf("no exit message before the close; control messages: %+v", a.ctl)
	}
	return *exit
}

func (a *attached) input(s string) {
	a.t.Helper()
	if err := a.conn.Input(ctx(a.t), []byte(s)); err != nil {
		a.t.Fatalf("send %q: %v", s, err)
	}
}

// startBash runs an interactive bash in a pty job.
func startBash(t *testing.T, s *server) string {
	t.Helper()
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "PS1='$ ' exec bash --norc --noprofile -i", Mode: "pty", Timeout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID
}

// TestAttachPtyBash: resize seen by stty size, Ctrl-C (0x03) interrupts
// sleep, two clients at once see the same output and both may type, the
// exit message arrives and the socket closes normally.
func TestAttachPtyBash(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	id := startBash(t, s)
	a := attachTo(t, s, id, client.AttachOptions{})
	if p := a.conn.Subprotocol(); p != client.AttachSubprotocol {
		t.Fatalf("subprotocol %q, want %q", p, client.AttachSubprotocol)
	}
	if err := a.conn.Resize(ctx(t), 101, 37); err != nil {
		t.Fatal(err)
	}
	a.input("stty size\r")
	at := a.waitFor("37 101", 0)

	at = a.waitFor("$ ", at)
	// The child says it runs in the terminal's foreground, then becomes
	// sleep: a Ctrl-C from then on is the sleep's (typed sooner, while
	// bash still starts the command, a real terminal's ^C is bash's).
	a.input("bash -c 'echo st''arted; exec sleep 30'\r")
	at = a.waitFor("started\r\n", at)
	start := time.Now()
	a.input("\x03")
	a.input("echo after-$?\r")
	at = a.waitFor("after-130", at)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Ctrl-C took %v to end sleep 30", d)
	}

	// A second client: what one types, both see.
	b := attachTo(t, s, id, client.AttachOptions{})
	b.input("echo two-$((6*7))\r")
	a.waitFor("two-42", at)
	b.waitFor("two-42", 0)

	a.input("exit 3\r")
	for _, c := range []*attached{a, b} {
		e := c.ended()
		if e.Status != "exited" || e.ExitCode == nil || *e.ExitCode != 3 {
			t.Errorf("exit message %+v, want status exited, exit_code 3", e)
		}
		if e.Offset <= 0 {
			t.Errorf("exit message offset %d, want output.log's size", e.Offset)
		}
	}
}

// TestAttachAuthAndChecks: the token by header or subprotocol entry (never
// echoed back), none refused; the subprotocol required; an evil Origin or
// Host refused on the handshake, an allowed Origin served; a stdio job
// without a pipe refused.
func TestAttachAuthAndChecks(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok", args: []string{"--allowed-origins", "https://ok.example"}})
	id := startBash(t, s)
	url := "ws" + strings.TrimPrefix(s.URL, "http") + "/v1/jobs/" + id + "/attach"
	dial := func(protos []string, h http.Header) (int, string) {
		// Not the tests' checked transport: the 403s of the Host and
		// Origin check are answered before any route (no request id).
		hc := &http.Client{Transport: &http.Transport{}}
		c, resp, err := websocket.Dial(ctx(t), url, &websocket.DialOptions{Subprotocols: protos, HTTPHeader: h, HTTPClient: hc})
		if err == nil {
			defer c.CloseNow()
			return http.StatusSwitchingProtocols, c.Subprotocol()
		}
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return resp.StatusCode, ""
	}
	bearer := http.Header{"Authorization": {"Bearer tok"}}
	withOrigin := func(o string) http.Header { return http.Header{"Authorization": {"Bearer tok"}, "Origin": {o}} }
	for _, tc := range []struct {
		name   string
		protos []string
		h      http.Header
		want   int
	}{
		{"no token", []string{"shellctl.attach.v1"}, nil, 401},
		{"wrong token in subprotocol", []string{"shellctl.attach.v1", "bearer.nope"}, nil, 401},
		{"token in subprotocol", []string{"shellctl.attach.v1", "bearer.tok"}, nil, 101},
		{"token in header", []string{"shellctl.attach.v1"}, bearer, 101},
		{"no subprotocol", nil, bearer, 400},
		{"evil origin", []string{"shellctl.attach.v1"}, withOrigin("http://evil.example"), 403},
		{"allowed origin", []string{"shellctl.attach.v1"}, withOrigin("https://ok.example"), 101},
	} {
		got, proto := dial(tc.protos, tc.h)
		if got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
		if got == 101 && proto != "shellctl.attach.v1" {
			t.Errorf("%s: subprotocol %q chosen, want shellctl.attach.v1 (never the token)", tc.name, proto)
		}
	}
	// Host: set on the request itself.
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/jobs/"+id+"/attach", nil)
	req.Host = "evil.example"
	req.Header = http.Header{"Authorization": {"Bearer tok"}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {"shellctl.attach.v1"}}
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("handshake with Host evil.example: %d, want 403 forbidden_host", resp.StatusCode)
	}

	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 30", Mode: "stdio", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.c.Attach(ctx(t), res.JobID, client.AttachOptions{})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "input_unsupported" {
		t.Errorf("attach to a stdio job without a pipe: %v, want 409 input_unsupported", err)
	}
}

// attachFromJob is a job's try at the attach WebSocket of job target: the
// handshake by curl, printing the status.
func attachFromJob(base, token, target string) string {
	return fmt.Sprintf(`command -v curl >/dev/null || { echo NO_CURL; exit 3; }
code=$(curl -s -m 3 -o /dev/null -w '%%{http_code}' -H 'Authorization: Bearer %s' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
  -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Sec-WebSocket-Protocol: shellctl.attach.v1' \
  %s/v1/jobs/%s/attach)
echo "status=$code"
exit 0
`, token, base, target)
}

// TestWallJobCannotAttach: a job that knows the token and another job's
// id tries to attach to it: refused with 403 forbidden_from_job, as every
// route (docs/security.md, "No job can use the API"). With the wall
// turned off (--allow-job-clients) the same script gets 101: the test
// tells a refusal from a script that could not have succeeded.
func TestWallJobCannotAttach(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wall", nil, "status=403"},
		{"wall-off", []string{"--allow-job-clients"}, "status=101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, serverOpts{token: "tok", args: tc.args})
			target := startBash(t, s)
			res, out := s.runDone(t, client.RunRequest{Script: attachFromJob(s.URL, "tok", target), Mode: "stdio", Timeout: 30})
			if strings.Contains(out, "NO_CURL") {
				t.Skip("no curl on this machine for the job to use")
			}
			if code(res) != 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("a job's attach: %q (exit %d), want %s", out, code(res), tc.want)
			}
		})
	}
}

// firstControl is the first control message (waiting for it).
func (a *attached) firstControl() client.AttachControl {
	a.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		a.mu.Lock()
		grew, err := a.grew, a.err
		if len(a.ctl) > 0 && (a.ctl[0].Type != "redraw" || !a.wantRedraw) {
			c := a.ctl[0]
			a.mu.Unlock()
			return c
		}
		a.mu.Unlock()
		if err != nil {
			a.t.Fatalf("attach ended (%v) before its first control message", err)
		}
		select {
		case <-grew:
		case <-deadline:
			a.t.Fatalf("no control message after 30s")
		}
	}
}

// TestAttachRawTerminal: a pty job's attach carries the terminal's raw
// bytes, escapes included, while output.log stays sanitized; a reconnect
// with its raw offset resumes without a gap (what was written while away
// comes, no redraw), one whose offset the ring no longer holds gets a
// fresh redraw.
func TestAttachRawTerminal(t *testing.T) {
	s := startServer(t, serverOpts{})
	id := startBash(t, s)
	// More than the raw ring holds is out before anyone attached: raw
	// offset 0 is not kept. (Up to a cold screen's or the ring's size,
	// the first attach keeps a job's bytes from its start.)
	if _, err := s.c.Input(ctx(t), id, "seq 200000; echo seq-$((1+1))\r", client.WaitRequest{Timeout: f64(10)}); err != nil {
		t.Fatal(err)
	}
	var logOff int64
	for {
		r, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: logOff, Timeout: f64(10)})
		if err != nil {
			t.Fatal(err)
		}
		logOff = r.Offset
		if strings.Contains(r.Output, "seq-2\n") {
			break
		}
	}
	a := attachTo(t, s, id, client.AttachOptions{})
	if c := a.firstControl(); c.Type != "redraw" || c.RawOffset == nil || *c.RawOffset <= 0 {
		t.Fatalf("first message %+v, want a redraw at the raw offset of the prompt", c)
	}
	a.input("printf '\\e[31mred\\e[0m\\n'\r")
	a.waitFor("\x1b[31mred\x1b[0m", 0)
	// output.log is written by the sanitizer, beside the raw ring that
	// attach reads: followed until the line is there too.
	var logged string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged, "\nred") && time.Now().Before(deadline); {
		res, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: logOff, Timeout: f64(5)})
		if err != nil {
			t.Fatal(err)
		}
		logged += res.Output
		logOff = res.Offset
	}
	if !strings.Contains(logged, "\nred") || strings.Contains(logged, "\x1b[31m") {
		t.Fatalf("output.log (sanitized) = %q: want red without its escape", logged)
	}
	a.input("echo here\r")
	a.waitFor("here\r\n", 0)
	a.waitFor("$ ", strings.LastIndex(a.output(), "here\r\n"))
	a.mu.Lock()
	at := a.rawAt
	a.mu.Unlock()
	a.conn.Close()

	// Away: the job writes on.
	if _, err := s.c.Input(ctx(t), id, "echo gap-$((40+2))\r", client.WaitRequest{Timeout: f64(5)}); err != nil {
		t.Fatal(err)
	}
	b := attachTo(t, s, id, client.AttachOptions{RawOffset: &at})
	if c := b.firstControl(); c.Type != "resume" || c.RawOffset == nil || *c.RawOffset != at {
		t.Fatalf("reconnect at %d: first message %+v, want resume at %d", at, c, at)
	}
	b.waitFor("gap-42\r\n", 0)
	if strings.Contains(b.output(), "here") {
		t.Fatalf("the resumed output starts before %d: %q", at, b.output())
	}

	zero := int64(0)
	c := attachTo(t, s, id, client.AttachOptions{RawOffset: &zero})
	if m := c.firstControl(); m.Type != "redraw" {
		t.Fatalf("reconnect at raw offset 0, which the ring never held: %+v, want a redraw", m)
	}
	if !strings.Contains(string(c.redrawImage()), "gap-42") {
		t.Fatalf("the redraw %q does not show the screen", c.redrawImage())
	}
}

func (a *attached) redrawImage() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.redraw
}

// emulated is what a terminal emulator shows after b, on a cols × rows
// terminal.
func emulated(b []byte, cols, rows int) *client.Screen {
	term := emu.New(cols, rows)
	defer term.Close()
	term.Write(b)
	sn := term.Snapshot(0)
	sc := &client.Screen{Cols: sn.Cols, Rows: sn.Rows, AltScreen: sn.AltScreen, Title: sn.Title, Lines: sn.Lines}
	sc.Cursor.Row, sc.Cursor.Col, sc.Cursor.Visible = sn.Cursor.Row, sn.Cursor.Col, sn.Cursor.Visible
	return sc
}

func sameScreen(t *testing.T, what string, got, want *client.Screen) {
	t.Helper()
	if got.AltScreen != want.AltScreen || got.Cursor != want.Cursor || strings.Join(got.Lines, "\n") != strings.Join(want.Lines, "\n") {
		t.Fatalf("%s: the attached terminal shows (alt %v, cursor %+v)\n%s\nGET …/screen shows (alt %v, cursor %+v)\n%s",
			what, got.AltScreen, got.Cursor, strings.Join(got.Lines, "\n"), want.AltScreen, want.Cursor, strings.Join(want.Lines, "\n"))
	}
}

// TestAttachRedrawIsTheScreen: attaching to a running vim, then to a
// running less, gives a redraw whose screen, fed to a terminal emulator,
// is the one GET …/screen answers; and what follows it (the program's raw
// bytes as it answers keys typed through the socket) keeps the two equal.
func TestAttachRedrawIsTheScreen(t *testing.T) {
	s := startServer(t, serverOpts{})
	file := numbered(t, s.Home, 300)
	for _, tc := range []struct {
		name, script, shows string
		keys                []string
		after               string
		plain               bool // only plain lines: the runner's own screen draws the redraw
	}{
		{"vim", "vim -u NONE -N -n " + file, "line 0001", []string{"/line 0150\r", "x"}, "ine 0150", false},
		{"less", "less " + file, "line 0001", []string{" ", "/0077\r"}, "line 0077", false},
		{"lines", `for i in $(seq 1 3000); do printf '\033[3%dmline %d\033[m\n' $((i%8)) $i; done; printf 'name? '; read x; echo "hi $x"; read y`,
			"name?", []string{"ada\r"}, "hi ada", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := runPTY(t, s, tc.script, 83, 21)
			want := s.screenShows(t, id, tc.shows)
			a := attachTo(t, s, id, client.AttachOptions{})
			if c := a.firstControl(); c.Type != "redraw" {
				t.Fatalf("first message %+v, want redraw", c)
			}
			sameScreen(t, "after the redraw", emulated(a.redrawImage(), 83, 21), want)
			if p := screenProcs(s.runnerPID(t, id)); tc.plain && len(p) != 0 {
				t.Fatalf("plain lines and an attach started screen processes %v", p)
			}
			for _, k := range tc.keys {
				a.input(k)
			}
			want = s.screenShows(t, id, tc.after)
			// Settled: the screen is the one after the keys; the
			// attached terminal has it once the bytes that drew it came.
			deadline := time.Now().Add(20 * time.Second)
			for {
				got := emulated(append(a.redrawImage(), a.output()...), 83, 21)
				want = s.screen(t, id, 0)
				if got.Cursor == want.Cursor && strings.Join(got.Lines, "\n") == strings.Join(want.Lines, "\n") {
					break
				}
				if time.Now().After(deadline) {
					sameScreen(t, "after the keys", got, want)
				}
				a.mu.Lock()
				grew := a.grew
				a.mu.Unlock()
				select {
				case <-grew:
				case <-time.After(time.Second):
				}
			}
			if p := screenProcs(s.runnerPID(t, id)); tc.plain && len(p) != 0 {
				t.Fatalf("plain lines and an attach started screen processes %v", p)
			}
			if _, err := s.c.Terminate(ctx(t), id, 0); err != nil {
				t.Fatal(err)
			}
			if e := a.ended(); e.RawOffset == nil {
				t.Fatalf("exit %+v: no raw_offset", e)
			}
		})
	}
}

// TestCLIAttachShowsVimAsTmuxDoes: `shellctl attach` in a tmux pane shows
// a running vim exactly as a tmux pane of the same size running the same
// vim on the same file shows it (capture-pane: every row and the cursor),
// after the attach's redraw and again after keys typed through it.
func TestCLIAttachShowsVimAsTmuxDoes(t *testing.T) {
	s := startServer(t, serverOpts{})
	file := numbered(t, s.Home, 300)
	vim := "vim -u NONE -N -n " + file
	id := runPTY(t, s, vim, 100, 30)
	s.screenShows(t, id, "line 0001")
	dir := t.TempDir()
	att := newTmux(t, s, dir, 100, 30)
	own := newTmux(t, s, t.TempDir(), 100, 30)
	att.line("clear; shellctl attach " + id)
	own.line("clear; HOME=" + shellQuote(s.Home) + " " + vim) // vim shows the file's name under HOME as ~/…
	look := func(m *tmuxT) string {
		return m.tmux("capture-pane", "-p", "-t", "t") + m.tmux("display-message", "-p", "-t", "t", "cursor #{cursor_x},#{cursor_y}")
	}
	same := func(what, shows string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			a, o := look(att), look(own)
			if a == o && strings.Contains(a, shows) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: shellctl attach shows\n%s\ntmux's own pane shows\n%s", what, a, o)
			}
			time.Sleep(100 * time.Millisecond) // tmux offers no wait on a pane's content
		}
	}
	same("after the attach", "line 0001")
	for _, m := range []*tmuxT{att, own} {
		m.tmux("send-keys", "-t", "t", "-l", "/line 0150")
		m.keys("Enter")
		m.keys("x")
	}
	same("after /line 0150 and x", "\nine 0150\n")
	att.keys("C-p", "C-q")
	att.waitText("detached from job " + id)
}

// TestAttachInputHeldBackNeverDropped: 10 MiB sent at once (a paste) into a
// pty job reading its terminal slowly all arrive: the client is held back
// while the job does not read (the runner's input queue is full), its
// bytes are never refused. (POST /input answers a full queue with an
// error; over attach that would lose the bytes.)
func TestAttachInputHeldBackNeverDropped(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "stty raw -echo; echo ready; sleep 1; head -c 10485760 | wc -c; sleep 30", Mode: "pty", Timeout: 5})
	if err != nil || !strings.Contains(res.Output, "ready") {
		t.Fatalf("run: %+v %v", res, err)
	}
	a := attachTo(t, s, res.JobID, client.AttachOptions{})
	chunk := bytes.Repeat([]byte("0123456789abcde\n"), 4096) // 64 KiB
	// More messages than the runner's input queue holds (64).
	for i := 0; i < 160; i++ {
		if err := a.conn.Input(ctx(t), chunk); err != nil {
			t.Fatal(err)
		}
	}
	a.waitFor("10485760", 0)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.ctl {
		if c.Type == "error" {
			t.Errorf("the server refused input: %+v", c)
		}
	}
}
