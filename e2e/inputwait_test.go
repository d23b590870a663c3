package e2e

// Input-wait (shared/spec/extended-api.md §4): the record's input_wait, the
// X-Shellctl-Input-Wait header on every JobResult of a pty job, and
// "return_on_input_wait": true on run, wait and input — told by the kernel,
// never guessed from silence.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

const inputWaitHeader = "X-Shellctl-Input-Wait"

// iwAnswer is one JobResult answer with its input-wait header.
type iwAnswer struct {
	client.JobResult
	header  string // "" when absent
	present bool
	at      time.Time // when the answer arrived
}

// post sends body to path and decodes a JobResult answer.
func (s *server) iwPost(t *testing.T, method, path string, body any) iwAnswer {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx(t), method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var a iwAnswer
	a.at = time.Now()
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, raw.String())
	}
	if err := json.Unmarshal(raw.Bytes(), &a.JobResult); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, raw.String())
	}
	vals := resp.Header.Values(inputWaitHeader)
	a.present = len(vals) > 0
	if a.present {
		if len(vals) != 1 || (vals[0] != "0" && vals[0] != "1") {
			t.Fatalf("%s %s: %s = %q, want exactly one \"0\" or \"1\"", method, path, inputWaitHeader, vals)
		}
		a.header = vals[0]
	}
	return a
}

func (s *server) iwRun(t *testing.T, body map[string]any) iwAnswer {
	t.Helper()
	return s.iwPost(t, "POST", "/v1/jobs/run", body)
}

func (s *server) iwWait(t *testing.T, id string, body map[string]any) iwAnswer {
	t.Helper()
	return s.iwPost(t, "POST", "/v1/jobs/"+id+"/wait", body)
}

func (s *server) iwInput(t *testing.T, id string, body map[string]any) iwAnswer {
	t.Helper()
	return s.iwPost(t, "POST", "/v1/jobs/"+id+"/input", body)
}

// recordInputWait is the record's input_wait (nil for null).
func (s *server) recordInputWait(t *testing.T, id string) *bool {
	t.Helper()
	st, raw, err := s.c.Do(ctx(t), "GET", "/v1/jobs/"+id+"/record", nil)
	if err != nil || st != 200 {
		t.Fatalf("record of %s = %d %s %v", id, st, raw, err)
	}
	var r struct {
		InputWait *bool `json:"input_wait"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r.InputWait
}

// TestInputWaitReaders: each kind of reader of the terminal is reported
// waiting, an answer asked to return on it comes with the prompt long
// before idle_flush_seconds, and an input answered returns at the next
// wait with what the program did with it.
func TestInputWaitReaders(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, tc := range []struct {
		name, script string
		prompt       string // in the first answer
		input        string
		after        string // in the answer to the input
		done         bool   // the input ends the job
	}{
		{"read", `printf 'Name? '; read x; echo "got:$x"`, "Name? ", "bob\n", "got:bob", true},
		{"python input", `python3 -c 'print("got:" + input("py> "))'`, "py> ", "ann\n", "got:ann", true},
		// cat answers each line and waits again: the second answer is
		// its next read, not the one that was already blocked.
		{"cat", `cat`, "", "hi there\n", "hi there\nhi there\n", false},
		{"sh -i", `PS1='sh> ' sh -i`, "sh> ", "echo x$((40+2))\n", "x42", false},
		{"bash read -p", `bash -c 'read -p "Pass: " x; echo "got:$x"'`, "Pass: ", "pw\n", "got:pw", true},
		{"bash -i (readline)", `PS1='bash> ' bash --norc --noprofile -i`, "bash> ", "echo y$((6*7))\n", "y42", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			a := s.iwRun(t, map[string]any{"script": tc.script, "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
			if a.Done || time.Since(start) > 15*time.Second {
				t.Fatalf("run answered after %v, done %v: %q", time.Since(start), a.Done, a.Output)
			}
			if a.header != "1" {
				t.Fatalf("run answered with %s %q (present %v), want 1: output %q", inputWaitHeader, a.header, a.present, a.Output)
			}
			if !strings.Contains(a.Output, tc.prompt) {
				later := s.iwWait(t, a.JobID, map[string]any{"offset": 0, "timeout": 0})
				time.Sleep(300 * time.Millisecond)
				late := s.iwWait(t, a.JobID, map[string]any{"offset": 0, "timeout": 0})
				t.Fatalf("the answer that came because the job waits (after %v) lacks its prompt %q: %q at offset %d; a look after: %q header %q; 300 ms later %q %q\n%s",
					a.at.Sub(start), tc.prompt, a.Output, a.Offset, later.Output, later.header, late.Output, late.header, procDump(s.getRecord(t, a.JobID).PID))
			}
			if w := s.recordInputWait(t, a.JobID); w == nil || !*w {
				t.Fatalf("record input_wait = %v, want true", w)
			}
			// A wait asked to return on input-wait answers at once.
			t0 := time.Now()
			w := s.iwWait(t, a.JobID, map[string]any{"offset": a.Offset, "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
			if d := time.Since(t0); d > 5*time.Second || w.header != "1" {
				t.Fatalf("wait on a waiting job answered after %v with header %q", d, w.header)
			}
			in := s.iwInput(t, a.JobID, map[string]any{"text": tc.input, "offset": w.Offset, "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
			// The answer comes once the program read the input and
			// waits again (or ended): not from the read that was blocked
			// when the input went in, so what the program did with the
			// input is in this very answer.
			out := in.Output
			if !strings.Contains(out, tc.after) {
				t.Fatalf("the answer to input %q came before the program answered it: %q (done %v, header %q), want %q",
					tc.input, out, in.Done, in.header, tc.after)
			}
			if tc.done {
				if !in.Done {
					in = s.iwWait(t, a.JobID, map[string]any{"offset": in.Offset, "timeout": 20})
				}
				if !in.Done || in.header != "0" {
					t.Fatalf("the job should have ended (done %v) with header 0 (%q)", in.Done, in.header)
				}
				return
			}
			if in.Done || in.header != "1" {
				t.Fatalf("after the input the job waits again: done %v header %q, output %q", in.Done, in.header, out)
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("took %v: an answer waited for idle_flush_seconds", time.Since(start))
			}
			if _, err := s.c.Terminate(ctx(t), a.JobID, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInputWaitNeverWhenBusy: silent but busy programs, and a program
// blocked reading something other than the terminal, are never reported
// waiting — looked at many times over their run, through the header of
// waits, input and tail and the record — and return_on_input_wait does
// not make their run answer early.
func TestInputWaitNeverWhenBusy(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	for _, tc := range []struct{ name, script string }{
		{"sleep", "sleep 5"},
		{"cpu loop", "while :; do :; done"},
		{"read from a pipe", "sleep 5 | cat"},
		{"python reads its own pipe", "python3 -c 'import os,time; r,w=os.pipe(); os.read(r,1)'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			a := s.iwRun(t, map[string]any{"script": tc.script, "timeout": 1.5, "idle_flush_seconds": 25, "return_on_input_wait": true})
			if d := time.Since(t0); d < 1400*time.Millisecond || a.Done {
				t.Fatalf("run answered after %v (done %v): return_on_input_wait answered early for a busy job", d, a.Done)
			}
			if a.header != "0" {
				t.Fatalf("run header %q, want 0", a.header)
			}
			looks := 0
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); looks++ {
				w := s.iwWait(t, a.JobID, map[string]any{"offset": 0, "timeout": 0})
				if w.header != "0" {
					t.Fatalf("look %d: wait header %q for %q", looks, w.header, tc.script)
				}
				if r := s.recordInputWait(t, a.JobID); r == nil || *r {
					t.Fatalf("look %d: record input_wait %v for %q", looks, r, tc.script)
				}
				st, raw, err := s.c.Do(ctx(t), "GET", "/v1/jobs/"+a.JobID+"/log/tail", nil)
				if err != nil || st != 200 {
					t.Fatalf("tail = %d %s %v", st, raw, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// An input the program does not read changes nothing.
			in := s.iwInput(t, a.JobID, map[string]any{"text": "x\n", "timeout": 0.5, "return_on_input_wait": true})
			if in.header != "0" {
				t.Fatalf("input header %q, want 0", in.header)
			}
			if _, err := s.c.Terminate(ctx(t), a.JobID, 0); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d looks, never waiting", tc.name, looks)
		})
	}
}

// TestInputWaitHeaderOnEveryJobResult: run, wait, input and tail carry
// the header for pty jobs (0 once done), never for stdio jobs.
func TestInputWaitHeaderOnEveryJobResult(t *testing.T) {
	s := startServer(t, serverOpts{})
	a := s.iwRun(t, map[string]any{"script": "read x; echo $x", "timeout": 10, "return_on_input_wait": true})
	if !a.present || a.header != "1" {
		t.Fatalf("pty run: header %q present %v", a.header, a.present)
	}
	w := s.iwWait(t, a.JobID, map[string]any{"offset": a.Offset, "timeout": 0})
	if w.header != "1" {
		t.Fatalf("pty wait: header %q", w.header)
	}
	tail := s.iwPost(t, "GET", "/v1/jobs/"+a.JobID+"/log/tail", nil)
	if tail.header != "1" {
		t.Fatalf("pty tail: header %q", tail.header)
	}
	in := s.iwInput(t, a.JobID, map[string]any{"text": "done\n", "timeout": 10})
	for !in.Done {
		in = s.iwWait(t, a.JobID, map[string]any{"offset": in.Offset, "timeout": 10})
	}
	if in.header != "0" {
		t.Fatalf("pty, done: header %q", in.header)
	}
	if tail := s.iwPost(t, "GET", "/v1/jobs/"+a.JobID+"/log/tail", nil); tail.header != "0" {
		t.Fatalf("pty tail, done: header %q", tail.header)
	}
	if w := s.recordInputWait(t, a.JobID); w == nil || *w {
		t.Fatalf("record of a finished pty job: input_wait %v, want false", w)
	}

	st := s.iwRun(t, map[string]any{"script": "read x; echo $x", "mode": "stdio", "timeout": 0.3, "return_on_input_wait": true})
	if st.present {
		t.Fatalf("stdio run: header %q present", st.header)
	}
	if w := s.iwWait(t, st.JobID, map[string]any{"offset": 0, "timeout": 10}); w.present {
		t.Fatalf("stdio wait: header present")
	}
	if tail := s.iwPost(t, "GET", "/v1/jobs/"+st.JobID+"/log/tail", nil); tail.present {
		t.Fatalf("stdio tail: header present")
	}
	if w := s.recordInputWait(t, st.JobID); w != nil {
		t.Fatalf("record of a stdio job: input_wait %v, want null", *w)
	}
}

// TestReturnOnInputWaitLatency: the answer of a run asked to return on
// input-wait comes within 50 ms of the moment the program starts to read
// (a timestamp the job writes just before it reads), while
// idle_flush_seconds is far longer; figures over the runs are logged, and
// what the runner's look at answer time costs.
func TestReturnOnInputWaitLatency(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := s.Home // where jobs may write
	const runs = 20
	var lat []time.Duration
	for i := range runs {
		ts := filepath.Join(dir, fmt.Sprintf("ts%d", i))
		// date writes the time, then the shell (already running) prints
		// the prompt and reads: the prompt is within microseconds of it.
		script := fmt.Sprintf(`date +%%s%%N > %s; printf 'ready> '; read x`, ts)
		a := s.iwRun(t, map[string]any{"script": script, "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
		if a.Done || a.header != "1" || !strings.Contains(a.Output, "ready> ") {
			t.Fatalf("run %d: done %v header %q output %q", i, a.Done, a.header, a.Output)
		}
		b, err := os.ReadFile(ts)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, a.at.Sub(time.Unix(0, ns)))
		s.c.Terminate(ctx(t), a.JobID, 0)
	}
	// What the look at answer time costs: waits that look once, on a pty
	// job that waits (the runner is asked) and on a stdio job (it is not).
	pty := s.iwRun(t, map[string]any{"script": "read x", "timeout": 10, "return_on_input_wait": true})
	stdio := s.iwRun(t, map[string]any{"script": "sleep 30", "mode": "stdio", "timeout": 0.1})
	mean := func(id string) time.Duration {
		const n = 200
		t0 := time.Now()
		for range n {
			s.iwWait(t, id, map[string]any{"offset": 0, "timeout": 0})
		}
		return time.Since(t0) / n
	}
	mean(pty.JobID) // warm
	mp, ms := mean(pty.JobID), mean(stdio.JobID)
	t.Logf("wait with timeout 0: %v on a waiting pty job (asks its runner), %v on a stdio job: the look costs about %v", mp, ms, mp-ms)
	s.c.Terminate(ctx(t), pty.JobID, 0)
	s.c.Terminate(ctx(t), stdio.JobID, 0)

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("return_on_input_wait latency over %d runs (prompt → answer at the client): p50 %v, p90 %v, max %v",
		runs, lat[runs/2], lat[runs*9/10], lat[runs-1])
	// The answer comes on the prompt, not on idle_flush_seconds (25 s):
	// the median within 50 ms (the bench measures it to the millisecond:
	// its row "input-wait, prompt to answer"), and every one far below the
	// idle flush. The bound on the slowest is loose on purpose: a load spike
	// of this shared machine (other test packages hold both CPUs) delays
	// any program, the job's own as well, by hundreds of milliseconds.
	if lat[runs/2] > 50*time.Millisecond || lat[runs-1] > 2*time.Second {
		t.Fatalf("median %v, slowest %v after the prompt; want the median within 50 ms and every answer within 2 s, far from the idle flush (all: %v)", lat[runs/2], lat[runs-1], lat)
	}
}

// procDump describes pid and its descendants from /proc (a failure's
// diagnostics).
func procDump(pid *int) string {
	if pid == nil {
		return "no pid"
	}
	var b strings.Builder
	var walk func(p int, depth int)
	walk = func(p int, depth int) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", p))
		fmt.Fprintf(&b, "%s%d stat %q syscall %q\n", strings.Repeat("  ", depth), p, strings.TrimSpace(string(st)), strings.TrimSpace(string(sc)))
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			c, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
			if i := bytes.LastIndexByte(cs, ')'); i > 0 {
				f := strings.Fields(string(cs[i+1:]))
				if len(f) > 1 && f[1] == strconv.Itoa(p) {
					walk(c, depth+1)
				}
			}
		}
	}
	walk(*pid, 0)
	return b.String()
}

// TestInputWaitAcrossServerRestart: a server that comes back finds the
// runner's state in its hello answer: the record says waiting, and a wait
// asked to return on it answers at once; the request field must be a
// boolean.
func TestInputWaitAcrossServerRestart(t *testing.T) {
	s := startServer(t, serverOpts{})
	a := s.iwRun(t, map[string]any{"script": "printf 'go? '; read x; echo got:$x", "timeout": 10, "idle_flush_seconds": 25, "return_on_input_wait": true})
	if a.header != "1" {
		t.Fatalf("run header %q", a.header)
	}
	s.restart(syscall.SIGKILL)
	if w := s.recordInputWait(t, a.JobID); w == nil || !*w {
		t.Fatalf("after the restart the record's input_wait is %v, want true", w)
	}
	t0 := time.Now()
	w := s.iwWait(t, a.JobID, map[string]any{"offset": a.Offset, "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
	if d := time.Since(t0); d > 5*time.Second || w.header != "1" {
		t.Fatalf("wait after the restart answered after %v with header %q", d, w.header)
	}
	in := s.iwInput(t, a.JobID, map[string]any{"text": "yes\n", "offset": w.Offset, "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
	if !strings.Contains(in.Output, "got:yes") {
		t.Fatalf("input after the restart: %q", in.Output)
	}

	// A value that is not a boolean is refused, naming the field.
	req, _ := http.NewRequest("POST", s.URL+"/v1/jobs/run", strings.NewReader(`{"script":"true","return_on_input_wait":"yes"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "return_on_input_wait") {
		t.Fatalf("a string return_on_input_wait = %d %s, want 400 naming the field", resp.StatusCode, body)
	}
}

// TestInputWaitAfterSilence: a read that starts after seconds of silence,
// once a silent command ended (no output, no event of the runner's own),
// is still seen: the end of a process of the terminal's foreground group
// is an event.
func TestInputWaitAfterSilence(t *testing.T) {
	s := startServer(t, serverOpts{})
	t0 := time.Now()
	a := s.iwRun(t, map[string]any{"script": "sleep 2.5; read x", "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
	d := time.Since(t0)
	if a.header != "1" || a.Done || d > 5*time.Second || d < 2400*time.Millisecond {
		t.Fatalf("run answered after %v with header %q (done %v), want about 2.5 s and 1", d, a.header, a.Done)
	}
	t.Logf("a read after 2.5 s of silence was seen %v after the run", d)
	s.c.Terminate(ctx(t), a.JobID, 0)
}

// TestInputWaitNotAnsweredByAPartialLine: a reader that was blocked when
// an input went in has not answered it while it sleeps on: after part of
// a line ("ab", no newline) the program in its canonical read is not
// counted waiting (the answer comes on silence, header 0), and once the
// line is complete it reads, answers and waits again (header 1).
func TestInputWaitNotAnsweredByAPartialLine(t *testing.T) {
	s := startServer(t, serverOpts{})
	a := s.iwRun(t, map[string]any{"script": `read x; echo "got:$x"; read y`, "timeout": 20, "return_on_input_wait": true})
	if a.Done || a.header != "1" {
		t.Fatalf("run: done %v header %q output %q", a.Done, a.header, a.Output)
	}
	defer s.c.Terminate(ctx(t), a.JobID, 0)
	part := s.iwInput(t, a.JobID, map[string]any{"text": "ab", "timeout": 3, "idle_flush_seconds": 0.5, "return_on_input_wait": true})
	if part.header != "0" {
		t.Fatalf("after a partial line the job counts as waiting (header %q, output %q): its reader has not read it", part.header, part.Output)
	}
	if w := s.recordInputWait(t, a.JobID); w == nil || *w {
		t.Fatalf("record's input_wait after a partial line: %v, want false", w)
	}
	rest := s.iwInput(t, a.JobID, map[string]any{"text": "c\n", "timeout": 20, "idle_flush_seconds": 25, "return_on_input_wait": true})
	if rest.header != "1" || !strings.Contains(rest.Output, "got:abc") {
		t.Fatalf("after the line's end: header %q output %q, want the answer and waiting again", rest.header, rest.Output)
	}
}
