package isolation

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as a stage (StageArg), as runners do,
// and as a probe: run with probeArg as its
// first argument it runs a probe (probes_linux_test.go), as a confined job
// or as a process that confines one of its own threads. Argv, not the
// environment, selects the role, so a job's environment stays exactly what
// the test put in its JobConfig.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == StageArg {
		os.Exit(StageMain())
	}
	if len(os.Args) > 2 && os.Args[1] == noFilesArg {
		os.Exit(noFilesProbe(os.Args[2]))
	}
	if len(os.Args) > 1 && os.Args[1] == probeArg {
		os.Exit(runProbe(os.Args[2:]))
	}
	os.Exit(m.Run())
}

const probeArg = "__probe"
