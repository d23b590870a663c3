package e2e

// The shellctl command line as a user drives it: the real binary against a
// real server, with pipes, and in a real terminal (tmux on its own socket,
// keys sent with send-keys, the screen read with capture-pane).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// cliResult is what one shellctl invocation did.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cliEnv is the environment of shellctl client invocations against s.
func cliEnv(t *testing.T, s *server) []string {
	env := []string{"PATH=" + binDir + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	if s != nil {
		env = append(env, "SHELLCTL_URL="+s.URL)
		if s.Token != "" {
			env = append(env, "SHELLCTL_AUTH_TOKEN="+s.Token)
		}
	}
	return env
}

// cli runs shellctl args in dir against s (nil: no server configured),
// with stdin.
func cli(t *testing.T, s *server, dir, stdin string, args ...string) cliResult {
	t.Helper()
	return cliWithEnv(t, s, dir, stdin, nil, args...)
}

// cliWithEnv is cli with more variables in shellctl's environment.
func cliWithEnv(t *testing.T, s *server, dir, stdin string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), filepath.Join(binDir, "shellctl"), args...)
	cmd.Dir = dir
	cmd.Env = append(cliEnv(t, s), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("shellctl %q: %v", args, err)
	}
	return r
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

func TestCLIRunCwdStreamsAndExitCode(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	r := cli(t, s, dir, "", "run", "pwd; echo hi; exit 3")
	if r.code != 3 || r.stdout != dir+"\nhi\n" {
		t.Fatalf("run in %s: %v; want the caller's cwd, hi and exit 3", dir, r)
	}
	other := t.TempDir()
	if r := cli(t, s, dir, "", "run", "--cwd", other, "pwd"); r.code != 0 || r.stdout != other+"\n" {
		t.Errorf("run --cwd %s: %v", other, r)
	}
	// Words are joined as a shell command; "-" reads the script from stdin.
	if r := cli(t, s, dir, "echo from stdin; exit 0", "run", "-"); r.code != 0 || r.stdout != "from stdin\n" {
		t.Errorf("run -: %v", r)
	}
	// stdio: the job's stderr comes on ours, its stdout on ours.
	r = cli(t, s, dir, "", "run", "--mode", "stdio", "echo out; echo err >&2; exit 5")
	if r.code != 5 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("run --mode stdio: %v; want out on stdout, err on stderr, exit 5", r)
	}
	// Output that comes over time arrives whole and in order.
	r = cli(t, s, dir, "", "run", "for i in 1 2 3; do echo tick $i; sleep 0.3; done")
	if r.code != 0 || r.stdout != "tick 1\ntick 2\ntick 3\n" {
		t.Errorf("run of a job that prints over time: %v", r)
	}
	// -d: the id, at once, of a job that runs on.
	r = cli(t, s, dir, "", "run", "-d", "sleep 30")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 16 {
		t.Fatalf("run -d: %v", r)
	}
	st, err := s.c.Status(ctx(t), id)
	if err != nil || st.Done {
		t.Errorf("the detached job: %+v %v, want it running", st, err)
	}
	// --json: the record at the end, nothing else on stdout.
	r = cli(t, s, dir, "", "run", "--json", "echo x; exit 2")
	var rec map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || r.code != 2 || rec["exit_code"] != 2.0 || rec["cwd"] != dir {
		t.Errorf("run --json: %v (%v)", r, err)
	}
}

// A job whose environment shows make's variables would change every make
// it runs; make run must start the server without them.
func TestCLIMakeRunCleanEnvironment(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	// The Makefile of the repository, run in a directory whose bin/ holds
	// the binaries under test (GO=true: the build step builds nothing).
	work := t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	mk, err := filepath.Abs("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command("make", "-f", mk, "-C", work, "run", "GO=true",
		"RUN_ARGS=--listen 127.0.0.1:0 --state-dir "+state+" --warm-runners 0")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "MAKEFLAGS=-j2", "SHELLCTL_FROM_CALLER=1", "TERM=xterm"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errb := newSyncBuffer()
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // the group this test started
		cmd.Wait()
	})
	url := errb.waitMatch(t, serving)
	s := &server{t: t, URL: url}
	r := cli(t, s, t.TempDir(), "", "run", "env")
	if r.code != 0 {
		t.Fatalf("run env under make run: %v", r)
	}
	for _, bad := range []string{"MAKEFLAGS=", "MAKELEVEL=", "MFLAGS=", "SHELLCTL_FROM_CALLER=", "MAKE_TERMOUT"} {
		if strings.Contains(r.stdout, "\n"+bad) || strings.HasPrefix(r.stdout, bad) {
			t.Errorf("a job under make run sees %s…:\n%s", bad, r.stdout)
		}
	}
	// make run's Home is a sandbox under the checkout, never the caller's.
	if sandbox := filepath.Join(work, ".run", "home"); !strings.Contains(r.stdout, "HOME="+sandbox+"\n") || strings.Contains(r.stdout, "HOME="+home+"\n") {
		t.Errorf("the job's HOME is not make run's sandbox %s:\n%s", sandbox, r.stdout)
	}
}

func TestCLIExitCodesOfClientFailures(t *testing.T) {
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	r := cli(t, nil, dir, "", "--server", addr, "ps")
	want := "cannot reach the shellctl server at http://" + addr + ": is a server running? start one with `shellctl serve`"
	if r.code != 125 || !strings.Contains(r.stderr, want) {
		t.Errorf("ps against no server: %v; want 125 and %q", r, want)
	}
	if strings.Contains(r.stderr, "dial tcp") {
		t.Errorf("the raw dial error shows: %s", r.stderr)
	}
	s := startServer(t, serverOpts{})
	u := strings.TrimPrefix(s.URL, "http://")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--server", u, "run", "exit 0"}, 0, ""},
		{[]string{"--json", "--server", u, "ps"}, 0, ""},             // client flags before the verb
		{[]string{"serve", "--json"}, 2, "not of serve"},             // host:port
		{[]string{"--server", s.URL + "/", "run", "exit 0"}, 0, ""},  // a URL with a slash
		{[]string{"--server", "127.0.0.1:99999", "ps"}, 125, "port"}, // no such port
		{[]string{"--server", "http://", "ps"}, 125, "is not a server address"},
		{[]string{"status", "0123456789abcdef"}, 125, "404"},                                          // no such job
		{[]string{"logs", "0123456789abcdef"}, 125, "404"},                                            // no such job
		{[]string{"inspect", "0123456789abcdef"}, 125, "after they end: the server's --gc-retention"}, // and why it may be gone
		{[]string{"wait"}, 125, "accepts 1 arg"},                                                      // usage
		{[]string{"ps", "--bogus"}, 125, "unknown flag"},                                              // usage
		{[]string{"nosuchverb"}, 125, "unknown command"},                                              // usage
		{[]string{"run", "--mode", "tty", "true"}, 125, "--mode"},                                     // usage
		{[]string{"run", "exit 126"}, 126, ""},                                                        // a job's own 126
		{[]string{"run", "exit 127"}, 127, ""},                                                        // and 127
		{[]string{"run", "--cwd", "/nonexistent-dir", "true"}, 125, "--cwd"},
	} {
		r := cli(t, s, dir, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("shellctl %q: %v; want exit %d and %q on stderr", tc.args, r, tc.code, tc.want)
		}
	}
	// serve keeps its own codes (1 failure, 2 usage).
	if r := cli(t, nil, dir, "", "serve", "--token", "a", "--token-file", "/x"); r.code != 2 {
		t.Errorf("serve with both token flags: %v, want 2", r)
	}
}

func TestCLIPsInspectLogsKillRmWait(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	cli(t, s, dir, "", "run", "echo one; exit 4")
	r := cli(t, s, dir, "", "run", "-d", "--mode", "stdio", "echo started; echo warn >&2; exec sleep 60")
	long := strings.TrimSpace(r.stdout)
	// The job's first line is out once a wait answers with it (and then
	// it runs).
	if res, err := s.c.Wait(ctx(t), long, client.WaitRequest{Timeout: f64(30)}); err != nil || res.Output != "started\n" {
		t.Fatalf("wait for the detached job's output: %+v %v", res, err)
	}

	// ps: the jobs not ended, as docker's; -a all of them.
	r = cli(t, s, dir, "", "ps")
	if lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], long+" ") {
		t.Errorf("ps lists other than the running job: %v", r)
	}
	r = cli(t, s, dir, "", "ps", "-a")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID STATUS EXIT MODE AGE COMMAND" {
		t.Fatalf("ps -a: %v", r)
	}
	row := regexp.MustCompile(`^` + long + ` +running +- +stdio +\d+s +echo started; echo warn >&2; exec sleep 60$`)
	if !row.MatchString(lines[1]) {
		t.Errorf("ps row of the running job: %q", lines[1])
	}
	if !regexp.MustCompile(`^[0-9a-f]{16} +exited +4 +pty +\d+s +echo one; exit 4$`).MatchString(lines[2]) {
		t.Errorf("ps row of the exited job: %q", lines[2])
	}
	if r := cli(t, s, dir, "", "jobs", "-q", "--status", "running"); r.stdout != long+"\n" {
		t.Errorf("jobs -q --status running: %v", r)
	}
	// --format: a template over the row, or json one object a line.
	if r := cli(t, s, dir, "", "ps", "-a", "--format", "{{.JobID}} {{.Status}} {{.ExitCode}}"); r.code != 0 ||
		!regexp.MustCompile(`^`+long+` running -\n[0-9a-f]{16} exited 4\n$`).MatchString(r.stdout) {
		t.Errorf("ps -a --format: %v", r)
	}
	r = cli(t, s, dir, "", "ps", "--format", "json")
	var jrow map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &jrow); err != nil || strings.Count(r.stdout, "\n") != 1 || jrow["job_id"] != long || jrow["mode"] != "stdio" {
		t.Errorf("ps --format json: %v (%v)", r, err)
	}
	if r := cli(t, s, dir, "", "ps", "--format", "{{.Nope}}"); r.code != 125 || !strings.Contains(r.stderr, "Nope") {
		t.Errorf("ps --format with an unknown field: %v", r)
	}
	r = cli(t, s, dir, "", "ps", "-a", "--json")
	var list struct {
		Jobs []struct {
			JobID    string  `json:"job_id"`
			Status   string  `json:"status"`
			ExitCode *int    `json:"exit_code"`
			Mode     string  `json:"mode"`
			Command  *string `json:"command"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Jobs) != 2 || list.Jobs[1].ExitCode == nil ||
		*list.Jobs[1].ExitCode != 4 || list.Jobs[0].Command == nil || list.Jobs[0].Mode != "stdio" {
		t.Errorf("ps --json: %v (%v)", r, err)
	}

	r = cli(t, s, dir, "", "inspect", long)
	var rec map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec["job_id"] != long || rec["mode"] != "stdio" || rec["cwd"] != dir {
		t.Errorf("inspect: %v (%v)", r, err)
	}

	// A stdio job's stderr comes on ours, as docker logs does.
	if r := cli(t, s, dir, "", "logs", long); r.stdout != "started\n" || r.stderr != "warn\n" {
		t.Errorf("logs: %v", r)
	}
	if r := cli(t, s, dir, "", "logs", "--stderr", long); r.stdout != "warn\n" {
		t.Errorf("logs --stderr: %v", r)
	}
	if r := cli(t, s, dir, "", "logs", "--since-offset", "4", long); r.stdout != "ted\n" {
		t.Errorf("logs --since-offset 4: %v", r)
	}

	// rm of a running job says what to pass.
	r = cli(t, s, dir, "", "rm", long)
	if r.code != 125 || !strings.Contains(r.stderr, "pass -f (--force)") || strings.Contains(r.stderr, "force=true") {
		t.Errorf("rm of a running job: %v", r)
	}
	// kill -s: one signal; logs -f and wait see the job end by it.
	follow := exec.Command(filepath.Join(binDir, "shellctl"), "logs", "-f", long)
	follow.Env = cliEnv(t, s)
	var fout, ferr bytes.Buffer
	follow.Stdout, follow.Stderr = &fout, &ferr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, s, dir, "", "kill", "-s", "TERM", long); r.code != 0 || r.stdout != long+"\n" {
		t.Errorf("kill -s TERM: %v", r)
	}
	if err := follow.Wait(); err != nil || fout.String() != "started\n" || ferr.String() != "warn\n" {
		t.Errorf("logs -f: %v, %q, stderr %q", err, fout.String(), ferr.String())
	}
	r = cli(t, s, dir, "", "wait", long)
	if r.code != 143 || r.stdout != "143\n" {
		t.Errorf("wait on a job ended by SIGTERM: %v, want 143", r)
	}
	if r := cli(t, s, dir, "", "kill", "-s", "NOPE", long); r.code != 125 {
		t.Errorf("kill -s NOPE: %v", r)
	}
	// kill without -s ends the tree; rm -f removes running ones; rm many.
	a := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "sleep 60").stdout)
	b := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "sleep 60").stdout)
	if r := cli(t, s, dir, "", "kill", "--grace", "1", a); r.code != 0 {
		t.Errorf("kill: %v", r)
	}
	if st, _ := s.c.Status(ctx(t), a); st == nil || st.Status != "terminated" {
		t.Errorf("after kill: %+v", st)
	}
	if r := cli(t, s, dir, "", "rm", "-f", a, b, long); r.code != 0 || r.stdout != a+"\n"+b+"\n"+long+"\n" {
		t.Errorf("rm -f: %v", r)
	}
	if r := cli(t, s, dir, "", "ps", "-a", "-q"); strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("ps -a -q after rm: %v", r)
	}
}

func TestCLIHelpTexts(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		want     []string
		dontWant []string
	}{
		{[]string{"terminate", "--help"}, []string{"--grace seconds"}, []string{"(default -1)"}},
		{[]string{"kill", "--help"}, []string{"-s, --signal"}, []string{"(default -1)"}},
		{[]string{"rm", "--help"}, []string{"-f, --force"}, []string{"(default -1)"}},
		{[]string{"ps", "--help"}, []string{"--server string", "host:port"}, []string{`(default "http`}},
		{[]string{"serve", "--help"}, []string{"--listen"}, []string{"--server", "--auth-token", "--json"}},
		{[]string{"input", "--help"}, []string{"(default 30)"}, []string{"(default 5)"}},
		{[]string{"completion", "--help"}, []string{"bash", "zsh", "fish"}, []string{"--server"}},
		{[]string{"--help"}, []string{"125", "attach", "logs", "inspect", "stop"}, nil},
		{[]string{"attach", "--help"}, []string{"--since-offset int"}, []string{"(default )"}},
		{[]string{"ps", "--help"}, []string{"-a, --all", "--format", "--no-trunc", "--gc-retention (5m by default)"}, []string{"(default )"}},
		{[]string{"logs", "--help"}, []string{"--tail N", "--gc-retention (5m by default)", "stderr comes on your stderr"}, []string{"(default )"}},
		{[]string{"kill", "--help"}, []string{"SIGKILL to its whole", "stop is the polite way"}, nil},
		{[]string{"stop", "--help"}, []string{"terminate, stop", "-t, --grace"}, nil},
		{[]string{"run", "--help"}, []string{"-t, --tty", "-e NAME passes your own value", "shellctl run ls -la"}, nil},
		{[]string{"mcp", "--help"}, []string{"--token-file string", "--auth-token"}, nil},
	} {
		r := cli(t, nil, dir, "", tc.args...)
		if r.code != 0 {
			t.Errorf("shellctl %q: %v", tc.args, r)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("shellctl %q lacks %q:\n%s", tc.args, w, r.stdout)
			}
		}
		for _, w := range tc.dontWant {
			if strings.Contains(r.stdout, w) {
				t.Errorf("shellctl %q shows %q:\n%s", tc.args, w, r.stdout)
			}
		}
		// serve shows its own --token-file (the server's token), once.
		if tc.args[0] == "serve" && (strings.Count(r.stdout, "--token-file") < 1 || len(regexp.MustCompile(`(?m)^\s+--token-file`).FindAllString(r.stdout, -1)) != 1 ||
			!strings.Contains(r.stdout, "/proc never shows it")) {
			t.Errorf("serve --help does not show its own --token-file once:\n%s", r.stdout)
		}
		if regexp.MustCompile(`\(default [^)]*\)\s*\(default`).MatchString(r.stdout) || strings.Contains(r.stdout, "(default $SHELLCTL_URL, else http://127.0.0.1:8765) (default") {
			t.Errorf("shellctl %q shows a default twice:\n%s", tc.args, r.stdout)
		}
	}
	for _, arg := range []string{"--help", "-h"} {
		out, err := exec.Command(filepath.Join(binDir, "shellctl-runner"), arg).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "shellctl serve starts it") || strings.Contains(string(out), "unknown argument") {
			t.Errorf("shellctl-runner %s: %v %q", arg, err, out)
		}
	}
}

func TestCLICompletion(t *testing.T) {
	dir := t.TempDir()
	for shell, want := range map[string]string{"bash": "__start_shellctl", "zsh": "#compdef shellctl", "fish": "complete -c shellctl"} {
		if r := cli(t, nil, dir, "", "completion", shell); r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, lacks %q", shell, r.code, want)
		}
	}
	// Job ids complete from the server.
	s := startServer(t, serverOpts{})
	id := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "sleep 30").stdout)
	r := cli(t, s, dir, "", "__complete", "logs", id[:3])
	if !regexp.MustCompile(`(?m)^` + id + `\t(starting|running)$`).MatchString(r.stdout) {
		t.Errorf("completing a job id: %v", r)
	}
}

func TestCLISnapshotSaveErrorsNameThePath(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	r := cli(t, s, dir, "", "snapshot", "save", "-o", "/nonexistent/x.zst")
	if r.code != 125 || !strings.Contains(r.stderr, "/nonexistent/x.zst") || strings.Contains(r.stderr, "partial") {
		t.Errorf("save to a missing directory: %v", r)
	}
	// Not on a terminal: no progress line.
	r = cli(t, s, dir, "", "snapshot", "save", "-o", filepath.Join(dir, "h.tar.zst"))
	if r.code != 0 || strings.Contains(r.stderr, "/s)") || strings.Contains(r.stderr, "holds") {
		t.Errorf("save off a terminal: %v", r)
	}
}

// tmuxT is a tmux server of its own (its own socket), one window.
type tmuxT struct {
	t    *testing.T
	sock string
	dir  string
	out  *syncBuffer // everything the pane showed (pipe-pane)
}

func newTmux(t *testing.T, s *server, dir string, cols, rows int) *tmuxT {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	m := &tmuxT{t: t, sock: fmt.Sprintf("shellctl-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()), dir: dir}
	// The pane's shell gets exactly the client's environment (tmux's own
	// would otherwise win for PATH).
	shell := "env -i"
	for _, kv := range append(cliEnv(t, s), "TERM=screen", "TMUX_SOCK="+m.sock, "PS1=$ ") {
		shell += " " + shellQuote(kv)
	}
	shell += " bash --norc --noprofile -i"
	m.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), "-c", dir, shell)
	t.Cleanup(func() { exec.Command("tmux", "-L", m.sock, "kill-server").Run() })
	m.tmux("set-option", "-g", "status", "off")
	// What the pane shows comes through a fifo, so a test waits for text
	// on the screen as it arrives.
	p := filepath.Join(t.TempDir(), "pane")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	m.out = newSyncBuffer()
	go func() {
		if f, err := os.Open(p); err == nil {
			io.Copy(m.out, f)
			f.Close()
		}
	}()
	m.tmux("pipe-pane", "-t", "t", "cat > "+shellQuote(p))
	return m
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (m *tmuxT) tmux(args ...string) string {
	m.t.Helper()
	out, err := exec.CommandContext(ctx(m.t), "tmux", append([]string{"-L", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %q: %v %s", args, err, out)
	}
	return string(out)
}

// line types a command line in the pane and presses Enter.
func (m *tmuxT) line(s string) {
	m.tmux("send-keys", "-t", "t", "-l", s)
	m.tmux("send-keys", "-t", "t", "Enter")
}

func (m *tmuxT) keys(k ...string) { m.tmux(append([]string{"send-keys", "-t", "t"}, k...)...) }

// waitFor waits until the pane signals channel ch (tmux wait-for -S).
func (m *tmuxT) waitFor(ch string) {
	m.t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(c, "tmux", "-L", m.sock, "wait-for", ch).CombinedOutput(); err != nil {
		m.t.Fatalf("waiting for %s: %v %s\nscreen:\n%s", ch, err, out, m.screen())
	}
}

// waitText waits until the pane has shown text.
func (m *tmuxT) waitText(text string) {
	m.t.Helper()
	m.out.waitMatch(m.t, regexp.MustCompile("()"+regexp.QuoteMeta(text)))
}

func (m *tmuxT) screen() string {
	out, _ := exec.Command("tmux", "-L", m.sock, "capture-pane", "-p", "-J", "-t", "t", "-S", "-200").CombinedOutput()
	return string(out)
}

// afterwards is what the pane does once a command ends: its exit code and
// its terminal settings to files, then the signal on channel ch.
func afterwards(ch string) string {
	return fmt.Sprintf(`echo $? > %[1]s.rc; stty -g > %[1]s.after; stty -a > %[1]s.stty; tmux -L "${TMUX_SOCK}" wait-for -S %[1]s`, ch)
}

// checkRestored checks the terminal settings after run ch equal those
// before (saved by the pane in before) and are a sane cooked terminal.
func (m *tmuxT) checkRestored(ch string) {
	m.t.Helper()
	before, _ := os.ReadFile(filepath.Join(m.dir, "before"))
	after, _ := os.ReadFile(filepath.Join(m.dir, ch+".after"))
	if len(before) == 0 || !bytes.Equal(before, after) {
		m.t.Errorf("%s: terminal settings changed: before %q, after %q", ch, before, after)
	}
	sttyA, _ := os.ReadFile(filepath.Join(m.dir, ch+".stty"))
	for _, f := range []string{"icanon", "echo", "isig", "opost", "icrnl"} {
		if !regexp.MustCompile(`(^|\s)` + f + `(\s|$)`).Match(sttyA) {
			m.t.Errorf("%s: stty -a after shows no %s:\n%s", ch, f, sttyA)
		}
	}
}

func (m *tmuxT) rc(ch string) int {
	m.t.Helper()
	b, err := os.ReadFile(filepath.Join(m.dir, ch+".rc"))
	n, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || err2 != nil {
		m.t.Fatalf("%s.rc: %v %v %q", ch, err, err2, b)
	}
	return n
}

// fifo makes a named pipe in dir; read returns what one writer wrote.
func fifo(t *testing.T, dir, name string) func() string {
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() string {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			b, _ := os.ReadFile(p) // blocks until a writer opened and closed it
			got <- strings.TrimSpace(string(b))
		}()
		select {
		case s := <-got:
			return s
		case <-time.After(60 * time.Second):
			t.Fatalf("nothing came through %s", p)
			return ""
		}
	}
}

func TestCLITerminalCtrlC(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	ready := fifo(t, dir, "ready")
	m := newTmux(t, s, dir, 100, 30)
	m.line(`stty -g > before`)

	// One Ctrl-C: the job gets SIGINT (its trap prints), and shellctl
	// exits with the job's code.
	m.line(`shellctl run 'trap "echo got INT; exit 42" INT; stty size; echo up > ready; while :; do sleep 0.1; done'; ` + afterwards("one"))
	if got := ready(); got != "up" {
		t.Fatalf("ready: %q", got)
	}
	m.keys("C-c")
	m.waitFor("one")
	scr := m.screen()
	if rc := m.rc("one"); rc != 42 {
		t.Errorf("shellctl run after Ctrl-C exited %d, want the job's 42:\n%s", rc, scr)
	}
	for _, w := range []string{"got INT", "sent SIGINT to job", "30 100"} {
		if !strings.Contains(scr, w) {
			t.Errorf("the screen lacks %q:\n%s", w, scr)
		}
	}
	m.checkRestored("one")

	// Two Ctrl-C within a few seconds: a job that ignores SIGINT is
	// terminated, and shellctl still exits with its code.
	m.line(`clear; shellctl run 'trap "echo ignored INT" INT; echo up > ready; while :; do sleep 0.1; done'; ` + afterwards("two"))
	if got := ready(); got != "up" {
		t.Fatalf("ready: %q", got)
	}
	m.keys("C-c")
	// A person's second Ctrl-C comes after the first was seen (two at
	// once merge into one pending SIGINT in the kernel).
	m.waitText("\nignored INT") // the trap's line, not the command's echo
	m.keys("C-c")
	m.waitFor("two")
	scr = m.screen()
	id := regexp.MustCompile(`terminating job ([0-9a-f]{16})`).FindStringSubmatch(scr)
	if id == nil {
		t.Fatalf("no 'terminating job' on the screen:\n%s", scr)
	}
	st, err := s.c.Status(ctx(t), id[1])
	if err != nil || st.Status != "terminated" || st.ExitCode == nil {
		t.Fatalf("the job after two Ctrl-C: %+v %v", st, err)
	}
	if rc := m.rc("two"); rc != *st.ExitCode || rc == 0 {
		t.Errorf("shellctl run exited %d, the job %d:\n%s", rc, *st.ExitCode, scr)
	}
	m.checkRestored("two")
}

// attachJob is a pty job for attach: it tells each window change (its new
// size) through the fifo winch and each line read through in, prints each
// line with its terminal size, and exits 7 on "quit".
const attachJob = `trap 'stty size > winch' WINCH; echo up > ready
while :; do
  if read -r l; then
    [ "$l" = quit ] && exit 7
    echo "got:$l size:$(stty size)"
    echo "$l" > in
  fi
done`

func TestCLITerminalAttach(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	ready, winch, in := fifo(t, dir, "ready"), fifo(t, dir, "winch"), fifo(t, dir, "in")
	start := func() string {
		t.Helper()
		r := cli(t, s, dir, "", "run", "-d", attachJob)
		if r.code != 0 {
			t.Fatalf("run -d: %v", r)
		}
		if got := ready(); got != "up" {
			t.Fatalf("ready: %q", got)
		}
		return strings.TrimSpace(r.stdout)
	}
	id := start()
	m := newTmux(t, s, dir, 100, 30)
	m.line(`stty -g > before`)

	// Attach: the job's terminal takes the pane's size, typing reaches
	// it, a resize reaches it, Ctrl-P Ctrl-Q detaches.
	m.line(`shellctl attach ` + id + `; ` + afterwards("detach"))
	if got := winch(); got != "30 100" {
		t.Fatalf("after attach the job's terminal is %q, want the pane's 30 100", got)
	}
	m.line("hello")
	if got := in(); got != "hello" {
		t.Fatalf("the job read %q, want hello", got)
	}
	m.tmux("resize-window", "-t", "t", "-x", "90", "-y", "25")
	if got := winch(); got != "25 90" {
		t.Fatalf("after resize-window the job's terminal is %q, want 25 90", got)
	}
	m.line("again")
	if got := in(); got != "again" {
		t.Fatalf("the job read %q, want again", got)
	}
	m.waitText("got:again size:25 90")
	m.keys("C-p", "C-q")
	m.waitFor("detach")
	scr := m.screen()
	if rc := m.rc("detach"); rc != 0 {
		t.Errorf("attach after detach exited %d:\n%s", rc, scr)
	}
	for _, w := range []string{"got:hello size:30 100", "got:again size:25 90", "detached from job " + id} {
		if !strings.Contains(scr, w) {
			t.Errorf("the screen lacks %q:\n%s", w, scr)
		}
	}
	m.checkRestored("detach")
	if st, err := s.c.Status(ctx(t), id); err != nil || st.Status != "running" {
		t.Fatalf("after detach the job is %+v %v, want running", st, err)
	}

	// Attach again; the job ends: attach exits with its code.
	m.line(`clear; shellctl attach --since-offset 0 ` + id + `; ` + afterwards("end"))
	m.line("quit")
	m.waitFor("end")
	scr = m.screen()
	if rc := m.rc("end"); rc != 7 {
		t.Errorf("attach to a job that exits 7 exited %d:\n%s", rc, scr)
	}
	if !strings.Contains(scr, "got:hello size:30 100") {
		t.Errorf("--since-offset 0 did not replay the output:\n%s", scr)
	}
	m.checkRestored("end")

	// SIGTERM to attach: it leaves, and the terminal is restored too.
	id = start()
	m.line(`clear; shellctl attach ` + id + `; ` + afterwards("term"))
	if got := winch(); got != "25 90" {
		t.Fatalf("after attach the job's terminal is %q, want 25 90", got)
	}
	pid := paneChild(t, m)
	syscall.Kill(pid, syscall.SIGTERM) // the shellctl attach this test started
	m.waitFor("term")
	if rc := m.rc("term"); rc != 128+15 {
		t.Errorf("attach after SIGTERM exited %d, want 143:\n%s", rc, m.screen())
	}
	m.checkRestored("term")

	// Attach to a job that is done: an error, and no raw terminal. (Done
	// before the attach: run -d answers once the job runs, and a loaded
	// machine may still be ending it when the attach comes.)
	doneID := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "true").stdout)
	if r := cli(t, s, dir, "", "wait", doneID); r.code != 0 {
		t.Fatalf("wait for %s: exit %d: %s", doneID, r.code, r.stderr)
	}
	m.line(`clear; shellctl attach ` + doneID + `; ` + afterwards("done"))
	m.waitFor("done")
	if rc := m.rc("done"); rc != 125 {
		t.Errorf("attach to a finished job exited %d:\n%s", rc, m.screen())
	}
	m.checkRestored("done")
}

// paneChild is the pid of the one child of the pane's shell (the command
// it runs now).
func paneChild(t *testing.T, m *tmuxT) int {
	t.Helper()
	shell, err := strconv.Atoi(strings.TrimSpace(m.tmux("display-message", "-p", "-t", "t", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", shell, shell))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 1 {
		t.Fatalf("children of the pane's shell: %q %v", b, err)
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

func TestCLITerminalSnapshotProgress(t *testing.T) {
	s := startServer(t, serverOpts{})
	if err := os.WriteFile(filepath.Join(s.Home, "data"), bytes.Repeat([]byte("shellctl "), 1<<17), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := newTmux(t, s, dir, 150, 30)
	m.line(`stty -g > before`)
	// --announce-size (hidden) lowers the size from which Home is
	// announced, so a small Home shows the message.
	m.line(`shellctl snapshot save -o home.tar.zst --announce-size 1KiB; ` + afterwards("save"))
	m.waitFor("save")
	scr := m.screen()
	if m.rc("save") != 0 {
		t.Fatalf("snapshot save:\n%s", scr)
	}
	if !regexp.MustCompile(`Home \(` + regexp.QuoteMeta(s.Home) + `\) holds \d+\.\d [KMG]iB on disk`).MatchString(scr) {
		t.Errorf("no size of Home before the save:\n%s", scr)
	}
	if !regexp.MustCompile(`saved \S+ \S* ?in \S+ \(\S+ ?\S*/s\)`).MatchString(scr) {
		t.Errorf("no progress (bytes, rate) on the terminal:\n%s", scr)
	}
	if r := cli(t, s, dir, "", "ps", "-q"); r.stdout != "" {
		t.Errorf("the job that counted Home is left: %v", r)
	}
}

// syncBuffer is a bytes.Buffer written by one goroutine and matched by
// another.
type syncBuffer struct {
	mu   chanMutex
	buf  bytes.Buffer
	grew chan struct{}
}

type chanMutex chan struct{}

func newSyncBuffer() *syncBuffer {
	return &syncBuffer{mu: make(chanMutex, 1), grew: make(chan struct{})}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	b.buf.Write(p)
	close(b.grew)
	b.grew = make(chan struct{})
	return len(p), nil
}

// waitMatch waits until re matches what was written and returns its first
// group.
func (b *syncBuffer) waitMatch(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		b.mu <- struct{}{}
		m := re.FindStringSubmatch(b.buf.String())
		grew := b.grew
		text := b.buf.String()
		<-b.mu
		if m != nil {
			return m[1]
		}
		select {
		case <-grew:
		case <-deadline:
			t.Fatalf("no match for %s in %q", re, text)
		}
	}
}

// readmeBlock is the first ```sh block after marker in README.md.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("README.md has no %q", marker)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "\n```")
	if start < 0 || end < 0 {
		t.Fatalf("no sh block after %q", marker)
	}
	return s[start+6 : start+6+end+1]
}

// TestCLIReadmeExamples runs the README's command line examples exactly as
// written: the first block by bash -e in a directory whose bin/ holds the
// binaries under test, the terminal block typed into tmux.
func TestCLIReadmeExamples(t *testing.T) {
	s := startServer(t, serverOpts{})
	block := readmeBlock(t, "<!-- cli-examples:")
	work := t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx(t), "bash", "-e", "-c", block)
	cmd.Dir = work
	cmd.Env = append(cliEnv(t, s), "TMPDIR="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's examples: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	got := out.String()
	for _, re := range []string{
		`(?m)^tests pass in /\S+/tmp\.\w+$`,                 // make ran where the example cd'd
		`(?m)^out$`, `(?m)^a\nb$`, `(?m)^the job exited 3$`, // a b: sort fed by run -i --stdio
		`(?m)^ID +STATUS +EXIT +MODE +AGE +COMMAND$`,
		`(?m)^tick 1\ntick 2\ntick 3\n0\n\{`, // logs -f, then wait's 0, then the record
		`hi ada`, `(?m)^ended by SIGINT: 130$`,
		`(?m)^hi ada\n[0-9a-f]{16} exited 0\n`,                                       // logs --tail 1, then ps -a --format's newest row
		`(?m)^screen 200x50 cursor 49,\d+ alt-screen\n52\n(?:.*\n){47}100\n\(END\)$`, // keys G in less (no terminal: 200x50)
		`(?m)^screen 200x50 cursor \d+,\d+ main-screen$`,                             // keys q
	} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("the examples' output lacks %s:\n%s", re, got)
		}
	}
	if !regexp.MustCompile(`(?m)^err$`).MatchString(errb.String()) {
		t.Errorf("the stdio job's stderr did not come on stderr: %q", errb.String())
	}
	if _, err := os.Stat(filepath.Join(work, "home.tar.zst")); err == nil {
		t.Errorf("the snapshot went to the start directory, not the example's own")
	}

	// The terminal block, line by line, in a terminal.
	dir := t.TempDir()
	m := newTmux(t, s, dir, 100, 30)
	m.line(`stty -g > before`)
	lines := strings.Split(strings.TrimSpace(readmeBlock(t, "<!-- cli-terminal-examples:")), "\n")
	for _, l := range lines {
		m.line(l)
	}
	// Typed once attach has drawn the job's screen: typed before, the
	// answer may be part of that redraw (cursor-addressed) rather than
	// come as the job's own output.
	m.waitText("\x1b[H\x1b[2J")
	m.line("echo $((6*7))")
	m.waitText("\r42\r\n") // the raw terminal: bash's own line ends
	m.keys("C-p", "C-q")
	m.waitText("detached from job")
	m.line(afterwards("readme")) // $? is still attach's
	m.waitFor("readme")
	if rc := m.rc("readme"); rc != 0 {
		t.Errorf("attach after detach: %d\n%s", rc, m.screen())
	}
	m.checkRestored("readme")
}

func TestCLITerminalRunInteractive(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	m := newTmux(t, s, dir, 100, 30)
	m.line(`stty -g > before`)
	m.line(`shellctl run -i 'printf "name? "; read -r n; echo "hi $n"; exit 3'; ` + afterwards("i"))
	m.waitText("\rname? ") // the job's prompt, not the command's echo
	m.line("ada")
	m.waitFor("i")
	if rc := m.rc("i"); rc != 3 {
		t.Errorf("run -i exited %d, want the job's 3:\n%s", rc, m.screen())
	}
	m.waitText("hi ada")
	m.checkRestored("i")
	// Not a terminal: stdin goes to the job all the same.
	if r := cli(t, s, dir, "ada\n", "run", "-i", `read -r n; echo "hi $n"`); r.code != 0 || !strings.Contains(r.stdout, "hi ada") {
		t.Errorf("run -i with a pipe: %v", r)
	}
	// With a stdio job -i pipes stdin to it (TestCLIRunInteractiveStdio).
	if r := cli(t, s, dir, "", "run", "-i", "--mode", "stdio", "true"); r.code != 0 {
		t.Errorf("run -i --mode stdio: %v", r)
	}
}

// TestCLIStreamsByteExact: with the stream route, what run, logs and
// logs -f print is the job's bytes exactly, bytes that are not UTF-8
// included (the wait route would send them as U+FFFD).
func TestCLIStreamsByteExact(t *testing.T) {
	s := startServer(t, serverOpts{})
	status, body, err := s.c.Do(ctx(t), "GET", "/v1/jobs/0123456789abcdef/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status == 404 && !strings.Contains(string(body), "job_not_found") {
		t.Skip("this server has no stream route")
	}
	dir := t.TempDir()
	script := `printf 'a\377b\n'; printf 'e\376\n' >&2`
	r := cli(t, s, dir, "", "run", "--mode", "stdio", script)
	if r.code != 0 || r.stdout != "a\xffb\n" || r.stderr != "e\xfe\n" {
		t.Fatalf("run: %v", r)
	}
	id := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "--mode", "stdio", script).stdout)
	cli(t, s, dir, "", "wait", id)
	for _, args := range [][]string{{"logs", id}, {"logs", "-f", id}} {
		if r := cli(t, s, dir, "", args...); r.stdout != "a\xffb\n" {
			t.Errorf("%q: %v", args, r)
		}
		if r := cli(t, s, dir, "", append(args, "--stderr")...); r.stdout != "e\xfe\n" {
			t.Errorf("%q --stderr: %v", args, r)
		}
	}
	// run -d answers once the job runs: a signal right after it reaches it.
	id = strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "sleep 600").stdout)
	if r := cli(t, s, dir, "", "kill", "-s", "INT", id); r.code != 0 {
		t.Errorf("kill -s INT right after run -d: %v", r)
	}
	if r := cli(t, s, dir, "", "wait", id); r.code != 130 {
		t.Errorf("wait: %v, want 130", r)
	}
}

// TestCLIDockerHabits: what docker users type works as they expect —
// flags end at the command (run ls -la), -t and -it, -e NAME, run -d of a
// job that cannot start, logs --tail, stop and kill, --token-file.
func TestCLIDockerHabits(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "afile"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Everything after the first word is the command's.
	if r := cli(t, s, dir, "", "run", "ls", "-la"); r.code != 0 || !strings.Contains(r.stdout, "total ") || !regexp.MustCompile(`(?m) afile\r?$`).MatchString(r.stdout) {
		t.Errorf("run ls -la: %v", r)
	}
	if r := cli(t, s, dir, "", "run", "--mode", "stdio", "echo", "-n", "no newline", "--json"); r.code != 0 || r.stdout != "no newline --json" {
		t.Errorf("run --mode stdio echo -n … --json: %v; want the words after the command left to it", r)
	}
	// -e NAME: the caller's value, or nothing when the caller has none.
	r := cliWithEnv(t, s, dir, "", []string{"FROM_CALLER=hello there"}, "run", "--mode", "stdio", "-e", "FROM_CALLER", "-e", "NOT_SET_HERE", "-e", "X=1",
		`echo "$FROM_CALLER|${NOT_SET_HERE-unset}|$X"`)
	if r.code != 0 || r.stdout != "hello there|unset|1\n" {
		t.Errorf("run -e NAME: %v", r)
	}
	// -t is a terminal (pty, the default); not with --mode stdio.
	if r := cli(t, s, dir, "", "run", "-t", "--mode", "stdio", "true"); r.code != 125 || !strings.Contains(r.stderr, "-t asks for a terminal") {
		t.Errorf("run -t --mode stdio: %v", r)
	}
	if r := cli(t, s, dir, "", "run", "-t", "tty -s && echo a terminal"); r.code != 0 || r.stdout != "a terminal\n" {
		t.Errorf("run -t: %v", r)
	}
	// -it: -i in a pty (stdin that is a pipe is typed all the same).
	if r := cli(t, s, dir, "ada\n", "run", "-it", `read -r n; echo "hi $n"`); r.code != 0 || !strings.Contains(r.stdout, "hi ada") {
		t.Errorf("run -it: %v", r)
	}
	// run -d: a job that ran and ended by itself is no failure of run's.
	if r := cli(t, s, dir, "", "run", "-d", "exit 3"); r.code != 0 || !regexp.MustCompile(`^[0-9a-f]{16}\n$`).MatchString(r.stdout) {
		t.Errorf("run -d of a job that exits 3 at once: %v", r)
	}

	// logs --tail N: the last N lines of each stream.
	id := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "--mode", "stdio", "seq 1 5; seq 11 13 >&2; printf last").stdout)
	cli(t, s, dir, "", "wait", id)
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"logs", "--tail", "2", id}, "5\nlast", "12\n13\n"},
		{[]string{"logs", "--tail", "2", "-f", id}, "5\nlast", "12\n13\n"},
		{[]string{"logs", "--tail", "0", id}, "", ""},
		{[]string{"logs", "--tail", "100", id}, "1\n2\n3\n4\n5\nlast", "11\n12\n13\n"},
		{[]string{"logs", "--tail", "all", id}, "1\n2\n3\n4\n5\nlast", "11\n12\n13\n"},
		{[]string{"logs", "--stderr", "--tail", "1", id}, "13\n", ""},
	} {
		if r := cli(t, s, dir, "", tc.args...); r.code != 0 || r.stdout != tc.stdout || r.stderr != tc.stderr {
			t.Errorf("%q: %v; want stdout %q, stderr %q", tc.args, r, tc.stdout, tc.stderr)
		}
	}
	if r := cli(t, s, dir, "", "logs", "--tail", "1", "--since-offset", "2", id); r.code != 125 {
		t.Errorf("logs --tail with --since-offset: %v", r)
	}

	// kill is docker's: SIGKILL to the tree at once, no trap runs; stop is
	// the polite one: SIGTERM, and the job's trap ends it.
	ready := fifo(t, dir, "ready")
	const trapper = `trap 'echo got TERM; exit 3' TERM; echo up > ready; while :; do sleep 0.1; done`
	a := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "--mode", "stdio", trapper).stdout)
	if got := ready(); got != "up" {
		t.Fatalf("ready: %q", got)
	}
	if r := cli(t, s, dir, "", "kill", a); r.code != 0 || r.stdout != a+"\n" {
		t.Errorf("kill: %v", r)
	}
	if r := cli(t, s, dir, "", "wait", a); r.code != 137 {
		t.Errorf("wait after kill: %v, want 137 (SIGKILL, no grace)", r)
	}
	if r := cli(t, s, dir, "", "logs", a); strings.Contains(r.stdout, "got TERM") {
		t.Errorf("kill sent SIGTERM first: %v", r)
	}
	b := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "--mode", "stdio", trapper).stdout)
	if got := ready(); got != "up" {
		t.Fatalf("ready: %q", got)
	}
	c := strings.TrimSpace(cli(t, s, dir, "", "run", "-d", "sleep 600").stdout)
	if r := cli(t, s, dir, "", "stop", b, c); r.code != 0 || !strings.Contains(r.stdout, b) || !strings.Contains(r.stdout, c) {
		t.Errorf("stop of two jobs: %v", r)
	}
	if r := cli(t, s, dir, "", "wait", b); r.code != 3 {
		t.Errorf("wait after stop: %v, want the trap's 3", r)
	}
	if st, err := s.c.Status(ctx(t), c); err != nil || st.Status != "terminated" {
		t.Errorf("the second job after stop: %+v %v", st, err)
	}
}

// run -d of a job that could not start: its id, then exit 125 with the
// record's reason (docker's run -d does the same). The server here has a
// runner beside it that dies at once, so no job of it ever starts.
func TestCLIRunDetachedStartFailure(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{"shellctl", "shellctl-stage", "shellctl-screen", "shellctl-runner-exit"} {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, b), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "shellctl-runner"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "shellctl"), "serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(t.TempDir(), "state"), "--warm-runners", "0")
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin"}
	errb := newSyncBuffer()
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // the server this test started
		cmd.Wait()
	})
	s := &server{t: t, URL: errb.waitMatch(t, serving)}
	r := cli(t, s, home, "", "run", "-d", "echo never")
	if r.code != 125 || !regexp.MustCompile(`^[0-9a-f]{16}\n$`).MatchString(r.stdout) || !strings.Contains(r.stderr, "could not start") {
		t.Errorf("run -d of a job that cannot start: %v; want its id, 125 and the reason", r)
	}
}

// --token-file and $SHELLCTL_AUTH_TOKEN_FILE work on every client verb,
// in the order serve reads its own: --auth-token, --token-file,
// $SHELLCTL_AUTH_TOKEN_FILE, $SHELLCTL_AUTH_TOKEN.
func TestCLITokenFile(t *testing.T) {
	s := startServer(t, serverOpts{token: "tok-for-the-cli-test"})
	anon := &server{t: t, URL: s.URL} // the client's environment holds no token
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("tok-for-the-cli-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, anon, dir, "", "ps"); r.code != 125 || !strings.Contains(r.stderr, "--token-file") {
		t.Errorf("ps without a token: %v; want 125 naming --token-file", r)
	}
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"ps", "--token-file", file}},
		{nil, []string{"--token-file", file, "ps", "-a"}},
		{[]string{"SHELLCTL_AUTH_TOKEN_FILE=" + file}, []string{"ps"}},
		{[]string{"SHELLCTL_AUTH_TOKEN=wrong"}, []string{"ps", "--token-file", file}},
		{[]string{"SHELLCTL_AUTH_TOKEN_FILE=" + file, "SHELLCTL_AUTH_TOKEN=wrong"}, []string{"ps"}},
		{[]string{"SHELLCTL_AUTH_TOKEN_FILE=/nonexistent"}, []string{"ps", "--auth-token", "tok-for-the-cli-test"}},
	} {
		if r := cliWithEnv(t, anon, dir, "", tc.env, tc.args...); r.code != 0 {
			t.Errorf("%v shellctl %q: %v", tc.env, tc.args, r)
		}
	}
	if r := cli(t, anon, dir, "", "run", "--token-file", file, "--mode", "stdio", "echo hi"); r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("run --token-file: %v", r)
	}
	if r := cli(t, anon, dir, "", "ps", "--auth-token", "x", "--token-file", file); r.code != 125 || !strings.Contains(r.stderr, "both given") {
		t.Errorf("both token flags: %v", r)
	}
	missing := filepath.Join(dir, "missing")
	if r := cli(t, anon, dir, "", "ps", "--token-file", missing); r.code != 125 || !strings.Contains(r.stderr, missing) {
		t.Errorf("a missing token file: %v", r)
	}
}

// TestCLIVersion: `shellctl version` and `--version` need no server; with
// --server, version also prints the server's version from GET /v1/info, and
// says so when there is no server there.
func TestCLIVersion(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, nil, dir, "", "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "shellctl ") || !strings.Contains(r.stdout, "commit ") || strings.Contains(r.stdout, "server") {
		t.Fatalf("version without a server: %v", r)
	}
	own := strings.Fields(r.stdout)[1]
	if r := cli(t, nil, dir, "", "--version"); r.code != 0 || strings.TrimSpace(r.stdout) != "shellctl "+own {
		t.Errorf("--version: %v, want shellctl %s", r, own)
	}
	s := startServer(t, serverOpts{})
	info, _ := s.info(t)
	r = cli(t, nil, dir, "", "version", "--server", s.URL, "--json")
	var ans struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
		Server  *struct {
			URL     string `json:"url"`
			Version string `json:"version"`
		} `json:"server"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil || r.code != 0 {
		t.Fatalf("version --server --json: %v (%v)", r, err)
	}
	if ans.Version != own || ans.Server == nil || ans.Server.Version != info.Version || ans.Server.URL != s.URL {
		t.Errorf("version --server --json: %s; want the client's %s and the server's %s at %s", r.stdout, own, info.Version, s.URL)
	}
	if r := cli(t, nil, dir, "", "version", "--server", s.URL); r.code != 0 || !strings.Contains(r.stdout, "server   "+info.Version+" at "+s.URL) {
		t.Errorf("version --server: %v", r)
	}
	if r := cli(t, nil, dir, "", "version", "--server", "127.0.0.1:1"); r.code != 125 || !strings.Contains(r.stderr, "cannot reach") {
		t.Errorf("version --server with nothing there: %v, want 125 and a message that says so", r)
	}
}

// TestCLIRunEndsItsJobWithTheClient: a job run in the foreground ends when
// its client is ended (SIGTERM, or SIGHUP when its terminal closes), as the
// client's own children would; run -d leaves it running.
func TestCLIRunEndsItsJobWithTheClient(t *testing.T) {
	s := startServer(t, serverOpts{})
	dir := t.TempDir()
	for _, tc := range []struct {
		sig  syscall.Signal
		mode string
	}{{syscall.SIGTERM, "pty"}, {syscall.SIGHUP, "stdio"}} {
		cmd := exec.CommandContext(ctx(t), filepath.Join(binDir, "shellctl"), "run", "--mode", tc.mode, "echo started; sleep 300")
		cmd.Dir = dir
		cmd.Env = cliEnv(t, s)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var id string
		for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			jobs, err := s.c.List(ctx(t), "running", 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if rec := s.getRecord(t, j.JobID); rec != nil && rec.OutputBytes > 0 {
					id = j.JobID
				}
			}
		}
		if id == "" {
			cmd.Process.Kill()
			t.Fatalf("%v: the foreground job did not start: %s", tc.sig, out.String())
		}
		cmd.Process.Signal(tc.sig)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || (ee.ExitCode() != 143 && ee.ExitCode() != 130) {
			t.Errorf("%v to run (%s): %v, want 130 or 143 (the job's, ended by terminate)\n%s", tc.sig, tc.mode, err, out.String())
		}
		st, err := s.c.Status(ctx(t), id)
		if err != nil || st.Status != "terminated" {
			t.Errorf("%v to run (%s): the job is %+v %v, want terminated", tc.sig, tc.mode, st, err)
		}
	}
}

// run -d of a job whose runner started but whose process never became the
// script — an interpreter that is not there, a confinement that could not
// be set up — also exits 125 with the record's reason, not 0.
func TestCLIRunDetachedFailsAfterTheRunnerStarted(t *testing.T) {
	s := startServer(t, serverOpts{})
	home := t.TempDir()
	r := cli(t, s, home, "", "run", "-d", "#!/nonexistent/interpreter\necho never")
	if r.code != 125 || !regexp.MustCompile(`^[0-9a-f]{16}\n$`).MatchString(r.stdout) || !strings.Contains(r.stderr, "could not start") || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("run -d of a script whose interpreter is missing: %v; want its id, 125 and the exec error", r)
	}
	f := startServer(t, serverOpts{env: []string{"SHELLCTL_TEST_FORCE_ISOLATION_FAILURE=1"}})
	r = cli(t, f, home, "", "run", "-d", "echo never")
	if r.code != 125 || !strings.Contains(r.stderr, "could not start") || !strings.Contains(r.stderr, "Landlock") {
		t.Errorf("run -d where Landlock cannot be set up: %v; want 125 and the isolation error", r)
	}
}
