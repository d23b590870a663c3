package e2e

// Limits of issue 3: each limit ends the job through the ladder with its
// recorded reason, or refuses the request.

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/runner"
)

func TestLimitMaxJobRuntime(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--max-job-runtime", "1"}})
	for _, mode := range fxModes {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			res, dir := fxStart(t, s, mode, `echo $$ > pid; echo started; sleep 60`, 15)
			pid := fxReadPID(t, filepath.Join(dir, "pid"))
			if !res.Done {
				res, _ = fxFollow(t, s, res.JobID, res.Offset)
			}
			el := time.Since(start)
			t.Logf("ended by the runtime limit after %v: %s %s", el.Round(time.Millisecond), res.Status, fxCode(res.ExitCode))
			if res.Status != "terminated" || res.ExitCode == nil || *res.ExitCode <= 128 {
				t.Errorf("end = %s %s, want terminated by a signal", res.Status, fxCode(res.ExitCode))
			}
			if el < 900*time.Millisecond || el > 4*time.Second {
				t.Errorf("a 1 s runtime limit ended the job after %v", el)
			}
			fxWantReason(t, s, res.JobID, runner.ReasonMaxRuntime)
			fxAllGone(t, "after the runtime limit", dir, pid)
		})
	}
	// A job within the limit is untouched.
	res, _ := s.runDone(t, client.RunRequest{Script: "sleep 0.2; exit 4", Mode: "stdio"})
	if res.Status != "exited" || code(res) != 4 {
		t.Errorf("short job = %s %d, want exited 4", res.Status, code(res))
	}
}

func TestLimitMaxOutputBytes(t *testing.T) {
	const limit = 1 << 20
	s := startServer(t, serverOpts{args: []string{"--max-output-bytes", "1048576"}})
	for _, mode := range fxModes {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			res, dir := fxStart(t, s, mode, `echo $$ > pid; yes`, 0.1)
			pid := fxReadPID(t, filepath.Join(dir, "pid"))
			last, out := fxFollow(t, s, res.JobID, res.Offset)
			el := time.Since(start)
			fi, err := os.Stat(last.OutputPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("ended by the output limit after %v: %s %s, output.log %d bytes", el.Round(time.Millisecond), last.Status, fxCode(last.ExitCode), fi.Size())
			if last.Status != "terminated" || last.ExitCode == nil {
				t.Errorf("end = %s %s, want terminated", last.Status, fxCode(last.ExitCode))
			}
			// The runner cuts the write that crosses the limit: no slack.
			if fi.Size() > limit || fi.Size() < limit/2 {
				t.Errorf("output.log is %d bytes with a limit of %d", fi.Size(), limit)
			}
			if got := int64(len(res.Output) + len(out)); got != fi.Size() {
				t.Errorf("client read %d bytes of %d", got, fi.Size())
			}
			fxWantReason(t, s, res.JobID, runner.ReasonMaxOutput)
			fxAllGone(t, "after the output limit", dir, pid)
		})
	}
}

func TestLimitMaxRunningJobs(t *testing.T) {
	s := startServer(t, serverOpts{args: []string{"--max-running-jobs", "2"}})
	c := fxCtx(t, time.Minute)
	var ids []string
	for i := 0; i < 2; i++ {
		r, err := s.c.Run(c, client.RunRequest{Script: "sleep 60", Mode: fxModes[i], Timeout: 0.1})
		if err != nil || r.Done { // starting or running
			t.Fatalf("run %d: %+v %v", i, r, err)
		}
		ids = append(ids, r.JobID)
	}
	_, err := s.c.Run(c, client.RunRequest{Script: "echo third", Timeout: 0.1})
	if ae, ok := err.(*client.Error); !ok || ae.Status != 429 || ae.Code != "too_many_jobs" {
		t.Fatalf("third run: %v, want 429 too_many_jobs", err)
	}
	// The refused run left nothing behind.
	if list, _ := s.c.List(c, "", 200); len(list) != 2 {
		t.Errorf("jobs listed after the refusal: %+v", list)
	}
	// A slot frees when a job ends.
	if _, err := s.c.Terminate(c, ids[0], 0); err != nil {
		t.Fatal(err)
	}
	res, out := s.runDone(t, client.RunRequest{Script: "echo third"})
	if res.Status != "exited" || out != "third\n" {
		t.Errorf("run after a slot freed = %s %q", res.Status, out)
	}
}

// Body limits not covered in jobs_test.go: the other-JSON limit on
// terminate, and bodies just under their limits are accepted.
func TestLimitRequestBodies(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := fxCtx(t, time.Minute)
	running, dir := fxStart(t, s, "pty", `stty -echo; cat > got`, 0.2)

	st, raw, err := s.c.Do(c, "POST", "/v1/jobs/"+running.JobID+"/terminate", map[string]any{"grace_seconds": 0, "pad": strings.Repeat("y", 65<<10)})
	if err != nil || st != 413 || !strings.Contains(string(raw), `"request_too_large"`) {
		t.Errorf("terminate with a 65 KiB body = %d %s %v, want 413 request_too_large", st, raw, err)
	}
	if v, _ := s.c.Status(c, running.JobID); v.Status != "running" {
		t.Errorf("refused terminate ended the job: %+v", v)
	}

	// Script of exactly 1 MiB in a body just under 2 MiB (the limits of
	// old, now far below --max-request-bytes: still accepted).
	script := "echo ok\n" + strings.Repeat("#"+strings.Repeat("x", 62)+"\n", (1<<20-8)/64)
	script += strings.Repeat("#", 1<<20-len(script))
	st, raw, err = s.c.Do(c, "POST", "/v1/jobs/run", map[string]any{"script": script, "timeout": 10, "pad": strings.Repeat("p", 1<<20-64<<10)})
	if err != nil || st != 200 || !strings.Contains(string(raw), `"output":"ok\n"`) {
		if len(raw) > 300 {
			raw = raw[:300]
		}
		t.Errorf("run with a 1 MiB script in a body under 2 MiB = %d %s %v", st, raw, err)
	}

	// Input just under 1 MiB reaches the job byte for byte.
	line := strings.Repeat("z", 63) + "\n"
	text := strings.Repeat(line, (1<<20-32<<10)/len(line))
	_, err = s.c.Input(c, running.JobID, text, client.WaitRequest{Offset: running.Offset, Timeout: f64(0.1)})
	if err != nil {
		t.Fatalf("input of %d bytes: %v", len(text), err)
	}
	got := filepath.Join(dir, "got")
	fxEventually(t, 20*time.Second, "the job to read all input", func() bool {
		fi, err := os.Stat(got)
		return err == nil && fi.Size() == int64(len(text))
	})
	if b, _ := os.ReadFile(got); string(b) != text {
		t.Errorf("job read %d bytes, not the %d sent", len(b), len(text))
	}
}

// A client that never finishes its headers is cut off by the header read
// timeout (10 s in internal/server) while other clients are served.
func TestLimitSlowHeaderClientIsCut(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("waits for the 10 s header read timeout")
	}
	s := startServer(t, serverOpts{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	// Others are served meanwhile.
	if st, _, err := s.c.Do(fxCtx(t, 5*time.Second), "GET", "/healthz", nil); err != nil || st != 200 {
		t.Fatalf("healthz beside a slow client = %d %v", st, err)
	}
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = bufio.NewReader(conn).ReadString('\n')
	el := time.Since(start)
	t.Logf("slow header client cut after %v (%v)", el.Round(time.Millisecond), err)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", el)
	}
	if el > 15*time.Second {
		t.Errorf("cut after %v", el)
	}
}
