package e2e

// The live output stream, GET /v1/jobs/{id}/stream (spec/extended-api.md
// §1), on real servers and jobs.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// streamClient is a client without the harness's whole-request timeout
// (a stream is one long answer).
func (s *server) streamClient() *client.Client {
	return &client.Client{BaseURL: s.URL, Token: s.Token, HTTP: &http.Client{}}
}

// jobFile reads a job's file in the state dir.
func (s *server) jobFile(t *testing.T, id, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.StateDir, "jobs", id, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readStream reads a stream to its end: the bytes, the events' types in
// order (runs of one type as one, input_wait left out: see
// TestStreamInputWait) and the end event.
func readStream(t *testing.T, st *client.Stream) ([]byte, []string, *client.StreamEvent) {
	t.Helper()
	var got bytes.Buffer
	var types []string
	var end *client.StreamEvent
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v (after %d bytes)", err, got.Len())
		}
		if ev.Type != client.EventInputWait && (len(types) == 0 || types[len(types)-1] != ev.Type) {
			types = append(types, ev.Type)
		}
		switch ev.Type {
		case client.EventOutput:
			got.Write(ev.Bytes)
		case client.EventEnd:
			end = ev
		}
	}
	if end == nil || types[len(types)-1] != client.EventEnd {
		t.Fatalf("the stream ended without an end event last: %v", types)
	}
	return got.Bytes(), types, end
}

// TestStreamReassembles: a stream read from 0 and one resumed with
// Last-Event-ID while the job runs both give output.log byte for byte, with
// end last: a pty job printing text, and a stdio job printing bytes that
// are not UTF-8 among text.
func TestStreamReassembles(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{token: "tok"})
	for _, c := range []struct{ mode, script string }{
		{"pty", `for i in $(seq 1 300); do echo "line $i ü 世界 $(printf '%*s' $((i % 40)) '')x"; sleep 0.004; done; exit 3`},
		{"stdio", `for i in $(seq 1 300); do printf '\377\376ok\n'; echo "text $i é 世"; printf '\344\270'; sleep 0.004; printf '\226\n'; done; exit 3`},
	} {
		t.Run(c.mode, func(t *testing.T) {
			res, err := s.c.Run(ctx(t), client.RunRequest{Script: c.script, Mode: c.mode, Timeout: 0.01})
			if err != nil {
				t.Fatal(err)
			}
			sc := s.streamClient()
			a := sc.Stream(ctx(t), res.JobID, client.StreamOptions{})
			// Read some of it, then resume a second stream where the first is.
			var head bytes.Buffer
			for head.Len() < 2000 {
				ev, err := a.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ev.Type == client.EventEnd {
					t.Fatal("the job ended before the test resumed a stream mid-job")
				}
				head.Write(ev.Bytes)
			}
			mid := a.Offset()
			if stv, err := s.c.Status(ctx(t), res.JobID); err != nil || stv.Done {
				t.Fatalf("job done (%v) before the resumed stream started: make it longer", err)
			}
			b := sc.Stream(ctx(t), res.JobID, client.StreamOptions{Offset: mid, Resume: true})
			// Connected while the job runs: its first event says so.
			if ev, err := b.Next(); err != nil || ev.Type != client.EventState || (ev.Status != "running" && ev.Status != "starting") {
				t.Fatalf("resumed stream's first event %+v, %v: want state running", ev, err)
			}
			tailA, typesA, endA := readStream(t, a)
			gotB, typesB, endB := readStream(t, b)
			file := s.jobFile(t, res.JobID, "output.log")
			if gotA := append(head.Bytes(), tailA...); !bytes.Equal(gotA, file) {
				t.Fatalf("stream from 0: %d bytes, output.log %d: they differ", len(gotA), len(file))
			}
			if !bytes.Equal(gotB, file[mid:]) {
				t.Fatalf("stream resumed at %d: %d bytes, want output.log[%d:] (%d)", mid, len(gotB), mid, len(file)-int(mid))
			}
			for _, e := range []*client.StreamEvent{endA, endB} {
				if e.Status != "exited" || e.ExitCode == nil || *e.ExitCode != 3 || e.Reason == nil || *e.Reason != "exited" || e.Offset != int64(len(file)) || e.Signal != nil {
					t.Fatalf("end event %s", e.Data)
				}
			}
			if typesB[0] != client.EventOutput || !slices.Contains(typesB, client.EventState) {
				t.Fatalf("resumed stream's events after its first %v: want output, and the state change at the end", typesB)
			}
			if c.mode == "stdio" && !bytes.Contains(file, []byte("\377\376ok")) {
				t.Fatalf("the stdio job's output.log lacks its invalid bytes")
			}
			t.Logf("%s: %d bytes, resumed at %d; events %v / %v", c.mode, len(file), mid, typesA, typesB)
		})
	}
}

// rawStream reads a whole stream answer (the server must close it).
func rawStream(t *testing.T, s *server, id, query string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, s.URL+"/v1/jobs/"+id+"/stream"+query, nil)
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestStreamManyReaders: readers of one job at once, and readers after its
// end, all get the same bytes; a stream of a finished job sends what is
// left from its offset, then end, and closes.
func TestStreamManyReaders(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: `for i in $(seq 1 2000); do echo "row $i"; done; sleep 0.5; seq 1 20000`, Mode: "stdio", Timeout: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	sc := s.streamClient()
	const n = 6
	got := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var buf bytes.Buffer
			if _, err := sc.Stream(ctx(t), res.JobID, client.StreamOptions{}).Copy(&buf); err != nil {
				t.Error(err)
			}
			got[i] = buf.Bytes()
		})
	}
	wg.Wait()
	file := s.jobFile(t, res.JobID, "output.log")
	for i := range n {
		if !bytes.Equal(got[i], file) {
			t.Fatalf("reader %d got %d bytes, output.log has %d", i, len(got[i]), len(file))
		}
	}
	// After the end: the same bytes, from 0 and from an offset.
	var after bytes.Buffer
	if _, err := sc.Stream(ctx(t), res.JobID, client.StreamOptions{}).Copy(&after); err != nil || !bytes.Equal(after.Bytes(), file) {
		t.Fatalf("reader after the end: %d bytes, %v", after.Len(), err)
	}
	code, body := rawStream(t, s, res.JobID, "?offset=10", map[string]string{"Last-Event-ID": fmt.Sprint(len(file) - 6)})
	if code != 200 || !strings.HasPrefix(body, "event: state\ndata: {\"status\":\"exited\"") {
		t.Fatalf("finished stream: %d %q", code, body[:min(len(body), 200)])
	}
	wantLast := fmt.Sprintf("event: output\nid: %d\ndata: {\"offset\":%d,\"text\":\"20000\\n\"}\n\nevent: end\ndata: {\"status\":\"exited\",\"exit_code\":0,\"signal\":null,\"reason\":\"exited\",\"offset\":%d}\n\n", len(file), len(file)-6, len(file))
	if !strings.HasSuffix(body, wantLast) || strings.Count(body, "event: output") != 1 {
		t.Fatalf("finished stream with Last-Event-ID %d (over offset=10): got %q, want it to end %q", len(file)-6, body, wantLast)
	}
}

// TestStreamErrors: the stream's refusals use the API's error envelope.
func TestStreamErrors(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	pty, _ := s.runDone(t, client.RunRequest{Script: "echo hi", Mode: "pty"})
	for _, c := range []struct {
		id, query string
		hdr       map[string]string
		status    int
		code      string
	}{
		{"0123456789abcdef", "", nil, 404, "job_not_found"},
		{pty.JobID, "?offset=x", nil, 400, "invalid_offset"},
		{pty.JobID, "?offset=-1", nil, 400, "invalid_offset"},
		{pty.JobID, "?offset=100000", nil, 400, "invalid_offset"},
		{pty.JobID, "", map[string]string{"Last-Event-ID": "junk"}, 400, "invalid_offset"},
		{pty.JobID, "?channel=stderr", nil, 409, "channel_unsupported"},
		{pty.JobID, "?channel=both", nil, 422, "validation_error"},
	} {
		code, body := rawStream(t, s, c.id, c.query, c.hdr)
		var env struct {
			Error struct{ Code, Message string }
		}
		if code != c.status || json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != c.code || env.Error.Message == "" {
			t.Errorf("stream %s%s %v: %d %s; want %d %s", c.id, c.query, c.hdr, code, body, c.status, c.code)
		}
	}
	s.Token = ""
	if code, _ := rawStream(t, s, pty.JobID, "", nil); code != 401 {
		t.Errorf("stream without the token: %d, want 401", code)
	}
}

// TestStreamStderr: the stderr channel of a stdio job is stderr.log byte
// for byte, and its growth reaches the stream while the job runs (the
// runner announces it as it does output.log's).
func TestStreamStderr(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: `echo out; printf 'first\377\n' >&2; sleep 4; for i in $(seq 1 500); do echo "err $i" >&2; printf '\376' >&2; done`, Mode: "stdio", Timeout: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	sc := s.streamClient()
	st := sc.Stream(ctx(t), res.JobID, client.StreamOptions{Channel: "stderr"})
	var got bytes.Buffer
	start := time.Now()
	for got.String() != "first\377\n" {
		ev, err := st.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == client.EventEnd {
			t.Fatalf("end before the job's sleep ended: %s", ev.Data)
		}
		got.Write(ev.Bytes)
		if !strings.HasPrefix("first\377\n", got.String()) {
			t.Fatalf("stderr stream got %q… (%d bytes) at once: the job's first write was not streamed while the job ran", got.Bytes()[:min(got.Len(), 40)], got.Len())
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the first stderr write took %v to reach the stream (the job sleeps 4 s after it)", d)
	}
	rest, _, end := readStream(t, st)
	got.Write(rest)
	file := s.jobFile(t, res.JobID, "stderr.log")
	if !bytes.Equal(got.Bytes(), file) || end.Offset != int64(len(file)) {
		t.Fatalf("stderr stream: %q, end %s; stderr.log %q", got.Bytes(), end.Data, file)
	}
}

// freePort finds a loopback port for a server that must keep its address
// across a restart.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestStreamAcrossRestart: the server restarts while a stream reads a
// running job; the client reconnects with Last-Event-ID and misses nothing.
func TestStreamAcrossRestart(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{token: "tok", args: []string{"--listen", freePort(t)}})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: `for i in $(seq 1 80); do echo "line $i"; sleep 0.05; done`, Mode: "pty", Timeout: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	st := s.streamClient().Stream(ctx(t), res.JobID, client.StreamOptions{})
	var got bytes.Buffer
	for !bytes.Contains(got.Bytes(), []byte("line 10\n")) {
		ev, err := st.Next()
		if err != nil {
			t.Fatal(err)
		}
		got.Write(ev.Bytes)
	}
	before := st.Offset()
	s.restart(syscall.SIGTERM)
	rest, _, end := readStream(t, st)
	got.Write(rest)
	file := s.jobFile(t, res.JobID, "output.log")
	if !bytes.Equal(got.Bytes(), file) || st.Reconnects < 1 {
		t.Fatalf("across the restart (at %d): %d bytes after %d reconnects; output.log %d", before, got.Len(), st.Reconnects, len(file))
	}
	if !bytes.Contains(file, []byte("line 80")) || end.Status != "exited" {
		t.Fatalf("the job did not finish as expected: end %s", end.Data)
	}
	t.Logf("restart at byte %d of %d, %d reconnects", before, len(file), st.Reconnects)
}

// vmRSS is the VmRSS of pid in KiB.
func vmRSS(t *testing.T, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var n int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &n)
			return n
		}
	}
	return 0
}

// jobMillis is how long the job ran by its record.
func jobMillis(t *testing.T, s *server, id string) time.Duration {
	_, raw, err := s.c.Do(ctx(t), http.MethodGet, "/v1/jobs/"+id+"/record", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ StartedAt, EndedAt time.Time }
	var r struct {
		S string `json:"started_at"`
		E string `json:"ended_at"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	rec.StartedAt, _ = time.Parse(time.RFC3339Nano, r.S)
	rec.EndedAt, _ = time.Parse(time.RFC3339Nano, r.E)
	return rec.EndedAt.Sub(rec.StartedAt)
}

// TestStreamSlowReader: a reader that stops reading for 10 s while the job
// prints 200 MiB neither slows the job nor grows the server's memory.
func TestStreamSlowReader(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 400 MiB")
	}
	s := startServer(t, serverOpts{token: "tok"})
	pid := s.cmd.Process.Pid
	const script = `sleep 0.3; head -c 209715200 /dev/zero | tr '\0' 'a'; echo done`
	// RSS sampled while the job runs: a test's own look, not the job's path.
	peak := func(stop <-chan struct{}) <-chan int64 {
		out := make(chan int64, 1)
		go func() {
			var m int64
			tk := time.NewTicker(50 * time.Millisecond)
			defer tk.Stop()
			for {
				m = max(m, vmRSS(t, pid))
				select {
				case <-stop:
					out <- m
					return
				case <-tk.C:
				}
			}
		}()
		return out
	}
	// The same job with no reader: the floor.
	stop := make(chan struct{})
	pk := peak(stop)
	bare, _ := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Timeout: 60})
	close(stop)
	bareRSS := <-pk
	bareTime := jobMillis(t, s, bare.JobID)

	stop = make(chan struct{})
	pk = peak(stop)
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Mode: "stdio", Timeout: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	// A reader that takes the first event, then reads nothing for 10 s.
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, s.URL+"/v1/jobs/"+res.JobID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 4096)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second) // the reader's stall is the test's, not the job's
	st, err := s.c.Status(ctx(t), res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	slowRSS := <-pk
	slowTime := jobMillis(t, s, res.JobID)
	t.Logf("200 MiB job: %v with no reader, %v with a reader stalled 10 s; server VmRSS peak %d KiB vs %d KiB", bareTime, slowTime, bareRSS, slowRSS)
	if !st.Done {
		t.Fatalf("the job is not done 10 s into the stall (it took %v with no reader): the reader slowed it", bareTime)
	}
	if slowTime > bareTime*3/2+500*time.Millisecond {
		t.Errorf("the job took %v with a stalled reader, %v without", slowTime, bareTime)
	}
	if slowRSS-bareRSS > 6<<10 {
		t.Errorf("server VmRSS peaked at %d KiB with a stalled reader, %d KiB without: +%d KiB", slowRSS, bareRSS, slowRSS-bareRSS)
	}
	// The stalled reader still gets every byte once it reads again.
	n, err := io.Copy(io.Discard, br)
	if err != nil {
		t.Fatal(err)
	}
	if n < 200<<20 {
		t.Fatalf("the stalled reader got %d bytes of events after the stall, want more than 200 MiB", n)
	}
}

// TestStreamInputWait: a pty job's stream says when the job waits for
// terminal input — after the prompt's bytes — and when it no longer does.
func TestStreamInputWait(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok"})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: `printf 'name? '; read x; echo "got $x"`, Mode: "pty", Timeout: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	st := s.streamClient().Stream(ctx(t), res.JobID, client.StreamOptions{})
	var got bytes.Buffer
	var waits []bool
	var atWait string
	sent := false
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case client.EventOutput:
			got.Write(ev.Bytes)
		case client.EventInputWait:
			waits = append(waits, ev.Waiting)
			if ev.Waiting && !sent {
				atWait = got.String()
				sent = true
				if _, err := s.c.Input(ctx(t), res.JobID, "bob\n", client.WaitRequest{Offset: 0, Timeout: f64(0)}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if !strings.Contains(atWait, "name? ") {
		t.Fatalf("input_wait true came with %q of output: the prompt must come first", atWait)
	}
	if len(waits) < 2 || waits[len(waits)-1] || !slices.Contains(waits, true) {
		t.Fatalf("input_wait events %v: want false (at connect), true at the prompt, false after", waits)
	}
	if !strings.Contains(got.String(), "got bob") || !bytes.Equal(got.Bytes(), s.jobFile(t, res.JobID, "output.log")) {
		t.Fatalf("output %q", got.String())
	}
}
