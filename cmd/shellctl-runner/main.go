// Command shellctl-runner supervises one job: shellctl serve starts it
// detached (a few ahead of need), hands it a job over its control channel,
// and the runner starts the job confined, copies its output, ends its
// process tree on request or at a limit and publishes how it ended.
package main

import (
	"os"

	"github.com/shellctl/shellctl/internal/runner"
)

func main() {
	os.Exit(runner.Main(os.Args[1:]))
}
