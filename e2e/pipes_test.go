package e2e

// Stdin pipes for stdio jobs (spec/extended-api.md §8, issue 33).

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// runPipe starts a stdio job with a stdin pipe and answers at once.
func runPipe(t *testing.T, s *server, script string) *client.JobResult {
	t.Helper()
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: script, Mode: "stdio", Stdin: "pipe", Timeout: 0.001})
	if err != nil {
		t.Fatalf("run %q with a stdin pipe: %v", script, err)
	}
	return res
}

// waitDone follows job id's output from offset until it is done.
func waitDone(t *testing.T, s *server, id string, offset int64) (*client.JobResult, string) {
	t.Helper()
	var out strings.Builder
	for {
		res, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: offset, Timeout: f64(30)})
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
		out.WriteString(res.Output)
		offset = res.Offset
		if res.Done {
			return res, out.String()
		}
	}
}

// waitFor follows job id's output from offset until it holds want.
func waitFor(t *testing.T, s *server, id string, offset int64, want string) (string, int64) {
	t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		res, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: offset, Timeout: f64(30)})
		if err != nil {
			t.Fatalf("wait for %q from %s: %v", want, id, err)
		}
		out.WriteString(res.Output)
		offset = res.Offset
		if res.Done && !strings.Contains(out.String(), want) {
			t.Fatalf("job %s ended (%s, code %d) without printing %q: %q", id, res.Status, code(res), want, out.String())
		}
	}
	return out.String(), offset
}

// inputToEnd sends data to job id's stdin pipe as base64 with eof, and
// follows the job to its end.
func inputToEnd(t *testing.T, s *server, id string, data []byte, what string) *client.JobResult {
	t.Helper()
	in, err := s.c.InputBytes(ctx(t), id, data, true, client.WaitRequest{Timeout: f64(30)})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if in.Done {
		return in
	}
	end, _ := waitDone(t, s, id, in.Offset)
	return end
}

func stdinOf(t *testing.T, s *server, id string) string {
	t.Helper()
	rec, err := s.c.Record(ctx(t), id)
	if err != nil {
		t.Fatalf("record of %s: %v", id, err)
	}
	return rec.Stdin
}

// Every byte value, through base64, into cat and back out, exactly; eof
// ends cat. Both ways a job starts: directly, and through a stage.
func TestPipeBytesRoundTripThroughCat(t *testing.T) {
	for _, start := range []string{"direct", "stage"} {
		t.Run(start, func(t *testing.T) {
			pipeBytesRoundTrip(t, startServer(t, serverOpts{args: []string{"--job-start", start}}))
		})
	}
}

func pipeBytesRoundTrip(t *testing.T, s *server) {
	res := runPipe(t, s, "cat")
	if got := stdinOf(t, s, res.JobID); got != "pipe" {
		t.Fatalf("record stdin of a job with an open pipe = %q, want pipe", got)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	end := inputToEnd(t, s, res.JobID, all, "input 0..255 with eof")
	if end.Status != "exited" || code(end) != 0 {
		t.Fatalf("cat after eof: %s code %d, want exited 0", end.Status, code(end))
	}
	raw, err := os.ReadFile(end.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, all) {
		t.Fatalf("output.log = %q, want bytes 0..255 exactly", raw)
	}
	if got := stdinOf(t, s, res.JobID); got != "closed" {
		t.Fatalf("record stdin after eof = %q, want closed", got)
	}
}

// A base64 input is read as it arrives, as text is, not among the other
// fields: one of 3 MiB (4 MiB of base64, past the 2 MiB the other fields
// may take) goes to the job whole; escapes JSON allows in it (\/) are
// undone first; null counts as none.
func TestPipeLargeBase64Input(t *testing.T) {
	s := startServer(t, serverOpts{})
	res := runPipe(t, s, "wc -c")
	big := bytes.Repeat([]byte{0, 0xff, 'a', '\n'}, 3<<20/4)
	end := inputToEnd(t, s, res.JobID, big, "a 3 MiB base64 input")
	raw, err := os.ReadFile(end.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(raw)) != "3145728" {
		t.Fatalf("wc -c of a 3 MiB input read %q", raw)
	}

	cat := runPipe(t, s, "od -An -tx1")
	st, body, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+cat.JobID+"/input", []byte(`{"base64":null,"text":"","base64":"AAEC\/w==","eof":true}`))
	// text "" and base64 both: refused (the later base64 counts, not
	// the null before it).
	wantError(t, "text and base64 (null first)", st, body, err, 400, "invalid_request")
	st, body, err = s.c.Do(ctx(t), "POST", "/v1/jobs/"+cat.JobID+"/input", []byte(`{"base64":"AAEC\/w==","text":null,"eof":true}`))
	if err != nil || st != 200 {
		t.Fatalf("base64 with an escaped slash: %d %s %v", st, body, err)
	}
	end, out := waitDone(t, s, cat.JobID, 0)
	if got := strings.Join(strings.Fields(out), " "); got != "00 01 02 ff" || code(end) != 0 {
		t.Fatalf("od of the input: %q (code %d), want 00 01 02 ff", got, code(end))
	}
}

// text is sent as is (no newline added); eof alone closes stdin; then the
// job is gone and input to it answers as to any ended job.
func TestPipeTextThenEOFAlone(t *testing.T) {
	s := startServer(t, serverOpts{})
	res := runPipe(t, s, `cat; echo "cat ended"`)
	in, err := s.c.Input(ctx(t), res.JobID, "no newline", client.WaitRequest{Timeout: f64(30)})
	if err != nil {
		t.Fatal(err)
	}
	out, off := waitFor(t, s, res.JobID, 0, "no newline")
	_ = in
	if out != "no newline" {
		t.Fatalf("output after text = %q, want exactly %q", out, "no newline")
	}
	st, err := s.c.Status(ctx(t), res.JobID)
	if err != nil || st.Done {
		t.Fatalf("cat ended before eof: %+v %v", st, err)
	}
	if _, err := s.c.CloseInput(ctx(t), res.JobID, client.WaitRequest{Offset: off, Timeout: f64(0)}); err != nil {
		t.Fatalf("eof alone: %v", err)
	}
	end, rest := waitDone(t, s, res.JobID, off)
	if end.Status != "exited" || code(end) != 0 || rest != "\ncat ended\n" && rest != "cat ended\n" {
		t.Fatalf("after eof: %s code %d output %q", end.Status, code(end), rest)
	}
	// Ended: job_not_running, as for an ended pty job (and as for one
	// whose stdin is closed).
	_, err = s.c.InputBytes(ctx(t), res.JobID, []byte("late"), false, client.WaitRequest{})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "job_not_running" {
		t.Fatalf("input to the ended job: %v, want 409 job_not_running", err)
	}
}

// A second eof, or bytes after it, to a job that still runs: stdin_closed.
func TestPipeInputAfterEOF(t *testing.T) {
	s := startServer(t, serverOpts{})
	res := runPipe(t, s, `cat >/dev/null; echo closed; exec sleep 60`)
	if _, err := s.c.CloseInput(ctx(t), res.JobID, client.WaitRequest{Timeout: f64(0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, res.JobID, 0, "closed")
	_, err := s.c.Input(ctx(t), res.JobID, "more", client.WaitRequest{})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "stdin_closed" {
		t.Fatalf("input after eof: %v, want 409 stdin_closed", err)
	}
	if got := stdinOf(t, s, res.JobID); got != "closed" {
		t.Fatalf("record stdin after eof = %q, want closed", got)
	}
}

// A job that never reads: the pipe fills, /input answers 409
// input_backpressure after its timeout with the bytes taken, and the
// server answers other requests meanwhile. Terminating the job with its
// pipe open still records its end.
func TestPipeBackpressureDoesNotStickServer(t *testing.T) {
	s := startServer(t, serverOpts{})
	res := runPipe(t, s, "echo started; exec sleep 600")
	waitFor(t, s, res.JobID, 0, "started")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than a pipe holds
	const timeout = 3.0
	type answer struct {
		status int
		raw    []byte
		err    error
		took   time.Duration
	}
	done := make(chan answer, 1)
	began := time.Now()
	go func() {
		st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+res.JobID+"/input", map[string]any{
			"base64": bytesB64(big), "timeout": timeout})
		done <- answer{st, raw, err, time.Since(began)}
	}()
	// Meanwhile: a new job runs and answers, the stuck job's status answers.
	other, out := s.runDone(t, client.RunRequest{Script: "echo other", Mode: "stdio"})
	if code(other) != 0 || out != "other\n" {
		t.Fatalf("another job while input waits: code %d out %q", code(other), out)
	}
	if _, err := s.c.Status(ctx(t), res.JobID); err != nil {
		t.Fatalf("status of the job while its input waits: %v", err)
	}
	select {
	case a := <-done:
		t.Fatalf("input answered (%d %s) after %s, before the other requests were answered", a.status, a.raw, a.took)
	default:
	}
	if time.Since(began) > time.Duration(timeout*float64(time.Second)) {
		t.Fatalf("the other requests took %s, past the input's timeout", time.Since(began))
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Taken   *int64 `json:"taken"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.raw, &env); err != nil || a.status != 409 || env.Error.Code != "input_backpressure" || env.Error.Taken == nil {
		t.Fatalf("input to a job that never reads: %d %s, want 409 input_backpressure with taken", a.status, a.raw)
	}
	if n := *env.Error.Taken; n <= 0 || n >= int64(len(big)) || !strings.Contains(env.Error.Message, "bytes were taken") {
		t.Fatalf("taken %d of %d, message %q", n, len(big), env.Error.Message)
	}
	if a.took < time.Duration(timeout*float64(time.Second))-100*time.Millisecond || a.took > 20*time.Second {
		t.Fatalf("input_backpressure after %s, want about its timeout %gs", a.took, timeout)
	}
	// A second input waits no longer than its own timeout either.
	_, err := s.c.InputBytes(ctx(t), res.JobID, []byte("x"), false, client.WaitRequest{Timeout: f64(0.2)})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != "input_backpressure" || ae.Taken != 0 {
		t.Fatalf("input to a full pipe: %v (taken %v), want input_backpressure with 0 taken", err, ae)
	}
	// Ending the job with its pipe full and open loses no exit.
	st, err := s.c.Terminate(ctx(t), res.JobID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "terminated" || st.ExitCode == nil {
		t.Fatalf("terminate with an open pipe: %+v", st)
	}
	if got := stdinOf(t, s, res.JobID); got != "closed" {
		t.Fatalf("record stdin of the ended job = %q, want closed", got)
	}
}

func bytesB64(b []byte) string {
	raw, _ := json.Marshal(b) // encoding/json writes []byte as standard base64
	return strings.Trim(string(raw), `"`)
}

// A Python REPL over a pipe: no terminal, its answers on stdout.
func TestPipePythonREPL(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	s := startServer(t, serverOpts{})
	res := runPipe(t, s, "exec python3 -i -q")
	in, err := s.c.Input(ctx(t), res.JobID, "print(6*7)\n", client.WaitRequest{Timeout: f64(30)})
	if err != nil {
		t.Fatal(err)
	}
	out, off := waitFor(t, s, res.JobID, 0, "42\n")
	_ = in
	if out != "42\n" {
		t.Fatalf("REPL stdout = %q, want 42", out)
	}
	if _, err := s.c.Input(ctx(t), res.JobID, "import sys; sys.stdout.write(str(len(sys.argv)) + '\\n')\n", client.WaitRequest{Offset: off, Timeout: f64(0)}); err != nil {
		t.Fatal(err)
	}
	_, off = waitFor(t, s, res.JobID, off, "1\n")
	if _, err := s.c.CloseInput(ctx(t), res.JobID, client.WaitRequest{Offset: off, Timeout: f64(0)}); err != nil {
		t.Fatal(err)
	}
	end, _ := waitDone(t, s, res.JobID, off)
	if end.Status != "exited" || code(end) != 0 {
		t.Fatalf("python after eof: %s code %d", end.Status, code(end))
	}
}

// Jobs without a pipe answer as before; stdin is checked on run.
func TestPipeRunRulesAndCompatibleInput(t *testing.T) {
	s := startServer(t, serverOpts{})
	for _, tc := range []struct {
		body map[string]any
		code string
	}{
		{map[string]any{"script": "cat", "stdin": "pipe"}, "validation_error"}, // pty by default
		{map[string]any{"script": "cat", "mode": "pty", "stdin": "pipe"}, "validation_error"},
		{map[string]any{"script": "cat", "mode": "stdio", "stdin": "file"}, "validation_error"},
	} {
		st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/run", tc.body)
		wantError(t, "run "+string(mustJSON(tc.body)), st, raw, err, 422, tc.code)
		if !strings.Contains(string(raw), "stdin") {
			t.Fatalf("run %v: message does not name stdin: %s", tc.body, raw)
		}
	}
	// A stdio job without a pipe: input_unsupported whatever the body.
	plain, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Mode: "stdio", Timeout: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []map[string]any{{"text": "x\n"}, {"eof": true}, {"base64": "eA=="}} {
		st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+plain.JobID+"/input", body)
		wantError(t, "input to a stdio job without a pipe", st, raw, err, 409, "input_unsupported")
		if !strings.Contains(string(raw), "runs in stdio mode, which takes no input") {
			t.Fatalf("input_unsupported message changed: %s", raw)
		}
	}
	if got := stdinOf(t, s, plain.JobID); got != "null" {
		t.Fatalf("record stdin of a stdio job without a pipe = %q, want null", got)
	}
	// The original's answer to an input without text is unchanged.
	st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/"+plain.JobID+"/input", map[string]any{})
	wantError(t, "input without text", st, raw, err, 400, "invalid_request")
	if !strings.Contains(string(raw), `"text is required"`) {
		t.Fatalf("input without text: %s", raw)
	}
	pty, err := s.c.Run(ctx(t), client.RunRequest{Script: "sleep 60", Timeout: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	if got := stdinOf(t, s, pty.JobID); got != "pty" {
		t.Fatalf("record stdin of a pty job = %q, want pty", got)
	}
	// Input bodies are checked.
	pipe := runPipe(t, s, "cat")
	st, raw, err = s.c.Do(ctx(t), "POST", "/v1/jobs/"+pipe.JobID+"/input", map[string]any{"text": "a", "base64": "YQ=="})
	wantError(t, "text and base64", st, raw, err, 400, "invalid_request")
	st, raw, err = s.c.Do(ctx(t), "POST", "/v1/jobs/"+pipe.JobID+"/input", map[string]any{"base64": "not base64!"})
	wantError(t, "bad base64", st, raw, err, 422, "validation_error")
}

// The runner holds the pipe: a restarted server finds it again.
func TestPipeSurvivesAServerRestart(t *testing.T) {
	s := startServer(t, serverOpts{})
	res := runPipe(t, s, "cat")
	if _, err := s.c.Input(ctx(t), res.JobID, "before\n", client.WaitRequest{Timeout: f64(0)}); err != nil {
		t.Fatal(err)
	}
	_, off := waitFor(t, s, res.JobID, 0, "before\n")
	s.restart(syscall.SIGKILL)
	in, err := s.c.InputBytes(ctx(t), res.JobID, []byte("after\n"), true, client.WaitRequest{Offset: off, Timeout: f64(30)})
	if err != nil {
		rec, _ := s.c.RecordJSON(ctx(t), res.JobID)
		t.Fatalf("input after a restart: %v\nrecord: %s", err, rec)
	}
	end, rest := in, in.Output
	if !in.Done {
		var more string
		end, more = waitDone(t, s, res.JobID, in.Offset)
		rest += more
	}
	if rest != "after\n" || end.Status != "exited" || code(end) != 0 {
		t.Fatalf("after a restart: output %q, %s code %d", rest, end.Status, code(end))
	}
}

// eof to a pty job is its terminal's EOF character: cat reads the line,
// then end of file.
func TestPTYInputEOFIsControlD(t *testing.T) {
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "stty -echo; echo ready; cat; echo cat-ended", Timeout: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	_, off := waitFor(t, s, res.JobID, 0, "ready")
	in, err := s.c.InputBytes(ctx(t), res.JobID, []byte("line\n"), true, client.WaitRequest{Offset: off, Timeout: f64(0)})
	if err != nil {
		t.Fatal(err)
	}
	end, out := waitDone(t, s, res.JobID, in.Offset)
	out = in.Output + out
	if end.Status != "exited" || code(end) != 0 || !strings.Contains(out, "line") || !strings.Contains(out, "cat-ended") {
		t.Fatalf("pty cat after line and eof: %s code %d output %q", end.Status, code(end), out)
	}
}

// shellctl run -i with a stdio job: stdin piped to the job byte for
// byte, its end the job's end of file (docker run -i); without -i the
// job's stdin is empty and shellctl says yours was not sent.
func TestCLIRunInteractiveStdio(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	if r := cli(t, s, dir, "b\na\n", "run", "-i", "--stdio", "sort"); r.code != 0 || r.stdout != "a\nb\n" || r.stderr != "" {
		t.Errorf("printf 'b\\na\\n' | shellctl run -i --stdio sort: %v", r)
	}
	if r := cli(t, s, dir, "1\n2\n3\n", "run", "-i", "--mode", "stdio", "wc -l"); r.code != 0 || strings.TrimSpace(r.stdout) != "3" {
		t.Errorf("seq 3 | shellctl run -i --mode stdio 'wc -l': %v", r)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if r := cli(t, s, dir, string(all), "run", "-i", "--stdio", "cat"); r.code != 0 || r.stdout != string(all) {
		t.Errorf("bytes 0..255 through run -i --stdio cat: %v", r)
	}
	// More than a pipe and a request hold: sent in pieces, none lost.
	big := strings.Repeat("0123456789abcde\n", 3<<16) // 3 MiB
	if r := cli(t, s, dir, big, "run", "-i", "--stdio", "cat | wc -c"); r.code != 0 || strings.TrimSpace(r.stdout) != "3145728" {
		t.Errorf("3 MiB through run -i --stdio: %v", r)
	}
	// The job's exit code is shellctl's, with its stdin still open.
	if r := cli(t, s, dir, "x\n", "run", "-i", "--stdio", "read -r l; exit 7"); r.code != 7 {
		t.Errorf("run -i --stdio of a job that exits 7: %v", r)
	}
	// Without -i: not forwarded (docker's rule), and said so.
	r := cli(t, s, dir, "1\n2\n3\n", "run", "--stdio", "wc -l")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "0" || !strings.Contains(r.stderr, "run passes stdin only with -i") {
		t.Errorf("seq 3 | shellctl run --stdio 'wc -l' (no -i): %v, want 0 lines and the hint", r)
	}
	if r := cli(t, s, dir, "", "run", "--stdio", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("run without -i and an empty stdin: %v, want no hint", r)
	}
	if r := cli(t, s, dir, "", "run", "-i", "--stdio", "-"); r.code != 125 || !strings.Contains(r.stderr, "-i with --mode stdio") {
		t.Errorf("run -i --stdio -: %v, want a usage error", r)
	}
	// -di (docker's): the pipe stays open for input, --eof closes it.
	id := strings.TrimSpace(cli(t, s, dir, "", "run", "-di", "--stdio", "cat").stdout)
	if r := cli(t, s, dir, "", "input", id, "kept open\n"); r.code != 0 || r.stdout != "kept open\n" {
		t.Errorf("input to a run -di --stdio job: %v", r)
	}
	if r := cli(t, s, dir, "", "input", "--eof", id); r.code != 0 {
		t.Errorf("input --eof: %v", r)
	}
	if r := cli(t, s, dir, "", "wait", id); r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("wait after input --eof: %v, want cat ended 0", r)
	}
}
