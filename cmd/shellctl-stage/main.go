// Command shellctl-stage is a job's stage: shellctl-runner starts it ahead
// of need (by a handle to this binary, found beside the runner's) and hands
// it a job, and the stage confines itself and becomes the job (see
// internal/isolation). It is a binary of its own so that it carries
// nothing but that: the runner's packages (the terminal emulator among
// them) and their initialisation cost every start of the runner's binary.
package main

import (
	"fmt"
	"os"

	"github.com/shellctl/shellctl/internal/isolation"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != isolation.StageArg {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	os.Exit(isolation.StageMain())
}

const usage = `shellctl-stage becomes one job of shellctl-runner; it is not run by hand.
shellctl-runner starts it from beside its own binary and hands it the job
over descriptor 3.
`
