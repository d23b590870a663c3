package e2e

// Idempotency-Key on run and input (extended-api.md §5).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/shellctl/shellctl/internal/client"
)

type idemAnswer struct {
	status int
	header http.Header
	body   []byte
	res    client.JobResult
	code   string // the error code of an error answer
	msg    string
}

// idemPost posts body (JSON of v) to path with the Idempotency-Key key
// ("" = none).
func idemPost(t *testing.T, s *server, path, key string, v any) idemAnswer {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, s.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	a := idemAnswer{status: resp.StatusCode, header: resp.Header}
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if a.status == http.StatusOK {
		if err := json.Unmarshal(a.body, &a.res); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, a.body)
		}
	} else {
		var env struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(a.body, &env)
		a.code, a.msg = env.Error.Code, env.Error.Message
	}
	return a
}

func idemJobCount(t *testing.T, s *server) int {
	t.Helper()
	list, err := s.c.List(ctx(t), "", 200)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

func TestIdempotentRunRepeatStartsOneJobAndAChangedBodyIs422(t *testing.T) {
	s := startServer(t, serverOpts{})
	body := map[string]any{"script": "echo once >> \"$HOME/runs\"; echo hi", "env": map[string]string{"A": "1"}, "timeout": 10}
	first := idemPost(t, s, "/v1/jobs/run", "key-1", body)
	if first.status != 200 || first.res.JobID == "" {
		t.Fatalf("first run: %d %s", first.status, first.body)
	}
	if got := first.header.Get("X-Shellctl-Job-Id"); got != first.res.JobID {
		t.Fatalf("X-Shellctl-Job-Id = %q, want %q", got, first.res.JobID)
	}
	if first.header.Get("X-Shellctl-Idempotent-Replay") != "" {
		t.Fatal("the first request is marked as a replay")
	}
	// The same work with other wait parameters: a repeat.
	again := map[string]any{"script": body["script"], "env": map[string]string{"A": "1"}, "timeout": 3, "output_limit": 100, "mode": "pty"}
	rep := idemPost(t, s, "/v1/jobs/run", "key-1", again)
	if rep.status != 200 || rep.res.JobID != first.res.JobID {
		t.Fatalf("repeat: %d %s, want job %s", rep.status, rep.body, first.res.JobID)
	}
	if rep.header.Get("X-Shellctl-Job-Id") != first.res.JobID || rep.header.Get("X-Shellctl-Idempotent-Replay") != "true" {
		t.Fatalf("repeat headers: %v", rep.header)
	}
	if !rep.res.Done || rep.res.Output != "hi\n" {
		t.Fatalf("the repeat answers the job as it stands: %+v", rep.res)
	}
	if n := idemJobCount(t, s); n != 1 {
		t.Fatalf("%d jobs after a repeated run, want 1", n)
	}
	// A different body under the same key.
	for name, changed := range map[string]map[string]any{
		"script": {"script": "echo other", "env": map[string]string{"A": "1"}},
		"env":    {"script": body["script"], "env": map[string]string{"A": "2"}},
		"mode":   {"script": body["script"], "env": map[string]string{"A": "1"}, "mode": "stdio"},
	} {
		a := idemPost(t, s, "/v1/jobs/run", "key-1", changed)
		if a.status != 422 || a.code != "idempotency_key_reused" || !strings.Contains(a.msg, "key-1") {
			t.Errorf("changed %s: %d %s, want 422 idempotency_key_reused naming the key", name, a.status, a.body)
		}
		if a.header.Get("X-Shellctl-Job-Id") != first.res.JobID {
			t.Errorf("changed %s: the 422 names job %q, want %q", name, a.header.Get("X-Shellctl-Job-Id"), first.res.JobID)
		}
	}
	if n := idemJobCount(t, s); n != 1 {
		t.Fatalf("%d jobs after refused repeats, want 1", n)
	}
	// Without a key, the same body is a new job.
	if a := idemPost(t, s, "/v1/jobs/run", "", body); a.status != 200 || a.res.JobID == first.res.JobID {
		t.Fatalf("run without a key: %d %s", a.status, a.body)
	}
	var rec struct {
		IdempotencyKey *string `json:"idempotency_key"`
	}
	_, raw, err := s.c.Do(ctx(t), http.MethodGet, "/v1/jobs/"+first.res.JobID+"/record", nil)
	if err != nil || json.Unmarshal(raw, &rec) != nil || rec.IdempotencyKey == nil || *rec.IdempotencyKey != "key-1" {
		t.Fatalf("record's idempotency_key: %s %v", raw, err)
	}
	for _, bad := range []string{strings.Repeat("x", 256), "has space"} {
		a := idemPost(t, s, "/v1/jobs/run", bad, body)
		if a.status != 422 || a.code != "validation_error" || !strings.Contains(a.msg, "Idempotency-Key") {
			t.Errorf("key %q: %d %s, want 422 naming the header", bad, a.status, a.body)
		}
	}
}

func TestIdempotentRunConcurrentRepeatsStartOneJob(t *testing.T) {
	s := startServer(t, serverOpts{})
	body := map[string]any{"script": "echo x >> \"$HOME/runs\"; sleep 0.3; echo done", "timeout": 10}
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := idemPost(t, s, "/v1/jobs/run", "same-key", body)
			if a.status != 200 {
				t.Errorf("run %d: %d %s", i, a.status, a.body)
			}
			ids[i] = a.res.JobID
		}()
	}
	wg.Wait()
	for i := range n {
		if ids[i] != ids[0] {
			t.Fatalf("concurrent repeats got jobs %v, want one", ids)
		}
	}
	if c := idemJobCount(t, s); c != 1 {
		t.Fatalf("%d jobs after %d concurrent repeats, want 1", c, n)
	}
	res, _ := s.runDone(t, client.RunRequest{Script: "cat \"$HOME/runs\""})
	if res.Output != "x\n" {
		t.Fatalf("the script ran %q times, want once", res.Output)
	}
}

func TestIdempotentInputIsSentOnceAndSurvivesARestart(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	run := idemPost(t, s, "/v1/jobs/run", "job-key", map[string]any{"script": "stty -echo; while read l; do echo \"got:$l\"; done", "timeout": 0.5})
	if run.status != 200 || run.res.Done {
		t.Fatalf("run: %d %s", run.status, run.body)
	}
	id := run.res.JobID
	in := map[string]any{"text": "a\n", "timeout": 2}
	first := idemPost(t, s, "/v1/jobs/"+id+"/input", "in-1", in)
	if first.status != 200 || first.header.Get("X-Shellctl-Idempotent-Replay") != "" {
		t.Fatalf("first input: %d %s", first.status, first.body)
	}
	rep := idemPost(t, s, "/v1/jobs/"+id+"/input", "in-1", map[string]any{"text": "a\n", "timeout": 0.2, "offset": first.res.Offset})
	if rep.status != 200 || rep.header.Get("X-Shellctl-Idempotent-Replay") != "true" {
		t.Fatalf("repeated input: %d %s %v", rep.status, rep.body, rep.header)
	}
	if a := idemPost(t, s, "/v1/jobs/"+id+"/input", "in-1", map[string]any{"text": "b\n"}); a.status != 422 || a.code != "idempotency_key_reused" {
		t.Fatalf("input key with another text: %d %s", a.status, a.body)
	}

	// After a restart the stored keys still count, for the run and the input.
	s.restart(syscall.SIGTERM)
	if a := idemPost(t, s, "/v1/jobs/"+id+"/input", "in-1", map[string]any{"text": "a\n", "timeout": 0.2}); a.status != 200 || a.header.Get("X-Shellctl-Idempotent-Replay") != "true" {
		t.Fatalf("repeated input after a restart: %d %s", a.status, a.body)
	}
	again := idemPost(t, s, "/v1/jobs/run", "job-key", map[string]any{"script": "stty -echo; while read l; do echo \"got:$l\"; done", "timeout": 0.2})
	if again.status != 200 || again.res.JobID != id || again.header.Get("X-Shellctl-Idempotent-Replay") != "true" {
		t.Fatalf("repeated run after a restart: %d %s", again.status, again.body)
	}
	if n := idemJobCount(t, s); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	// A new key is a new input; then everything the job printed.
	if a := idemPost(t, s, "/v1/jobs/"+id+"/input", "in-2", map[string]any{"text": "end\n", "timeout": 0.2}); a.status != 200 {
		t.Fatalf("input with a new key: %d %s", a.status, a.body)
	}
	var out strings.Builder
	var off int64
	for !strings.Contains(out.String(), "got:end") {
		res, err := s.c.Wait(ctx(t), id, client.WaitRequest{Offset: off, Timeout: f64(10)})
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(res.Output)
		if res.Done || res.Offset == off && res.Output == "" {
			break
		}
		off = res.Offset
	}
	if got := strings.Count(out.String(), "got:a"); got != 1 || strings.Count(out.String(), "got:end") != 1 {
		t.Fatalf("the job read %q: want got:a once, then got:end", out.String())
	}
}

// A script over 64 KiB goes to a spool file as it arrives; its hash is
// taken on the way.
func TestIdempotentRunOfALargeScript(t *testing.T) {
	s := startServer(t, serverOpts{})
	script := "# " + strings.Repeat("x", 200<<10) + "\necho big\n"
	first := idemPost(t, s, "/v1/jobs/run", "big", map[string]any{"script": script, "timeout": 10})
	rep := idemPost(t, s, "/v1/jobs/run", "big", map[string]any{"script": script, "timeout": 5})
	if first.status != 200 || rep.status != 200 || rep.res.JobID != first.res.JobID || rep.res.Output != "big\n" {
		t.Fatalf("large script and its repeat: %d %d %s / %s", first.status, rep.status, first.res.JobID, rep.body)
	}
	changed := "# " + strings.Repeat("x", 200<<10-1) + "y\necho big\n"
	if a := idemPost(t, s, "/v1/jobs/run", "big", map[string]any{"script": changed}); a.status != 422 || a.code != "idempotency_key_reused" {
		t.Fatalf("one byte changed in a large script: %d %s", a.status, a.body)
	}
	if n := idemJobCount(t, s); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}
