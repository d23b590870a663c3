package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// buildAttacker compiles testdata/attacker.c as a static binary into dir.
// It is C, not Go, so that it attacks within microseconds of its execve
// (a Go binary needs a millisecond to reach main).
func buildAttacker(t *testing.T, dir string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc to build the static attacker: %v", err)
	}
	bin := filepath.Join(dir, "attacker")
	src, _ := filepath.Abs("testdata/attacker.c")
	if out, err := exec.Command(cc, "-static", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build a static binary here (%v): %s", err, out)
	}
	return bin
}

// A job that, from its very first instructions, tries PTRACE_ATTACH,
// PTRACE_SEIZE, process_vm_readv and a signal on every thread of its
// parent and on every other process it can see, gets nowhere: no process
// but the job is ever in the job's Landlock domain. (Forked from a runner
// thread confined for it, the job could attach to that thread in about one
// start out of four.)
func TestWallJobCannotAttachToAnythingFromItsFirstInstructions(t *testing.T) {
	parallel(t)
	abi := isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	work := t.TempDir()
	bin := buildAttacker(t, work)
	const starts = 40
	var tries, others int
	for i := range starts {
		mode := "pty"
		if i%2 == 1 {
			mode = "stdio"
		}
		res, out := runWithin(t, s, client.RunRequest{Script: "#!" + bin + " 30\n", Cwd: work, Mode: mode, Timeout: 10}, 15*time.Second)
		if res == nil {
			t.Fatalf("start %d (%s): not done after 15 s: the attacker stopped its runner (output %q)", i, mode, out)
		}
		if code(res) != 0 {
			t.Fatalf("start %d (%s): exit %d, output %q", i, mode, code(res), out)
		}
		kv := isoParseKV(out)
		want := map[string]string{"attach": "0", "seize": "0", "read_mem": "0", "other_attach": "0", "other_read_mem": "0"}
		if abi >= 6 {
			want["signal"] = "0"
			want["other_signal"] = "0"
		}
		for k, v := range want {
			if kv[k] != v {
				t.Errorf("start %d (%s): %s = %q, want %s (output %q)", i, mode, k, kv[k], v, out)
			}
		}
		if kv["tries"] == "0" || kv["tries"] == "" {
			t.Fatalf("start %d: the attacker found no thread of its parent: %q", i, out)
		}
		tries += atoiOr0(kv["tries"])
		others += atoiOr0(kv["others"])
	}
	t.Logf("%d starts: %d attacks on runner threads, %d on other processes, none succeeded", starts, tries, others)
}

// runWithin runs req and follows it for at most d; nil if it is not done
// by then.
func runWithin(t *testing.T, s *server, req client.RunRequest, d time.Duration) (*client.JobResult, string) {
	t.Helper()
	deadline := time.Now().Add(d)
	res, err := s.c.Run(ctx(t), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Script, err)
	}
	var out strings.Builder
	out.WriteString(res.Output)
	for !res.Done {
		left := time.Until(deadline).Seconds()
		if left <= 0 {
			return nil, out.String()
		}
		res, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &left})
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		out.WriteString(res.Output)
	}
	return res, out.String()
}

func atoiOr0(s string) int {
	n := 0
	for _, c := range strings.TrimSpace(s) {
		if c < '0' || c > '9' {
			return n
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// A job that plants links where the server and runners make job files —
// output.log, stderr.log and script in the job directories made ahead —
// redirects nothing: every state-dir file is made exclusively beneath a
// directory handle without following links. The state dir is made
// reachable here on purpose (isolation off) to try it as an attacker who
// got there would.
func TestWallPlantedLinksInTheStateDirRedirectNothing(t *testing.T) {
	s := startServer(t, serverOpts{env: []string{"SHELLCTL_ENABLE_PATH_ISOLATION=false"}})
	target := filepath.Join(t.TempDir(), "victim")
	const original = "ORIGINAL-CONTENT-OF-THE-VICTIM\n"
	if err := os.WriteFile(target, []byte(original), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(s.StateDir, "jobs")
	for _, names := range [][]string{{"output.log", "stderr.log"}, {"script"}} {
		plant := "for d in " + isoShq(jobs) + "/.ready-*; do"
		for _, n := range names {
			plant += " ln -s " + isoShq(target) + " \"$d\"/" + n + ";"
		}
		plant += " done; ls -d " + isoShq(jobs) + "/.ready-* | wc -l"
		_, out := s.runDone(t, client.RunRequest{Script: plant, Mode: "stdio"})
		t.Logf("planted %v in %s made-ahead dirs", names, strings.TrimSpace(out))
		for _, mode := range []string{"pty", "stdio", "pty"} {
			res, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo OVERWRITTEN", Mode: mode, Timeout: 10})
			if err != nil {
				t.Logf("%s run after the plant of %v refused: %v", mode, names, err)
				continue
			}
			if strings.Contains(res.Output, "ORIGINAL") {
				t.Errorf("%s: the run returned the victim's content: %q", mode, res.Output)
			}
			tail, terr := s.c.Tail(ctx(t), res.JobID, 10000)
			if terr == nil && strings.Contains(tail.Output, "ORIGINAL") {
				t.Errorf("%s: tail returned the victim's content: %q", mode, tail.Output)
			}
		}
		if got, _ := os.ReadFile(target); string(got) != original {
			t.Fatalf("the victim was written through a planted link (%v): %q", names, got)
		}
	}
	// The server still works once the plants are used up.
	if res, out := s.runDone(t, client.RunRequest{Script: "echo fine"}); code(res) != 0 || !strings.Contains(out, "fine") {
		t.Fatalf("after the plants: %d %q", code(res), out)
	}
}

// Without --state-dir the state dir is outside every Home and beyond a
// confined job's reach: it can neither list it nor read the database.
// (The original's default, $HOME/.local/share/shellctl, was readable and
// writable by every job.)
func TestWallDefaultStateDirIsOutOfReach(t *testing.T) {
	isoRequireLandlock(t)
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "shellctl"), "serve", "--listen", "127.0.0.1:0", "--warm-runners", "0")
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url, state string
	var said []string
	re := regexp.MustCompile(`serving on (http://\S+) \(state dir (.+)\)`)
	timeout := time.After(20 * time.Second)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited before serving: %q", said)
			}
			said = append(said, l)
			// The default state dir is the machine's: another shellctl
			// may hold it, or have left a database of another version.
			if strings.Contains(l, "state dir in use") || strings.Contains(l, "is newer than this shellctl supports") {
				t.Skipf("the default state dir belongs to another shellctl on this machine: %s", l)
			}
			if m := re.FindStringSubmatch(l); m != nil {
				url, state = m[1], m[2]
			}
		case <-timeout:
			t.Fatal("serve did not start")
		}
	}
	go func() {
		for range lines {
		}
	}()
	if strings.HasPrefix(state, home) {
		t.Fatalf("default state dir %s is inside Home %s", state, home)
	}
	c := &client.Client{BaseURL: url, HTTP: &http.Client{Timeout: 30 * time.Second}}
	script := newIsoProbe().
		check("state_list", "ls "+isoShq(state)).
		check("db_read", "head -c 16 "+isoShq(filepath.Join(state, "shellctl.db"))).
		check("jobs_list", "ls "+isoShq(filepath.Join(state, "jobs"))).String()
	for _, mode := range []string{"pty", "stdio"} {
		res, err := c.Run(ctx(t), client.RunRequest{Script: script, Mode: mode, Timeout: 20})
		if err != nil || !res.Done {
			t.Fatalf("%s: %v %+v", mode, err, res)
		}
		isoWantProbes(t, mode, isoParseKV(res.Output), map[string]string{"state_list": "no", "db_read": "no", "jobs_list": "no"})
	}
}

// A job flipping a symlink between a directory inside --workspace-root and
// "/" while other jobs are started with it as their HOME or cwd gets them
// no write access outside the root: each run either is refused (403) or
// gets the directory its check saw, through the same handle.
func TestWallHomeSymlinkSwapUnderWorkspaceRoot(t *testing.T) {
	parallel(t)
	isoRequireLandlock(t)
	ws := filepath.Join(t.TempDir(), "ws")
	inside := isoMkdir(t, filepath.Join(ws, "inside"))
	s := startServer(t, serverOpts{args: []string{"--workspace-root", ws}})
	flip := filepath.Join(ws, "flip")
	if err := os.Symlink(inside, flip); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	flipped := make(chan int)
	go func() {
		n := 0
		tmp := filepath.Join(ws, ".flip-tmp")
		for {
			select {
			case <-stop:
				flipped <- n
				return
			default:
			}
			to := inside
			if n%2 == 0 {
				to = "/"
			}
			os.Remove(tmp)
			os.Symlink(to, tmp)
			os.Rename(tmp, flip)
			n++
		}
	}()
	marker := "shellctl-escape-" + isoRandHex(6)
	var allowed, refused int
	const runs = 240
	for i := range runs {
		req := client.RunRequest{Mode: "stdio", Timeout: 10,
			Script: "touch \"$HOME\"/" + marker + " 2>/dev/null; touch /" + marker + " 2>/dev/null; touch ./" + marker + "-cwd 2>/dev/null; true"}
		if i%2 == 0 {
			req.Env = map[string]string{"HOME": flip}
			req.Cwd = inside
		} else {
			req.Cwd = flip
		}
		res, err := s.c.Run(ctx(t), req)
		if err != nil {
			if !strings.Contains(err.Error(), "cwd_not_allowed") {
				t.Fatalf("run %d: %v", i, err)
			}
			refused++
			continue
		}
		allowed++
		for !res.Done {
			to := 10.0
			if res, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &to}); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	n := <-flipped
	for _, p := range []string{"/" + marker, "/" + marker + "-cwd"} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("a job escaped the workspace root: %s was written", p)
		}
	}
	t.Logf("%d runs (%d started, %d refused) while the link flipped %d times: no write outside the root", runs, allowed, refused, n)
	if allowed == 0 {
		t.Error("no run was started: the test proved nothing")
	}
}

// A flood of connections to a job's control socket, each sending 15 MiB
// without a newline and without the key, costs the runner no memory: at
// most a few KiB are read before the key is proven, one connection at a
// time; the job runs to its end.
func TestWallControlSocketFloodCostsTheRunnerNothing(t *testing.T) {
	parallel(t)
	s := startServer(t, serverOpts{})
	res, err := s.c.Run(ctx(t), client.RunRequest{Script: "echo runner=$PPID; sleep 4; echo finished", Mode: "stdio", Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	kv := isoParseKV(res.Output)
	runner := atoiOr0(kv["runner"])
	if runner <= 0 {
		t.Fatalf("no runner pid in %q", res.Output)
	}
	sock := filepath.Join(filepath.Dir(res.OutputPath), "ctl.sock")
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("unix", sock, 5*time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(8 * time.Second))
			for range 15 {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", runner))
	if err != nil {
		t.Fatalf("runner %d: %v", runner, err)
	}
	hwm := 0
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = atoiOr0(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	t.Logf("runner peak RSS after the flood: %d KiB", hwm)
	if hwm == 0 || hwm > 64<<10 {
		t.Errorf("runner peak RSS %d KiB, want under 64 MiB", hwm)
	}
	for !res.Done {
		to := 10.0
		if res, err = s.c.Wait(ctx(t), res.JobID, client.WaitRequest{Offset: res.Offset, Timeout: &to}); err != nil {
			t.Fatal(err)
		}
	}
	if code(res) != 0 {
		t.Fatalf("job after the flood: %s %d", res.Status, code(res))
	}
	if tail, _ := s.c.Tail(ctx(t), res.JobID, 1000); !strings.Contains(tail.Output, "finished") {
		t.Fatalf("job output after the flood: %q", tail.Output)
	}
}
