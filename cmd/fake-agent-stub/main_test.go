package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binary prints its base URL, checks the token and stops on SIGTERM.
func TestServesAndPrintsURL(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-agent-stub")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if err := exec.Command(bin).Run(); err == nil {
		t.Fatal("no --token: want a usage error")
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--token", "t0k")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(line)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/agent-stub") {
		t.Fatalf("printed %q", line)
	}
	for token, want := range map[string]int{"t0k": 200, "bad": 401} {
		req, _ := http.NewRequest("GET", base+"/config/manifest", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %q: status %d, want %d", token, resp.StatusCode, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop on SIGTERM")
	}
}

// --mode and --fail switch the fake's failure modes; unknown names are
// refused.
func TestModeFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-agent-stub")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--mode", "nope"}, {"--fail", "x"}, {"--fail", "*=nope"}} {
		out, err := exec.Command(bin, append([]string{"--token", "t"}, args...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "fake-agent-stub: --") {
			t.Errorf("%q: %v %s", args, err, out)
		}
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--token", "t0k", "--mode", "drive-gone", "--fail", "GET /config/manifest=503")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(line)
	for path, want := range map[string]int{"/drive/manifest?prefix=&include_download_url=false": 404, "/config/manifest": 503, "/config/prompt": 200} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer t0k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
