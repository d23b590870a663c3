package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/client"
)

func logsCmd(cf *clientFlags) *cobra.Command {
	var follow, stderr bool
	var since optOffset
	tail := tailLines{n: -1}
	c := &cobra.Command{
		Use:   "logs [-f] [--tail N] [--stderr] [--since-offset N] JOB_ID",
		Short: "Print a job's output (-f: and follow it until the job ends)",
		Long: `Print a job's output from the start (--tail N: its last N lines; --since-offset:
from that byte) to its current end; with -f, keep printing as it comes until the
job is done. A stdio job's stderr comes on your stderr (its stdout on your stdout:
the job's two streams are kept apart, so how they interleaved is not known);
--stderr prints only its stderr, on stdout. A pty job's stderr is in its output.
With --tail each stream gets its last N lines; --since-offset is the offset of
the stream printed on stdout (and leaves out a stdio job's stderr: give
--stderr --since-offset N for it).

Finished jobs are kept for the server's --gc-retention (5m by default) after they
end, then collected with their output: logs of such a job is job_not_found.`,
		Example: `  shellctl logs --tail 20 -f JOB_ID
  shellctl logs JOB_ID 2>/dev/null     # a stdio job's stdout only`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if since.set && tail.n >= 0 {
				return &usageError{"--tail and --since-offset both say where to start: pass one of them"}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id := args[0]
			rec, err := c.Record(ctx, id)
			noRecord := err != nil && noStreamRoute(err) && follow && tail.n < 0
			switch {
			case noRecord:
				// A server without the record route (the original's API):
				// -f follows the output from the start or --since-offset,
				// by its wait route, as before logs read the record.
				rec = &client.Record{}
			case err != nil:
				return err
			}
			// The streams to print: output on stdout, and a stdio job's
			// stderr on stderr; --stderr: only that, on stdout.
			type stream struct {
				channel string
				size    int64
				s       *sink
			}
			var streams []stream
			if stderr {
				streams = []stream{{"stderr", rec.StderrBytes, &sink{w: os.Stdout}}}
			} else {
				streams = []stream{{"output", rec.OutputBytes, &sink{w: os.Stdout}}}
				// A byte offset is one stream's: --since-offset is the
				// output's, and the stderr has its own (--stderr).
				if rec.Mode == "stdio" && !since.set {
					streams = append(streams, stream{"stderr", rec.StderrBytes, &sink{w: os.Stderr}})
				}
			}
			for _, st := range streams {
				switch {
				case since.set:
					if !noRecord && since.v > st.size {
						return &usageError{fmt.Sprintf("--since-offset %d is past the end of job %s's %s (%d bytes)", since.v, id, st.channel, st.size)}
					}
					st.s.offset = since.v
				case tail.n >= 0:
					off, err := tailOffset(ctx, c, id, st.channel, st.size, tail.n)
					if err != nil {
						return err
					}
					st.s.offset = off
				}
				if !follow {
					if err := printLogs(ctx, c, id, st.channel, st.s, st.size); err != nil {
						return err
					}
				}
			}
			if !follow {
				return nil
			}
			f := &follower{c: c, id: id}
			for _, st := range streams {
				if st.channel == "output" {
					f.out = st.s
				} else {
					f.stderr = st.s
				}
			}
			_, err = f.run(ctx)
			return err
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the job is done")
	c.Flags().Var(&tail, "tail", `print the last N lines ("all": every line, the default), then follow with -f`)
	c.Flags().BoolVar(&stderr, "stderr", false, "only the stderr of a stdio job, on stdout")
	c.Flags().Var(&since, "since-offset", "start at this byte offset (default 0)")
	return c
}

// printLogs copies channel ("output" or "stderr") of job id from s.offset
// to size (its size now): by the stream, or by pages of wait and stderr
// on a server without the stream route.
func printLogs(ctx context.Context, c *client.Client, id, channel string, s *sink, size int64) error {
	if err := pageStream(ctx, c, id, channel, s, size); err == nil || !noStreamRoute(err) {
		return err
	}
	if channel == "stderr" {
		_, err := pageStderr(ctx, c, id, s)
		return err
	}
	return pageOutput(ctx, c, id, s)
}

// tailChunk is how much of a log tailOffset reads per step back: a few
// screens of lines, so that --tail 10 reads one chunk of a log of any size.
const tailChunk = 64 << 10

// tailOffset is the offset at which the last n lines of channel begin,
// of its first size bytes: read backwards a chunk at a time by the stream
// (byte-exact offsets), so a long log is not read whole. A server without
// the stream route has no byte-exact way to read backwards: an error that
// says so.
func tailOffset(ctx context.Context, c *client.Client, id, channel string, size int64, n int) (int64, error) {
	off, err := lastLinesStart(size, n, tailChunk, func(from, to int64) ([]byte, error) {
		var buf bytes.Buffer
		if err := pageStream(ctx, c, id, channel, &sink{w: &buf, offset: from}, to); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
	if err != nil && noStreamRoute(err) {
		return 0, fmt.Errorf("--tail needs the server's stream route (GET /v1/jobs/{id}/stream), which the server at %s does not have: use --since-offset N instead", theClientFlags.resolved)
	}
	return off, err
}

// lastLinesStart is the offset at which the last n lines of a log of size
// bytes begin, reading it backwards chunk bytes at a time by read
// (which may give more than asked; the rest is cut). A last line without
// its newline counts as a line.
func lastLinesStart(size int64, n int, chunk int64, read func(from, to int64) ([]byte, error)) (int64, error) {
	if n == 0 {
		return size, nil
	}
	counter := lineCounter{n: n}
	for end := size; end > 0; {
		from := max(0, end-chunk)
		b, err := read(from, end)
		if err != nil {
			return 0, err
		}
		if int64(len(b)) > end-from {
			b = b[:end-from]
		}
		if i, ok := counter.back(b, end == size); ok {
			return from + int64(i), nil
		}
		end = from
	}
	return 0, nil
}

// lineCounter finds the start of the last n lines, fed chunks from the
// end of a log backwards.
type lineCounter struct {
	n    int
	seen int // newlines that end a line of the tail, so far
}

// back takes the chunk before what it was fed so far (last: the chunk
// that ends the log) and returns the index in it where the last n lines
// begin, if they begin there.
func (l *lineCounter) back(chunk []byte, last bool) (int, bool) {
	end := len(chunk)
	if last && end > 0 && chunk[end-1] == '\n' {
		// The log's final newline ends its last line; it begins none.
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if chunk[i] != '\n' {
			continue
		}
		l.seen++
		if l.seen == l.n {
			return i + 1, true
		}
	}
	return 0, false
}

// tailLines is --tail: a number of lines ≥ 0, or "all" (-1).
type tailLines struct{ n int }

func (t *tailLines) String() string {
	if t.n < 0 {
		return "all"
	}
	return strconv.Itoa(t.n)
}
func (t *tailLines) Type() string { return "N" }
func (t *tailLines) Set(s string) error {
	if s == "all" {
		t.n = -1
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a number of lines ≥ 0 or \"all\"", s)
	}
	t.n = n
	return nil
}

// optOffset is a byte offset that may be left unset; unset, --help shows
// no default of its own (pflag would print an empty "(default )").
type optOffset struct {
	v   int64
	set bool
}

func (o *optOffset) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}
func (o *optOffset) Type() string { return "int" }
func (o *optOffset) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a byte offset ≥ 0", s)
	}
	o.v, o.set = n, true
	return nil
}
