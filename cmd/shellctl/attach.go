package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/shellctl/shellctl/internal/client"
)

const defaultDetachKeys = "ctrl-p,ctrl-q"

func attachCmd(cf *clientFlags) *cobra.Command {
	var detachKeys string
	var since optOffset
	c := &cobra.Command{
		Use:   "attach [--detach-keys KEYS] JOB_ID",
		Short: "Connect your terminal to a running job (detach with Ctrl-P Ctrl-Q)",
		Long: `Connect your terminal to a running pty job: what you type goes to the job's
terminal (Ctrl-C too), its terminal comes to yours as it is — first its screen
as it stands (redrawn, as tmux does on attach), then the program's bytes as it
writes them, colours, cursor movement and full-screen programs (vi, less, htop)
included — and its terminal takes the size of yours (and follows it when you
resize). It goes over the attach WebSocket (GET /v1/jobs/{id}/attach).
--since-offset N prints the job's output.log (plain text, escapes removed) from
byte N instead of the screen (--since-offset 0 replays it from the start).

Detach with Ctrl-P Ctrl-Q (--detach-keys, e.g. "ctrl-a,d"): the job keeps running.
When the job ends, attach exits with its code. Your terminal is restored on every
way out. A stdio job has no terminal: attach then follows its output and stderr,
and Ctrl-C sends it SIGINT, as run does.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			keys, err := parseDetachKeys(detachKeys)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id := args[0]
			rec, err := c.Record(ctx, id)
			if err != nil {
				return err
			}
			if rec.Done {
				return fmt.Errorf("job %s is done (%s): there is nothing to attach to; `shellctl logs %s` prints its output", id, rec.Status, id)
			}
			out, errOff := rec.OutputBytes, rec.StderrBytes
			if since.set {
				out, errOff = since.v, 0
			}
			if rec.Mode == "stdio" {
				sigs := notifyRun(false)
				defer signal.Stop(sigs)
				return followRunFrom(ctx, c, cf, sigs, id, true, false, out, errOff)
			}
			// The terminal raw (a redraw, then its bytes), unless output
			// from an offset was asked for.
			logFrom := int64(-1)
			if since.set {
				logFrom = since.v
			}
			return attachPTY(ctx, c, id, logFrom, -1, keys, false)
		},
	}
	c.Flags().StringVar(&detachKeys, "detach-keys", defaultDetachKeys, "key sequence that detaches: ctrl-<letter> or single characters, comma-separated")
	c.Flags().Var(&since, "since-offset", "print output from this byte offset (default: the current end)")
	return c
}

// parseDetachKeys reads "ctrl-p,ctrl-q" as bytes.
func parseDetachKeys(s string) ([]byte, error) {
	var keys []byte
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		lk := strings.ToLower(k)
		switch {
		case len(k) == 1:
			keys = append(keys, k[0])
		case strings.HasPrefix(lk, "ctrl-") && len(lk) == 6:
			ch := lk[5]
			switch {
			case ch >= 'a' && ch <= 'z':
				keys = append(keys, ch-'a'+1)
			case ch == '@':
				keys = append(keys, 0)
			case ch == '[', ch == '\\', ch == ']', ch == '^', ch == '_':
				keys = append(keys, ch-'@')
			default:
				return nil, &usageError{fmt.Sprintf("--detach-keys %q: %q is not ctrl-<letter>", s, k)}
			}
		default:
			return nil, &usageError{fmt.Sprintf("--detach-keys %q: %q is not a key: give ctrl-<letter> or one character, comma-separated (default %q)", s, k, defaultDetachKeys)}
		}
	}
	if len(keys) == 0 {
		return nil, &usageError{fmt.Sprintf("--detach-keys %q names no key", s)}
	}
	return keys, nil
}

// detacher finds the detach sequence in what is typed. Bytes that may
// begin the sequence are held back until the next key shows whether they
// do.
type detacher struct {
	keys []byte
	held int // bytes of keys matched so far
}

// feed returns the bytes to send to the job and whether the sequence was
// completed.
func (d *detacher) feed(in []byte) (send []byte, detach bool) {
	for _, b := range in {
		if b == d.keys[d.held] {
			d.held++
			if d.held == len(d.keys) {
				return send, true
			}
			continue
		}
		if d.held > 0 {
			send = append(send, d.keys[:d.held]...)
			d.held = 0
			if b == d.keys[0] {
				d.held = 1
				continue
			}
		}
		send = append(send, b)
	}
	return send, false
}

var errDetached = errors.New("detached")

// attachPTY connects the terminal to pty job id over the attach
// WebSocket (GET /v1/jobs/{id}/attach): the job's terminal comes raw — a
// redraw of its screen, then its bytes as the program writes them, so
// colours, full-screen programs and line editing look as they do
// locally; with offset ≥ 0 (--since-offset), output.log from there
// instead (sanitized text).
//
// rawFrom ≥ 0 asks for the raw bytes from there (run -it: from the job's
// first byte, which the server still holds for a job that has written a
// few KiB at most); the server sends a redraw when it no longer holds them.
func attachPTY(ctx context.Context, c *client.Client, id string, offset, rawFrom int64, keys []byte, owned bool) (retErr error) {
	inFd := int(os.Stdin.Fd())
	isTerm := term.IsTerminal(inFd)
	if isTerm {
		old, err := term.MakeRaw(inFd)
		if err != nil {
			return fmt.Errorf("putting your terminal in raw mode: %w", err)
		}
		// Every way out of here passes this (a panic too); the exits on
		// signals below return through it as well.
		defer term.Restore(inFd, old)
		if offset >= 0 {
			// output.log holds text with plain \n line ends (the
			// sanitizer of jobs.md): our terminal must turn them into
			// CR LF, which raw mode alone would not. The raw terminal
			// carries its own.
			if t, err := unix.IoctlGetTermios(inFd, unix.TCGETS); err == nil {
				t.Oflag |= unix.OPOST | unix.ONLCR
				_ = unix.IoctlSetTermios(inFd, unix.TCSETS, t)
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	size := func() (int, int, bool) {
		if !isTerm {
			return 0, 0, false
		}
		w, h, err := term.GetSize(inFd)
		return min(w, 4096), min(h, 4096), err == nil && w > 0 && h > 0
	}
	// The job's terminal takes our size before the redraw is made: the
	// program redraws at it, and the redraw is of the screen it drew. (A
	// job run -it was started at it: a resize would only cost it the raw
	// bytes from its start, which a resize makes the server's screen
	// drop.)
	if w, h, ok := size(); ok && rawFrom < 0 {
		_ = c.Resize(ctx, id, w, h)
	}
	opt := client.AttachOptions{}
	if offset >= 0 {
		opt.Offset = &offset
	} else if rawFrom >= 0 {
		opt.RawOffset = &rawFrom
	}
	conn, err := c.Attach(ctx, id, opt)
	if err != nil {
		return err
	}
	defer conn.CloseNow()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)

	type result struct {
		end *jobEnd
		err error
	}
	done := make(chan result, 1)
	go func() {
		for {
			m, err := conn.Next(ctx)
			if err != nil {
				if errors.Is(err, client.ErrAttachClosed) {
					err = fmt.Errorf("job %s: the server closed the attach socket before the job ended", id)
				}
				done <- result{nil, err}
				return
			}
			switch {
			case m.Control == nil:
				if _, err := os.Stdout.Write(m.Output); err != nil {
					done <- result{nil, fmt.Errorf("writing to your terminal: %w", err)}
					return
				}
			case m.Control.Type == "exit":
				done <- result{&jobEnd{Status: m.Control.Status, ExitCode: m.Control.ExitCode}, nil}
				return
			case m.Control.Type == "error":
				fmt.Fprintf(os.Stderr, "\r\nshellctl: job %s: %s\r\n", id, m.Control.Message)
			}
		}
	}()

	inErr := make(chan error, 1)
	go func() { inErr <- pumpInput(ctx, conn, id, os.Stdin, keys) }()

	for {
		select {
		case r := <-done:
			if r.err != nil {
				return r.err
			}
			_ = conn.Close()
			return exitOf(ctx, c, id, r.end)
		case err := <-inErr:
			switch {
			case errors.Is(err, errDetached):
				fmt.Fprintf(os.Stderr, "\r\nshellctl: detached from job %s; it keeps running (`shellctl attach %s` to return)\r\n", id, id)
				_ = conn.Close()
				return nil
			case err != nil:
				return err
			}
			inErr = nil // stdin at its end: keep following the output
		case s := <-sigs:
			if s == syscall.SIGWINCH {
				if w, h, ok := size(); ok {
					_ = conn.Resize(ctx, w, h)
				}
				continue
			}
			if owned && s != syscall.SIGINT {
				// run -it's own job ends with the client (run -d is how
				// to leave one running); an attach leaves it running.
				fmt.Fprintf(os.Stderr, "\r\nshellctl: %v: terminating job %s (run -d leaves a job running)\r\n", s, id)
				terminateOwned(ctx, c, id)
				return &jobExit{code: 128 + int(s.(syscall.Signal))}
			}
			fmt.Fprintf(os.Stderr, "\r\nshellctl: %v: detached from job %s; it keeps running\r\n", s, id)
			return &jobExit{code: 128 + int(s.(syscall.Signal))}
		}
	}
}

// pumpInput sends what is read from in to the job's terminal, in order,
// until the detach sequence (errDetached), the end of in (nil) or an error.
func pumpInput(ctx context.Context, conn *client.AttachConn, id string, in io.Reader, keys []byte) error {
	d := &detacher{keys: keys}
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			send, detach := d.feed(buf[:n])
			if len(send) > 0 {
				if ierr := conn.Input(ctx, send); ierr != nil {
					// The socket's end (the job's) is told by the output
					// side.
					<-ctx.Done()
					return nil
				}
			}
			if detach {
				return errDetached
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading your terminal: %w", err)
		}
	}
}
