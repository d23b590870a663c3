package main

// run -i for a stdio job: your stdin goes to the job's stdin pipe, byte
// for byte, and its end is the job's end of file (docker run -i).

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/shellctl/shellctl/internal/client"
)

const (
	// pipeChunk is the most one input request carries: a read of a fast
	// producer fills it, a terminal's line is sent as it comes.
	pipeChunk = 256 << 10
	// pipeWrite is how long one request waits for a job that does not
	// read (the server's cap); a job still not reading gets the rest in
	// the next request, so a slow reader only slows the pipe, as a local
	// pipe would.
	pipeWrite = 600.0
)

// pipeStdin sends what is read from in to job id's stdin pipe until in
// ends (then closes the pipe: the job reads end of file) or the job stops
// taking input (it ended, or closed its stdin: what is left of in is not
// sent, as a local pipe's reader that went away would not get it).
func pipeStdin(ctx context.Context, c *client.Client, id string, in io.Reader) error {
	buf := make([]byte, pipeChunk)
	for {
		n, rerr := in.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			taken, err := c.PipeInput(ctx, id, data, false, pipeWrite)
			data = data[taken:]
			if err == nil || apiCode(err) == "input_backpressure" {
				continue
			}
			if code := apiCode(err); code == "job_not_running" || code == "stdin_closed" {
				return nil
			}
			return fmt.Errorf("sending your stdin to job %s: %w", id, err)
		}
		if rerr == io.EOF {
			_, err := c.PipeInput(ctx, id, nil, true, pipeWrite)
			if code := apiCode(err); err != nil && code != "job_not_running" && code != "stdin_closed" {
				return fmt.Errorf("closing job %s's stdin: %w", id, err)
			}
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("reading your stdin for job %s: %w", id, rerr)
		}
	}
}

// unsentStdinHint is said after a run without -i whose stdin held data:
// that data was not the job's (docker's rule: stdin only with -i).
func unsentStdinHint() {
	fd := int(os.Stdin.Fd())
	if term.IsTerminal(fd) || !stdinHasData(fd) {
		return
	}
	fmt.Fprintln(os.Stderr, "shellctl: your stdin was not sent to the job: run passes stdin only with -i, as docker run does "+
		"(to pipe it in: shellctl run -i --mode stdio SCRIPT)")
}

// stdinHasData reports whether fd (a pipe or a file) has bytes left to
// read, without reading them: a pipe at its end, /dev/null and a file
// read to its end have none.
func stdinHasData(fd int) bool {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		off, err := unix.Seek(fd, 0, io.SeekCurrent)
		return err == nil && off < st.Size
	case unix.S_IFIFO, unix.S_IFSOCK:
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		if err != nil || n == 0 {
			return false
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			return false
		}
		// Readable: data, or (for some sockets) the end; FIONREAD (TIOCINQ) tells.
		avail, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
		return err == nil && avail > 0
	}
	return false
}
