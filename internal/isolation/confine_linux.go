package isolation

import (
	"fmt"
	"path/filepath"
)

// ConfineThread prepares the job of cfg on the calling OS thread: it makes
// the job's HOME and confines this thread — not the process — in the job's
// Landlock domain, so that a process forked from it starts confined. The
// caller must hold the thread (runtime.LockOSThread) and never release it:
// the thread then ends with its goroutine, and the rest of the runner stays
// unrestricted. This is the child stage without a process of its own: the
// job is forked straight from the confined thread.
//
// An error means the job must not run (exit ExitSetupFailed, saying why).
func ConfineThread(cfg *StageConfig) (Applied, error) {
	var a Applied
	if cfg.ForceFail != "" {
		return a, fmt.Errorf("%s", cfg.ForceFail)
	}
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return a, fmt.Errorf("no program to run")
	}
	if cfg.Home != "" {
		if err := ensureHome(cfg.Home); err != nil {
			return a, err
		}
	}
	if !cfg.Policy.Enabled {
		a.Reason = reasonDisabled
		return a, nil
	}
	if (cfg.Home != "" && !filepath.IsAbs(cfg.Home)) || !filepath.IsAbs(cfg.Cwd) {
		return a, fmt.Errorf("path isolation needs an absolute home and cwd (home %q, cwd %q)", cfg.Home, cfg.Cwd)
	}
	a, err := applyLandlockTo(cfg, true)
	if err != nil {
		return a, fmt.Errorf("path isolation is on but Landlock could not be applied: %w", err)
	}
	return a, nil
}

// ResetIgnoredSignals puts every signal this process inherited as ignored
// back to its default: an ignored signal stays ignored across fork and
// exec, and a job must not start deaf to signals because of how an
// ancestor of the server was started.
func ResetIgnoredSignals() { resetIgnoredSignals() }
