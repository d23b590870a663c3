// Command shellctl-sanitize-pty is the pty sanitizer as a filter: it copies
// standard input to standard output through internal/sanitize, writing a
// held partial line (a prompt) after sanitize.DefaultIdle without input.
//
//	shellctl-sanitize-pty [--ready-file PATH]
//
// --ready-file PATH creates PATH (empty, mode 0600) once the filter is ready
// to read. Standard input ending (EOF, or EIO from a pty) ends the filter
// with status 0 after everything held was written.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/shellctl/shellctl/internal/sanitize"
)

func main() {
	fs := flag.NewFlagSet("shellctl-sanitize-pty", flag.ContinueOnError)
	readyFile := fs.String("ready-file", "", "create this file (empty, 0600) once ready to read")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: shellctl-sanitize-pty [--ready-file PATH] <raw >sanitized")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		os.Exit(2)
	}
	if *readyFile != "" {
		if err := markReady(*readyFile); err != nil {
			fail(err)
		}
	}
	// os.Stdout is unbuffered: every write of the sanitizer (whole lines per
	// read, or a flushed prompt) reaches the reader at once.
	if err := sanitize.Pump(os.Stdin, os.Stdout, sanitize.DefaultIdle, nil); err != nil {
		fail(err)
	}
}

// markReady creates path as an empty file with mode 0600.
func markReady(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "shellctl-sanitize-pty: %v\n", err)
	os.Exit(1)
}
