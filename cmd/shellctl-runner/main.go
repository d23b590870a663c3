// Command shellctl-runner supervises one job: shellctl serve starts it
// detached (a few ahead of need), hands it a job over its control channel,
// and the runner has the job's stage (shellctl-stage beside it, or this
// binary again with isolation.StageArg) confine itself and become the job, copies its
// output, ends its process tree on request or at a limit and publishes how
// it ended.
package main

import (
	"fmt"
	"os"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/runner"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == isolation.StageArg {
		os.Exit(isolation.StageMain())
	}
	if len(os.Args) == 2 && (os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help") {
		fmt.Print(usage)
		os.Exit(0)
	}
	os.Exit(runner.Main(os.Args[1:]))
}

const usage = `shellctl-runner supervises one job of shellctl serve; it is not run by hand.
shellctl serve starts it (from --runner, default beside the shellctl binary)
and hands it a job over its control channel. See shellctl serve --help.
`
