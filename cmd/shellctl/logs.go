package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/client"
)

func logsCmd(cf *clientFlags) *cobra.Command {
	var follow, stderr bool
	var since int64
	c := &cobra.Command{
		Use:   "logs [-f] [--stderr] [--since-offset N] JOB_ID",
		Short: "Print a job's output (-f: and follow it until the job ends)",
		Long: `Print a job's output from the start (or from byte --since-offset) to its
current end; with -f, keep printing as it comes until the job is done.
--stderr prints a stdio job's stderr instead (a pty job's stderr is in its output).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if since < 0 {
				return &usageError{fmt.Sprintf("--since-offset %d is negative: give a byte offset ≥ 0", since)}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id := args[0]
			s := &sink{w: os.Stdout, offset: since}
			if !follow {
				return printLogs(ctx, c, id, stderr, s)
			}
			f := &follower{c: c, id: id}
			if stderr {
				f.stderr = s
			} else {
				f.out = s
			}
			_, err = f.run(ctx)
			return err
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the job is done")
	c.Flags().BoolVar(&stderr, "stderr", false, "the stderr of a stdio job instead of its output")
	c.Flags().Int64Var(&since, "since-offset", 0, "start at this byte offset")
	return c
}

// printLogs copies a job's output (or stderr) from s.offset to its size
// now: by the stream, or by pages of wait and stderr on a server without
// the stream route.
func printLogs(ctx context.Context, c *client.Client, id string, stderr bool, s *sink) error {
	rec, err := c.Record(ctx, id)
	if err != nil {
		return err
	}
	size, channel := rec.OutputBytes, "output"
	if stderr {
		size, channel = rec.StderrBytes, "stderr"
	}
	if s.offset > size {
		return &usageError{fmt.Sprintf("--since-offset %d is past the end of job %s's %s (%d bytes)", s.offset, id, channel, size)}
	}
	if err := pageStream(ctx, c, id, channel, s, size); err == nil || !noStreamRoute(err) {
		return err
	}
	if stderr {
		_, err = pageStderr(ctx, c, id, s)
		return err
	}
	return pageOutput(ctx, c, id, s)
}
