package isolation

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reasonDisabled is recorded when the server turned isolation off.
const reasonDisabled = "path isolation disabled by the server (" + EnvEnablePathIsolation + "=false)"

// StageMain is the child stage: the runner's main calls it first thing when
// os.Args[1] == StageArg. It reads the StageConfig from fd 3, creates HOME,
// changes to the cwd, applies Landlock when the policy says so, reports what
// it applied as one JSON line on fd 4 and execve's Argv with Env. It never
// returns.
//
// Fail closed: when setup fails (isolation on but Landlock unusable, bad
// config, ForceFail) it writes one line "shellctl: <why>" to stderr, reports
// the error on fd 4 and exits 125 before the script runs. When the program
// cannot be executed it exits 126 (not executable) or 127 (not found).
func StageMain() {
	// The thread that is restricted must be the one that execs: execve
	// keeps only the calling thread, and with it its Landlock domain.
	runtime.LockOSThread()
	// Neither pipe may reach the job.
	unix.CloseOnExec(stageConfigFD)
	unix.CloseOnExec(stageStatusFD)
	status := os.NewFile(stageStatusFD, "shellctl-stage-status")

	var applied Applied
	fail := func(code int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		applied.Enabled = false
		applied.Error = msg
		writeApplied(status, applied)
		fmt.Fprintf(os.Stderr, "shellctl: %s\n", msg)
		os.Exit(code)
	}

	cfg, fds, err := readStageMessage()
	if err != nil {
		fail(ExitSetupFailed, "%v", err)
	}
	if err := installStdio(fds); err != nil {
		fail(ExitSetupFailed, "%v", err)
	}
	if cfg.ForceFail != "" {
		fail(ExitSetupFailed, "%s", cfg.ForceFail)
	}
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		fail(ExitSetupFailed, "stage config has no program to run")
	}
	if cfg.Home != "" {
		if err := ensureHome(cfg.Home); err != nil {
			fail(ExitSetupFailed, "%v", err)
		}
	}
	if cfg.Cwd != "" {
		if err := os.Chdir(cfg.Cwd); err != nil {
			fail(ExitSetupFailed, "change to cwd: %v", err)
		}
		if root := cfg.WorkspaceRoot; root != "" {
			// unix.Getwd asks the kernel: no $PWD shortcut, no symlinks.
			wd, err := unix.Getwd()
			if err != nil || !(wd == root || root == "/" || strings.HasPrefix(wd, root+"/")) {
				fail(ExitSetupFailed, "cwd %q is outside the workspace root %q", wd, root)
			}
		}
	}
	if cfg.Policy.Enabled {
		if (cfg.Home != "" && !filepath.IsAbs(cfg.Home)) || !filepath.IsAbs(cfg.Cwd) {
			fail(ExitSetupFailed, "path isolation needs an absolute home and cwd (home %q, cwd %q)", cfg.Home, cfg.Cwd)
		}
		applied, err = applyLandlock(&cfg)
		if err != nil {
			fail(ExitSetupFailed, "path isolation is on but Landlock could not be applied: %v", err)
		}
	} else {
		applied.Reason = reasonDisabled
	}

	prog, err := lookProgram(cfg.Argv[0], cfg.Env)
	if err != nil {
		writeApplied(status, applied)
		fmt.Fprintf(os.Stderr, "shellctl: %v\n", err)
		os.Exit(ExitNotFound)
	}
	writeApplied(status, applied)
	// The job starts with no signal blocked, whatever mask this thread got
	// from the runner's thread that forked the stage (a Go runtime thread
	// may carry a mask blocking nearly everything, and the mask survives
	// execve). Go's handlers take whatever is pending until the exec.
	var none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil); err != nil {
		fail(ExitSetupFailed, "clear the signal mask: %v", err)
	}
	resetIgnoredSignals()
	// Only 0, 1 and 2 reach the job: whatever else this process holds —
	// descriptors its ancestors leaked to it included — closes at exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fail(ExitSetupFailed, "mark descriptors close-on-exec: %v", err)
	}
	err = syscall.Exec(prog, cfg.Argv, cfg.Env)
	code := ExitCannotExec
	if errors.Is(err, syscall.ENOENT) {
		code = ExitNotFound
	}
	fmt.Fprintf(os.Stderr, "shellctl: exec %s: %v\n", prog, err)
	os.Exit(code)
}

// writeApplied sends the one status line and closes the pipe, so the runner
// sees the line and then end of file even while the job runs. Errors are
// ignored: a runner that stopped listening must not keep the job from
// running or failing as it would.
func writeApplied(status *os.File, a Applied) {
	data, err := json.Marshal(a)
	if err != nil {
		data = []byte(`{"error":"encode applied"}`)
	}
	status.Write(append(data, '\n'))
	status.Close()
}

// ensureHome creates the job's HOME (0755, whatever the umask) when missing.
func ensureHome(home string) error {
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
// stage's own environment is empty, so exec.LookPath would not do).
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

// resetIgnoredSignals puts every signal this process inherited as ignored
// back to its default, since an ignored signal stays ignored across exec: a
// job must not start deaf to signals because of how some ancestor of the
// server was started (nohup, a CI harness). Signals Go handles reset by
// themselves at exec.
func resetIgnoredSignals() {
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		if old.handler != sigIgn {
			continue
		}
		var dfl kernelSigaction // SIG_DFL, no flags, empty mask
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
}
