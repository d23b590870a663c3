package isolation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// reasonDisabled is recorded when the server turned isolation off.
const reasonDisabled = "path isolation disabled by the server (" + EnvEnablePathIsolation + "=false)"

// EnsureHome creates the job's HOME (0755, whatever the umask) when missing.
func EnsureHome(home string) error {
	st, err := os.Stat(home)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("home %s is not a directory", home)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("home: %w", err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("create home: %w", err)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		return fmt.Errorf("create home: %w", err)
	}
	return nil
}

// lookProgram resolves a program name without '/' in the job's PATH (the
// runner's own PATH is not the job's, so exec.LookPath would not do).
func lookProgram(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the job's PATH", name)
}

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on Linux.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// sigIgn is SIG_IGN.
const sigIgn = 1
