// Command shellctl-screen is the terminal emulator of one pty job's
// screen: shellctl-runner starts it (by a handle to this binary, found
// beside the runner's) once the job's output needs more than the cold
// screen the runner keeps itself, and feeds it the terminal's bytes over
// stdin (internal/screen/wire.go); it answers screens on stdout and exits
// at end of file. It is a binary of its own so that the emulator, its
// dependencies and their initialisation are not in every runner: most
// pty jobs never need one.
package main

import (
	"fmt"
	"os"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/screen"
	"github.com/shellctl/shellctl/internal/screen/emu"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != screen.ProcessArg {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// No process may read its memory or steal its pipes through ptrace or
	// /proc, as for the runner and the stage.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// It parses what a job writes, and needs no file: none it can open.
	if note, err := isolation.ConfineNoFiles(); err != nil {
		fmt.Fprintln(os.Stderr, "shellctl-screen: running unconfined:", err)
	} else if note != "" {
		fmt.Fprintln(os.Stderr, "shellctl-screen:", note)
	}
	if err := emu.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shellctl-screen:", err)
		os.Exit(1)
	}
}

const usage = `shellctl-screen draws the screen of one pty job of shellctl-runner; it is
not run by hand. shellctl-runner starts it from beside its own binary and
feeds it the job's terminal output on stdin.
`
