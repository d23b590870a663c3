// Command shellctl-runner supervises one job. shellctl serve starts it
// detached, one per job; with the hidden first argument __stage it is the
// job's isolation stage instead (it confines itself, then executes the
// script).
package main

import (
	"os"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/runner"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "__stage" {
		isolation.StageMain() // never returns
	}
	os.Exit(runner.Main(os.Args[1:]))
}
