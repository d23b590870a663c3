package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/screen"
	"github.com/shellctl/shellctl/internal/screen/emu"
)

// stuckScreen starts "screen processes" that never read nor answer, as
// a stopped one would.
func stuckScreen(tb testing.TB) screenStarter { return fakeScreen(tb, nil, 0) }

func withProcTimeout(t *testing.T, d time.Duration) {
	old := screenProcTimeout
	screenProcTimeout = d
	t.Cleanup(func() { screenProcTimeout = old })
}

// TestLiveTermStuckProcess: a screen process that stops reading (its
// pipe full) or answering is given up after screenProcTimeout, and the
// screen says why; the writes never block past the bound.
func TestLiveTermStuckProcess(t *testing.T) {
	withProcTimeout(t, 200*time.Millisecond)
	t.Run("writes", func(t *testing.T) {
		lt := newLiveTerm(80, 24, stuckScreen(t))
		t0 := time.Now()
		lt.Write([]byte("\x1b[2J")) // warm: the process is started
		for i := 0; i < 64; i++ {   // 4 MiB: far past a pipe's capacity
			lt.Write([]byte(strings.Repeat("x", 64<<10)))
		}
		if el := time.Since(t0); el > 5*time.Second {
			t.Fatalf("writes to a stuck screen process took %v", el)
		}
		_, why := lt.Snapshot(0)
		if !strings.HasPrefix(why, screenUnavailable) || !strings.Contains(why, "made no progress") {
			t.Fatalf("screen after a stuck process: %q", why)
		}
	})
	t.Run("answer", func(t *testing.T) {
		lt := newLiveTerm(80, 24, stuckScreen(t))
		lt.Write([]byte("\x1b[2J"))
		t0 := time.Now()
		_, why := lt.Snapshot(0)
		if el := time.Since(t0); el > 5*time.Second {
			t.Fatalf("a screen request to a stuck process took %v", el)
		}
		if !strings.HasPrefix(why, screenUnavailable) || !strings.Contains(why, "made no progress") {
			t.Fatalf("screen after no answer: %q", why)
		}
		if lt.AppCursor() {
			t.Fatal("app cursor from a broken screen")
		}
	})
}

// TestLiveTermOtherBuild: a screen process of another protocol refuses,
// and the screen says what to install.
func TestLiveTermOtherBuild(t *testing.T) {
	lt := newLiveTerm(80, 24, fakeScreen(t, emu.Serve, screen.Protocol+1))
	defer lt.Close()
	lt.Write([]byte("\x1b[2Jdrawn"))
	_, why := lt.Snapshot(0)
	if !strings.HasPrefix(why, screenUnavailable) || !strings.Contains(why, "screen protocol") || !strings.Contains(why, "install the shellctl-screen") {
		t.Fatalf("screen from another build: %q", why)
	}
}

// TestLiveTermColdThenWarm: plain lines stay in the runner; the first
// sequence beyond them starts the screen process, which is fed what was
// kept, so the screen is the same as one emulated from the start.
func TestLiveTermColdThenWarm(t *testing.T) {
	started := 0
	inProc := inProcScreen(t)
	lt := newLiveTerm(20, 5, func(c, r int) (*screenConn, error) { started++; return inProc(c, r) })
	defer lt.Close()
	lt.Write([]byte("one\r\ntwo\r\n"))
	if started != 0 || lt.Emulating() {
		t.Fatal("plain lines started a screen process")
	}
	lt.Write([]byte("\x1b[1;5Hx\x1b[?1h"))
	if started != 1 {
		t.Fatalf("%d screen processes started, want 1", started)
	}
	b, why := lt.Snapshot(0)
	if why != "" || !strings.Contains(string(b), `"lines":["one x","two","","",""]`) {
		t.Fatalf("warm screen %s %q", b, why)
	}
	if !lt.AppCursor() {
		t.Fatal("DECCKM set in the screen process, not reported")
	}
	lt.Resize(10, 3)
	b, _ = lt.Snapshot(0)
	if !strings.Contains(string(b), `"cols":10,"rows":3`) {
		t.Fatalf("after resize %s", b)
	}
}

// TestLiveTermLinesThenWarm: a flood of plain lines scrolls through the
// runner's screen.Lines, no screen process started, and its screen and
// scrollback answer from there; the first sequence beyond plain lines
// starts the process, fed the lines' seed, so the screen is the one an
// emulator fed every byte shows.
func TestLiveTermLinesThenWarm(t *testing.T) {
	started := 0
	inProc := inProcScreen(t)
	lt := newLiveTerm(20, 5, func(c, r int) (*screenConn, error) { started++; return inProc(c, r) })
	defer lt.Close()
	ref := emu.New(20, 5)
	defer ref.Close()
	write := func(p string) {
		lt.Write([]byte(p))
		_, _ = ref.Write([]byte(p))
	}
	var flood strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&flood, "\x1b[3%dmline %d\x1b[m\r\n", i%8, i)
	}
	write(flood.String())
	write("prompt$ ")
	if started != 0 || lt.Emulating() {
		t.Fatalf("a flood of plain lines started %d screen processes", started)
	}
	want := func(sb int) string {
		b, err := json.Marshal(ref.Snapshot(sb))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, sb := range []int{0, 2, screen.ScrollbackLines} {
		if b, why := lt.Snapshot(sb); why != "" || string(b) != want(sb) {
			t.Fatalf("lines screen, scrollback %d: %q\n%.300s\nwant\n%.300s", sb, why, b, want(sb))
		}
	}
	if started != 0 {
		t.Fatal("a snapshot of plain lines started a screen process")
	}
	write("\x1b[1;1Htop")
	if started != 1 || !lt.Emulating() {
		t.Fatalf("%d screen processes started after a cursor move, want 1", started)
	}
	for _, sb := range []int{0, screen.ScrollbackLines} {
		if b, why := lt.Snapshot(sb); why != "" || string(b) != want(sb) {
			t.Fatalf("warm screen, scrollback %d: %q\n%.300s\nwant\n%.300s", sb, why, b, want(sb))
		}
	}
}

// The cold screen's JSON is what encoding/json writes for the snapshot.
func TestAppendSnapshotIsEncodingJSON(t *testing.T) {
	sb := []string{"old", `q"<&>`, ""}
	empty := []string{}
	for _, s := range []screen.Snapshot{
		{Cols: 80, Rows: 2, Cursor: screen.Cursor{Row: 1, Col: 3, Visible: true}, Lines: []string{"hi", ""}},
		{Cols: 3, Rows: 1, AltScreen: true, Title: "t\u2028\xff", Lines: []string{"é\x01"}, Scrollback: &sb},
		{Cols: 1, Rows: 1, Lines: nil, Scrollback: &empty},
	} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSnapshot(nil, s); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// TestLiveTermRefusesAnAnswerOfAnotherShape: a screen answer that is not
// one compact JSON value (pretty-printed here: its line ends would split
// the runner's control message) makes the screen unavailable instead.
func TestLiveTermRefusesAnAnswerOfAnotherShape(t *testing.T) {
	pretty := func(in io.Reader, out io.Writer) error {
		var buf []byte
		for {
			k, _, b, err := screen.ReadFrame(in, buf, screen.MaxFrame)
			buf = b
			if err != nil {
				return err
			}
			if k == screen.FrameSnapshot {
				out.Write(screen.AppendFrame(nil, screen.FrameSnapshot, []byte("{\n  \"cols\": 80\n}")))
			}
		}
	}
	lt := newLiveTerm(80, 24, fakeScreen(t, pretty, screen.Protocol))
	defer lt.Close()
	lt.Write([]byte("\x1b[2J"))
	b, why := lt.Snapshot(0)
	if b != nil || !strings.HasPrefix(why, screenUnavailable) || !strings.Contains(why, "not one compact JSON value") {
		t.Fatalf("pretty answer: %q %q", b, why)
	}
}

// TestKeysNotTypedOnABrokenScreen: keys are not typed when the screen
// cannot show what they did (its process failed): a client that retries
// on the 409 does not type them twice.
func TestKeysNotTypedOnABrokenScreen(t *testing.T) {
	withProcTimeout(t, 100*time.Millisecond)
	r := &Runner{spec: &Spec{Mode: "pty", Cols: 80, Rows: 24}, inputCh: make(chan termInput, inputQueue), screenStart: stuckScreen(t)}
	f, _ := r.screenFeed()
	defer f.close()
	f.put([]byte("\x1b[2J"))
	if _, why := r.screenOf(0); !strings.HasPrefix(why, screenUnavailable) {
		t.Fatalf("the stuck screen answered: %q", why)
	}
	ack := r.keys(&proto.Msg{T: proto.TKeys, ID: 1, Keys: []string{"a", "Enter"}})
	if !strings.HasPrefix(ack.Err, screenUnavailable) {
		t.Fatalf("keys on a broken screen: %+v", ack)
	}
	if n := len(r.inputCh); n != 0 {
		t.Fatalf("%d inputs typed on a broken screen", n)
	}
}
