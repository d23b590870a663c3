package runner

import (
	"os"
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
			os.Exit(Main(os.Args[2:]))
		case isolation.StageArg:
			os.Exit(stageForTest())
		}
	}
	os.Exit(m.Run())
}

const runnerArg = "__runner"
