package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "shellctl-sanitize-pty")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestBinary(t *testing.T) {
	bin := buildBinary(t)

	t.Run("prompt, ready file and end", func(t *testing.T) {
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := exec.Command(bin, "--ready-file", ready)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()

		deadline := time.Now().Add(10 * time.Second)
		for {
			fi, err := os.Stat(ready)
			if err == nil {
				if fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
					t.Fatalf("ready file: size %d, mode %v", fi.Size(), fi.Mode().Perm())
				}
				break
			}
			if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				t.Fatalf("ready file not created: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}

		// A colored line, a progress bar and a prompt: the prompt must show
		// after the idle flush while stdin stays open.
		stdin.Write([]byte("\x1b[1;32mbuild\x1b[0m ok\r\n10%\r50%\r100%\r\nPassword: "))
		want := "build ok\n100%\nPassword: "
		got := make([]byte, 0, 64)
		buf := make([]byte, 64)
		readDone := make(chan error, 1)
		go func() {
			for len(got) < len(want) {
				n, err := stdout.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					readDone <- err
					return
				}
			}
			readDone <- nil
		}()
		select {
		case err := <-readDone:
			if err != nil {
				t.Fatalf("read: %v (got %q)", err, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("prompt not flushed while input stays open")
		}
		if string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}

		stdin.Write([]byte("\r\n\x1b]0;title\x07done \xe4\xb8"))
		stdin.Write([]byte("\x96\n\xff"))
		stdin.Close()
		rest, err := io.ReadAll(stdout)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit: %v, stderr %q", err, stderr.String())
		}
		if want := "\ndone \u4e16\n\uFFFD"; string(rest) != want {
			t.Fatalf("rest %q, want %q", rest, want)
		}
	})

	t.Run("golden cases", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "testdata", "sanitize-golden.json"))
		if errors.Is(err, os.ErrNotExist) {
			t.Skip("shared/testdata/sanitize-golden.json not found beside the repo")
		}
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Cases []struct {
				Name      string   `json:"name"`
				ChunksHex []string `json:"chunks_hex"`
				Want      string   `json:"want"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tc := range doc.Cases {
			var in []byte
			for _, h := range tc.ChunksHex {
				b, err := hex.DecodeString(h)
				if err != nil {
					t.Fatal(err)
				}
				in = append(in, b...)
			}
			cmd := exec.Command(bin)
			cmd.Stdin = bytes.NewReader(in)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", tc.Name, err)
			}
			if string(out) != tc.Want {
				t.Errorf("%s: got %q, want %q", tc.Name, out, tc.Want)
			}
		}
	})

	t.Run("bad usage", func(t *testing.T) {
		err := exec.Command(bin, "extra").Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("extra argument: %v", err)
		}
		err = exec.Command(bin, "--ready-file", filepath.Join(t.TempDir(), "no", "such", "dir")).Run()
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("unwritable ready file: %v", err)
		}
	})
}
