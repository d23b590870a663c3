package runner

import "io"

// errCounter counts what reaches stderr.log and announces it with the
// output's size events (coalesced the same way), so a stream of a stdio
// job's stderr is woken by the runner, as one of output.log is.
type errCounter struct {
	r *Runner
	w io.Writer
}

func (c *errCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		outputBusy(c.r.errSize.Add(int64(n)))
		c.r.sizeChanged(0)
	}
	return n, err
}
