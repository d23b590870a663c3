// shellctl-bench measures a real `shellctl serve` against the machine's
// floor, figure by figure of the performance spec, and prints one table
// and a one-line summary. See `make bench` and `make bench-quick`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/shellctl/shellctl/internal/bench"
)

func main() {
	self, _ := os.Executable()
	bin := flag.String("bin", filepath.Dir(self), "directory of the shellctl binaries (shellctl, shellctl-runner)")
	quick := flag.Bool("quick", false, "smaller counts and sizes: finishes in under a minute")
	runs := flag.Int("runs", 2, "full runs of the table, each on a fresh server; with 2 or more the spread of every figure across them is printed")
	only := flag.String("only", "", "comma-separated figure groups to measure (default all)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: shellctl-bench [--bin DIR] [--quick] [--runs N] [--only NAME,...]\n\n")
		flag.PrintDefaults()
		fmt.Fprintf(os.Stderr, "\nfigure groups:\n%s", bench.GroupNames())
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *runs < 1 {
		fmt.Fprintf(os.Stderr, "shellctl-bench: --runs %d: give at least 1 run (2 or more print the spread across runs)\n", *runs)
		os.Exit(2)
	}
	var names []string
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err := bench.Run(ctx, bench.Config{Bin: *bin, Quick: *quick, Runs: *runs, Only: names, Out: os.Stdout, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shellctl-bench:", err)
		os.Exit(1)
	}
}
