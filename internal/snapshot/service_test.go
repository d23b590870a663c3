package snapshot

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestTimeoutFromEnv(t *testing.T) {
	cases := []struct {
		val     string
		want    time.Duration
		wantErr bool
	}{
		{"", DefaultTimeout, false},
		{"10m", 10 * time.Minute, false},
		{"1.5s", 1500 * time.Millisecond, false},
		{"0", 0, true},
		{"-5m", 0, true},
		{"ten", 0, true},
		{"10", 0, true},
	}
	for _, c := range cases {
		got, err := TimeoutFromEnv(func(k string) string {
			if k != TimeoutEnv {
				t.Fatalf("read %s", k)
			}
			return c.val
		})
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("%q: %v, %v", c.val, got, err)
		}
		if err != nil && (!strings.Contains(err.Error(), TimeoutEnv) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.val))) {
			t.Errorf("%q: error %q does not name the variable and the value", c.val, err)
		}
	}
}

// TestBusy holds a save inside the walk and checks that both routes answer
// 409 at once.
func TestBusy(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "f"), "x", 0o644)
	entered, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	setHook(t, func(name string, r io.Reader) io.Reader {
		if once.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return r
	})
	_, srv, _ := newServer(t, Config{Home: home})
	done := make(chan int)
	go func() {
		resp, _, _ := saveRaw(t, srv, "")
		done <- resp.StatusCode
	}()
	<-entered
	start := time.Now()
	resp, body, _ := saveRaw(t, srv, "")
	if resp.StatusCode != 409 || errCode(t, body) != "snapshot_busy" {
		t.Errorf("second save: %d %s", resp.StatusCode, body)
	}
	resp, body = restoreRaw(t, srv, makeArchive(t, file("g", "y")))
	if resp.StatusCode != 409 || errCode(t, body) != "snapshot_busy" {
		t.Errorf("restore during save: %d %s", resp.StatusCode, body)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("409 took %s, want at once", el)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Errorf("first save: %d", code)
	}
	if resp, _, _ := saveRaw(t, srv, ""); resp.StatusCode != 200 {
		t.Errorf("save after the first ended: %d", resp.StatusCode)
	}
}

// gateFree reports whether a new operation would be admitted, with a
// restore of an empty-bodied request (answered 400 when admitted).
func gateFree(t *testing.T, svc *Service) bool {
	return !svc.busy.Load()
}

// stalledSave starts a save on a raw connection and never reads the answer.
func stalledSave(t *testing.T, srvURL string) net.Conn {
	t.Helper()
	u, _ := url.Parse(srvURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/snapshot/save HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\n\r\n", u.Host, testToken)
	return conn
}

func TestStalledSaveReleasesGateAfterDeadline(t *testing.T) {
	home := t.TempDir()
	// Far more than the socket buffers hold, and incompressible.
	writeRandom(t, filepath.Join(home, "big"), 96<<20)
	const timeout = 1500 * time.Millisecond
	svc, srv, _ := newServer(t, Config{Home: home, Timeout: timeout})
	start := time.Now()
	stalledSave(t, srv.URL)
	waitFor(t, 5*time.Second, "save admitted", func() bool { return svc.busy.Load() })
	el := waitFor(t, timeout+10*time.Second, "gate released", func() bool { return gateFree(t, svc) })
	el = time.Since(start)
	if el < timeout-100*time.Millisecond {
		t.Errorf("gate released after %s, before the deadline %s", el, timeout)
	}
	t.Logf("gate released %s after the stalled save began (deadline %s)", el, timeout)
	if resp, _, err := saveRaw(t, srv, `{"excludes":["big"]}`); err != nil || resp.StatusCode != 200 {
		t.Errorf("save after release: %v %v", resp.StatusCode, err)
	}
}

func TestStalledRestoreReleasesGateAfterDeadline(t *testing.T) {
	home := t.TempDir()
	const timeout = time.Second
	svc, srv, _ := newServer(t, Config{Home: home, Timeout: timeout})
	data := makeArchive(t, file("a", strings.Repeat("x", 1<<20)))
	u, _ := url.Parse(srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	// Announce the whole archive, send half, then stall.
	fmt.Fprintf(conn, "POST /v1/snapshot/restore HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", u.Host, testToken, len(data))
	conn.Write(data[:len(data)/2])
	waitFor(t, 5*time.Second, "restore admitted", func() bool { return svc.busy.Load() })
	waitFor(t, timeout+10*time.Second, "gate released", func() bool { return gateFree(t, svc) })
	if el := time.Since(start); el < timeout-100*time.Millisecond {
		t.Errorf("released after %s, before the deadline", el)
	}
	// The stalled peer got 500 restore_failed (if it still listens).
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 500 || errCode(t, b) != "restore_failed" {
			t.Errorf("stalled restore answered %d %s", resp.StatusCode, b)
		}
	}
}

func TestPeerCloseReleasesGateAtOnce(t *testing.T) {
	home := t.TempDir()
	writeRandom(t, filepath.Join(home, "big"), 96<<20)
	svc, srv, _ := newServer(t, Config{Home: home, Timeout: time.Hour})

	t.Run("save", func(t *testing.T) {
		conn := stalledSave(t, srv.URL)
		waitFor(t, 5*time.Second, "save admitted", func() bool { return svc.busy.Load() })
		buf := make([]byte, 64<<10)
		if _, err := io.ReadAtLeast(conn, buf, len(buf)); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		el := waitFor(t, 5*time.Second, "gate released", func() bool { return gateFree(t, svc) })
		t.Logf("released %s after the peer closed", el)
	})
	t.Run("restore", func(t *testing.T) {
		u, _ := url.Parse(srv.URL)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		data := makeArchive(t, file("a", strings.Repeat("x", 1<<20)))
		fmt.Fprintf(conn, "POST /v1/snapshot/restore HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", u.Host, testToken, len(data))
		conn.Write(data[:len(data)/2])
		waitFor(t, 5*time.Second, "restore admitted", func() bool { return svc.busy.Load() })
		conn.Close()
		el := waitFor(t, 5*time.Second, "gate released", func() bool { return gateFree(t, svc) })
		t.Logf("released %s after the peer closed", el)
	})
}

func TestRoutesNeedToken(t *testing.T) {
	// internal/api checks the token before our handlers; this checks that
	// the handlers compose with such a check (see newServer).
	home := t.TempDir()
	_, srv, conn := newServer(t, Config{Home: home})
	conn.Token = "wrong"
	if _, err := SaveToFile(context.Background(), conn, filepath.Join(t.TempDir(), "x"), nil, nil); err == nil {
		t.Error("save without the token succeeded")
	}
	if _, err := RestoreFromFile(context.Background(), conn, "/dev/null", nil); err == nil {
		t.Error("restore without the token succeeded")
	}
	_ = srv
}

func TestMethodNotAllowed(t *testing.T) {
	svc := NewService(Config{Home: t.TempDir()})
	for _, h := range []http.HandlerFunc{svc.HandleSave, svc.HandleRestore} {
		rec := newRecorder()
		h(rec, mustRequest(http.MethodGet, "/"))
		if rec.code != 405 {
			t.Errorf("GET answered %d", rec.code)
		}
	}
}

func TestMakeBenchHomeDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := MakeBenchHome(a, 2<<20); err != nil {
		t.Fatal(err)
	}
	if err := MakeBenchHome(b, 2<<20); err != nil {
		t.Fatal(err)
	}
	sa, sb := treeState(t, a), treeState(t, b)
	// mtimes differ between the two runs; compare the rest.
	strip := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if i := strings.Index(v, " mtime="); i >= 0 {
				v = v[:i]
			}
			out[k] = v
		}
		return out
	}
	diffStates(t, strip(sa), strip(sb))
	if len(sa) < 50 {
		t.Errorf("only %d entries", len(sa))
	}
}
