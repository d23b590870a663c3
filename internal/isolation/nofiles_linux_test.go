package isolation

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const noFilesArg = "__nofiles"

// noFilesProbe confines itself with ConfineNoFiles, then tries to read
// and write files from several goroutines (so on several threads).
func noFilesProbe(dir string) int {
	if _, err := ConfineNoFiles(); err != nil {
		os.Stdout.WriteString("unconfined: " + err.Error() + "\n")
		return 3
	}
	done := make(chan string, 8)
	for i := range 8 {
		go func() {
			var out []string
			if _, err := os.ReadFile("/etc/hostname"); err == nil {
				out = append(out, "read /etc/hostname")
			}
			if err := os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i))), []byte("x"), 0o600); err == nil {
				out = append(out, "wrote in "+dir)
			}
			if _, err := os.ReadDir("/"); err == nil {
				out = append(out, "listed /")
			}
			done <- strings.Join(out, ", ")
		}()
	}
	bad := ""
	for range 8 {
		if s := <-done; s != "" {
			bad = s
		}
	}
	if bad != "" {
		os.Stdout.WriteString("allowed: " + bad + "\n")
		return 1
	}
	os.Stdout.WriteString("ok\n")
	return 0
}

// TestConfineNoFiles: after ConfineNoFiles no thread of the process can
// read, write or list a file.
func TestConfineNoFiles(t *testing.T) {
	if _, _, err := detectABI(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	dir := t.TempDir()
	out, err := exec.Command(os.Args[0], noFilesArg, dir).CombinedOutput()
	if strings.HasPrefix(string(out), "unconfined: ") {
		// Only a build with cgo cannot (AllThreadsSyscall); with Landlock
		// here, anything else is a failure.
		if strings.Contains(string(out), "build with cgo") {
			t.Skipf("cannot confine here: %s", out)
		}
		t.Fatalf("Landlock is here but the probe could not confine itself: %s", out)
	}
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("confined probe: %v: %s", err, out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the confined probe wrote %d files", len(ents))
	}
}
