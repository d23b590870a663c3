package runner

import (
	"os"
	"syscall"
	"testing"
	"time"

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
			if os.Getenv(slowLaunchEnv) != "" {
				// The job's process is made late, so that what the test
				// sends meanwhile comes while the job starts.
				testHookBeforeLaunch = func() { time.Sleep(300 * time.Millisecond) }
			}
			os.Exit(Main(os.Args[2:]))
		case isolation.StageArg:
			os.Exit(stageForTest())
		}
	}
	os.Exit(m.Run())
}

const runnerArg = "__runner"

// slowLaunchEnv makes a test runner make its job's process 300 ms late.
const slowLaunchEnv = "SHELLCTL_TEST_SLOW_LAUNCH"

// failFirstStageEnv makes a test runner's first stage start fail.
const failFirstStageEnv = "SHELLCTL_TEST_FAIL_FIRST_STAGE"
