package isolation

import (
	"os"
	"testing"
)

// TestMain lets the test binary play the runner's binary: run with
// StageArg as its first argument it is the child stage, and with probeArg
// it runs a probe (probes_linux_test.go) inside a Landlock domain. Argv, not
// the environment, selects the role, so the job's environment stays exactly
// what the test put in its StageConfig.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case StageArg:
			StageMain()
			os.Exit(99) // StageMain never returns
		case probeArg:
			os.Exit(runProbe(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

const probeArg = "__probe"
