package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
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

