package runner

import (
	"os"
	"syscall"
	"testing"

	"github.com/shellctl/shellctl/internal/isolation"
)

// TestMain lets the test binary be a runner (runnerArg: the rest is its
// command line) and a stage (isolation.StageArg), as shellctl-runner and
// shellctl-stage are, so a test can start a real runner with its real
// stage (start_test.go). Argv selects the role.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case runnerArg:
			if os.Getenv(failFirstStageEnv) != "" {
				// The stage made ahead cannot be started (as when a fork
				// storm beside the runner holds every pid).
				first := true
				testHookStartStage = func() error {
					if first {
						first = false
						return syscall.EAGAIN
					}
					return nil
				}
			}
			os.Exit(Main(os.Args[2:]))
		case isolation.StageArg:
			os.Exit(stageForTest())
		}
	}
	os.Exit(m.Run())
}

const runnerArg = "__runner"

// failFirstStageEnv makes a test runner's first stage start fail.
const failFirstStageEnv = "SHELLCTL_TEST_FAIL_FIRST_STAGE"
