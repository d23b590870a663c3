package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

const (
	kid      = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	protoErr = "dify-agent: incompatible knowledge CLI protocol; deploy matching Agent Stub and sandbox versions\n"
	limitErr = "dify-agent: knowledge response exceeds the output limit or is incomplete\n"
	transErr = "dify-agent: knowledge command transport unavailable or cancelled\n"
)

func TestKnowledgeGroup(t *testing.T) {
	// --protocol-version needs no environment.
	r := runBin(t, t.TempDir(), nil, strings.NewReader(""), "knowledge", "--protocol-version")
	r.want(t, 0, "1\n", "")
	r = runBin(t, t.TempDir(), nil, strings.NewReader(""), "knowledge")
	if r.code != 0 || !strings.Contains(r.stdout, "Usage: dify-agent knowledge [--protocol-version | COMMAND [flags]]") {
		t.Fatalf("group: %d %q", r.code, r.stdout)
	}
	if r := runBin(t, t.TempDir(), nil, strings.NewReader(""), "knowledge", "what"); r.code != 2 {
		t.Fatalf("positional: exit %d", r.code)
	}
	h := newHarness(t)
	for _, args := range [][]string{
		{"knowledge", "search", "--space", "s", "--query", "q", "--url", "http://evil"},
		{"knowledge", "ls", "extra"},
	} {
		if r := h.run("", args...); r.code != 2 || r.stdout != "" {
			t.Fatalf("%q: exit %d", args, r.code)
		}
	}
	h.wantNoRequests()
}

// Every subcommand sends exactly the keys it owns and prints the answer
// compacted.
func TestKnowledgeCommands(t *testing.T) {
	h := newHarness(t)
	const node = "7d444840-9dc0-11d1-b245-5ffdce74fad2"
	cases := []struct {
		args []string
		body string // after version, command, command_id
	}{
		{[]string{"spaces"}, ``},
		{[]string{"capabilities", "--space", "hb"}, `,"space":"hb"`},
		{[]string{"search", "--space", "hb", "--query", "vacation <days>"}, `,"space":"hb","query":"vacation <days>","limit":10`},
		{[]string{"search", "--space", "hb", "--limit", "3", "--image-file-id", "6F9619FF-8B86-4011-B42D-00C04FC964FF",
			"--image-file-id", fakestub.FileRef("1b4e28ba-2fa1-11d2-883f-0016d3cca427")},
			`,"space":"hb","limit":3,"image_file_ids":["6f9619ff-8b86-4011-b42d-00c04fc964ff","1b4e28ba-2fa1-11d2-883f-0016d3cca427"]`},
		{[]string{"ls", "--space", "hb"}, `,"space":"hb","path":"/knowledge","limit":10`},
		{[]string{"tree", "--space", "hb", "--path", "/knowledge/a", "--cursor", "c1", "--depth", "3"},
			`,"space":"hb","path":"/knowledge/a","cursor":"c1","limit":10,"depth":3`},
		{[]string{"find", "--space", "hb", "--query", "plan"}, `,"space":"hb","path":"/knowledge","query":"plan","limit":10`},
		{[]string{"grep", "--space", "hb", "--query", "plan", "--limit", "50"}, `,"space":"hb","path":"/knowledge","query":"plan","limit":50`},
		{[]string{"cat", "--space", "hb", "--path", "/knowledge/a.md"}, `,"space":"hb","path":"/knowledge/a.md","limit":10`},
		{[]string{"stat", "--space", "hb"}, `,"space":"hb","path":"/knowledge"`},
		{[]string{"diff", "--space", "hb", "--old-path", "/knowledge/a", "--new-path", "/knowledge/b"},
			`,"space":"hb","old_path":"/knowledge/a","new_path":"/knowledge/b"`},
		{[]string{"open", "--space", "hb", "--node-id", node}, `,"space":"hb","node_id":"` + node + `"`},
		{[]string{"open", "--space", "hb", "--receipt", fakestub.FakeReceipt}, `,"space":"hb","receipt_id":"` + fakestub.FakeReceipt + `"`},
		{[]string{"images", "--space", "hb", "--receipt", fakestub.FakeReceipt}, `,"space":"hb","receipt_id":"` + fakestub.FakeReceipt + `","limit":10`},
		{[]string{"image", "--space", "hb", "--receipt", fakestub.FakeReceipt, "--item-id", "img-1", "--json"},
			`,"space":"hb","receipt_id":"` + fakestub.FakeReceipt + `","item_id":"img-1"`},
	}
	for i, c := range cases {
		id := kid[:34] + fmt.Sprintf("%02d", i)
		before := len(h.stub.Requests())
		r := h.run("", append([]string{"knowledge"}, append(c.args, "--command-id", id)...)...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%q: exit %d %q", c.args, r.code, r.stderr)
		}
		reqs := h.stub.Requests()[before:]
		if len(reqs) != 1 {
			t.Fatalf("%q: %d requests", c.args, len(reqs))
		}
		{
			q := reqs[0]
			want := `{"version":1,"command":"` + c.args[0] + `","command_id":"` + id + `"` + c.body + `}`
			if q.Method != "POST" || q.Path != "/agent-stub/knowledge/commands" || q.ContentType != "application/json" ||
				q.Authorization != "Bearer "+testToken || string(q.Body) != want {
				t.Fatalf("%q: request %s %s %q body\n%s\nwant\n%s", c.args, q.Method, q.Path, q.ContentType, q.Body, want)
			}
		}
		var env map[string]any
		if json.Unmarshal([]byte(r.stdout), &env) != nil || env["command"] != c.args[0] || env["status"] != "ok" ||
			strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("%q: stdout %q", c.args, r.stdout)
		}
	}
	if n := h.stub.KnowledgeExecutions(); n != len(cases) {
		t.Fatalf("%d executions for %d commands", n, len(cases))
	}
}

// A repeated --command-id does not repeat the work: same bytes, counter
// unchanged; an upper-case id is sent lower-case; a generated id is a UUID.
func TestKnowledgeIdempotency(t *testing.T) {
	h := newHarness(t)
	a := h.run("", "knowledge", "search", "--space", "hb", "--query", "q", "--command-id", strings.ToUpper(kid))
	b := h.run("", "knowledge", "search", "--space", "hb", "--query", "q", "--command-id", kid)
	if a.code != 0 || a.stdout != b.stdout || b.code != 0 || !strings.Contains(a.stdout, `"command_id":"`+kid+`"`) {
		t.Fatalf("a %d %q %q\nb %d %q", a.code, a.stdout, a.stderr, b.code, b.stdout)
	}
	if n := h.stub.KnowledgeExecutions(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	for _, q := range h.requests("/agent-stub/knowledge/") {
		if !bytes.Contains(q.Body, []byte(`"command_id":"`+kid+`"`)) {
			t.Fatalf("id not lower-cased: %s", q.Body)
		}
	}
	h.run("", "knowledge", "spaces")
	h.run("", "knowledge", "spaces")
	if n := h.stub.KnowledgeExecutions(); n != 3 {
		t.Fatalf("generated ids reused: %d executions", n)
	}
	var ids []string
	for _, q := range h.requests("/agent-stub/knowledge/")[2:] {
		var m map[string]any
		json.Unmarshal(q.Body, &m)
		ids = append(ids, m["command_id"].(string))
	}
	if len(ids) != 2 || ids[0] == ids[1] || !uuidV4(ids[0]) || !uuidV4(ids[1]) {
		t.Fatalf("generated ids %q", ids)
	}
}

func uuidV4(s string) bool {
	return len(s) == 36 && s[14] == '4' && strings.ContainsRune("89ab", rune(s[19])) && strings.ToLower(s) == s
}

// The same id while the first run is in flight: 409.
func TestKnowledgeInFlight(t *testing.T) {
	h := newHarness(t)
	held, release := h.stub.HoldKnowledge()
	first := startBin(t, h, "knowledge", "spaces", "--command-id", kid)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("first run never reached the stub")
	}
	h.run("", "knowledge", "spaces", "--command-id", kid).wantFail(t, "dify-agent: HTTP 409: a command with this command_id is still running")
	release()
	if r := first.wait(); r.code != 0 || !strings.Contains(r.stdout, kid) {
		t.Fatalf("first run: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if n := h.stub.KnowledgeExecutions(); n != 1 {
		t.Fatalf("executions %d", n)
	}
}

type started struct {
	cmd      *exec.Cmd
	out, err *bytes.Buffer
	cancel   context.CancelFunc
}

func startBin(t *testing.T, h *harness, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = h.dir
	for k, v := range h.env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	s := &started{cmd: cmd, out: &bytes.Buffer{}, err: &bytes.Buffer{}, cancel: cancel}
	cmd.Stdout, cmd.Stderr = s.out, s.err
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	return s
}

func (s *started) wait() result {
	err := s.cmd.Wait()
	r := result{stdout: s.out.String(), stderr: s.err.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	}
	return r
}

func TestKnowledgeProtocolAndLimits(t *testing.T) {
	for _, c := range []struct {
		mode   string
		stdout string
		stderr string
	}{
		{"version2", "", protoErr},
		{"wrong-id", "", protoErr},
		{"wrong-command", "", protoErr},
		{"status-error", "", protoErr},
		{"bad-json", "", protoErr},
		{"redirect", "", protoErr},
		{"oversize", "", limitErr},
		{"oversize-error", "", limitErr},
		{"truncated", "", limitErr},
		{"pretty", `{"status":"ok","version":1,"command":"stat","command_id":"` + kid +
			`","data":{"zeta":"Grüße, 日本語","alpha":"<a & b>","escaped":"\u00e9\n"},"citations":[],"trace_id":null,"code":null,"message":null}` + "\n", ""},
	} {
		t.Run(c.mode, func(t *testing.T) {
			h := newHarness(t)
			h.mustMode(c.mode)
			r := h.run("", "knowledge", "stat", "--space", "hb", "--command-id", kid)
			code := 1
			if c.stderr == "" {
				code = 0
			}
			r.want(t, code, c.stdout, c.stderr)
			if rs := h.requests("/recorder/"); len(rs) != 0 {
				t.Fatalf("a redirect was followed: %+v", rs)
			}
		})
	}
	// Exactly 64 KiB passes, whole.
	h := newHarness(t)
	h.mustMode("exact-limit")
	r := h.run("", "knowledge", "stat", "--space", "hb", "--command-id", kid)
	if r.code != 0 || len(r.stdout) != 64<<10+1 {
		t.Fatalf("exact limit: exit %d, %d bytes, %q", r.code, len(r.stdout), r.stderr)
	}
}

func TestKnowledgeErrors(t *testing.T) {
	h := newHarness(t)
	for code, status := range fakestub.KnowledgeErrors {
		h.mustMode(fakestub.KnowledgeErrorPrefix + code)
		h.run("", "knowledge", "spaces").want(t, 1, "",
			"dify-agent: HTTP "+itoa(status)+": the fake stub was told to answer "+code+"\n")
	}
	h.mustMode(fakestub.KnowledgeErrorPrefix+"KNOWLEDGE_SCOPE_MISMATCH", "error-envelope")
	h.run("", "knowledge", "spaces").want(t, 1, "", "dify-agent: HTTP 403: the fake stub was told to answer KNOWLEDGE_SCOPE_MISMATCH\n")
	h.mustMode()
	// The server's validation, relayed.
	for _, args := range [][]string{
		{"search", "--space", "hb", "--query", "q", "--limit", "0"},
		{"search", "--space", "hb", "--query", "q", "--limit", "51"},
		{"tree", "--space", "hb", "--depth", "5"},
		{"ls", "--space", "hb", "--path", "/knowledge/../etc"},
		{"ls", "--space", "hb", "--path", "/etc"},
		{"ls", "--space", "hb", "--path", "/knowledge/a?b"},
		{"open", "--space", "hb", "--node-id", "7d444840-9dc0-11d1-b245-5ffdce74fad2", "--receipt", fakestub.FakeReceipt},
		{"open", "--space", "hb"},
		{"images", "--space", "hb"},
		{"capabilities"},
		{"find", "--space", "hb"},
	} {
		h.run("", append([]string{"knowledge"}, args...)...).wantFail(t, "dify-agent: HTTP 422: ")
	}
	h.env[agentstub.EnvToken] = fakestub.TokenExpired
	h.run("", "knowledge", "spaces").want(t, 1, "", "dify-agent: HTTP 401: "+agentstub.AuthExpiredText+"\n")
	h.env[agentstub.EnvToken] = fakestub.TokenHomeRead
	h.run("", "knowledge", "spaces").want(t, 1, "", "dify-agent: HTTP 401: invalid or missing Agent Stub authorization\n")
	h.env[agentstub.EnvBaseURL] = "http://127.0.0.1:1"
	h.run("", "knowledge", "spaces").want(t, 1, "", transErr)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Local checks of --image-file-id and of the input size: nothing is sent.
func TestKnowledgeLocalRefusals(t *testing.T) {
	h := newHarness(t)
	u := "6f9619ff-8b86-4011-b42d-00c04fc964ff"
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--image-file-id", u, "--image-file-id", u, "--image-file-id", u, "--image-file-id", u, "--image-file-id", u},
			"dify-agent: knowledge search accepts at most four query images\n"},
		{[]string{"--image-file-id", strings.Repeat("a", 4097)}, "dify-agent: knowledge query image reference exceeds the input limit\n"},
		{[]string{"--image-file-id", "dify-file-ref:!!!"}, "dify-agent: invalid knowledge query image reference\n"},
		{[]string{"--image-file-id", "dify-file-ref:eyJpZCI6MX0="}, "dify-agent: invalid knowledge query image reference\n"},
		{[]string{"--image-file-id", "https://example.com/cat.png"},
			"dify-agent: knowledge query images require a local_file upload UUID or canonical reference, not a URL\n"},
		{[]string{"--image-file-id", "a,b"},
			"dify-agent: knowledge query images require a local_file upload UUID or canonical reference, not a URL\n"},
		{[]string{"--query", strings.Repeat("q", 25000)}, "dify-agent: knowledge command exceeds the input limit\n"},
	} {
		h.run("", append([]string{"knowledge", "search", "--space", "hb"}, c.args...)...).want(t, 1, "", c.stderr)
	}
	h.wantNoRequests()
}

// A reply that does not come within the timeout, and SIGTERM while waiting.
func TestKnowledgeTimeoutAndCancel(t *testing.T) {
	h := newHarness(t)
	h.mustMode("slow")
	h.stub.SetSlowDelay(20 * time.Second)
	h.env[agentstub.EnvTestKnowledgeTimeout] = "300ms"
	r := h.run("", "knowledge", "spaces")
	r.want(t, 1, "", transErr)
	if r.elapsed > 10*time.Second {
		t.Fatalf("took %s", r.elapsed)
	}
	h.mustMode("cancel")
	delete(h.env, agentstub.EnvTestKnowledgeTimeout)
	held, release := h.stub.HoldKnowledge()
	defer release()
	s := startBin(t, h, "knowledge", "spaces")
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("never reached the stub")
	}
	release()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := s.wait(); r.code != 1 || r.stdout != "" || r.stderr != transErr {
		t.Fatalf("after SIGTERM: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
