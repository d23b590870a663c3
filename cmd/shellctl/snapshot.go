package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/snapshot"
)

// largeHome: on a terminal, save says the size of a Home at least this
// large before it starts.
const largeHome = 256 << 20

func snapshotCmd(cf *clientFlags) *cobra.Command {
	c := &cobra.Command{Use: "snapshot", Short: "Save or restore the server's Home"}
	var out string
	var excludes []string
	notice := sizeFlag{n: new(int64)}
	*notice.n = largeHome
	save := &cobra.Command{
		Use:   "save [-o FILE] [--exclude PATTERN]...",
		Short: "Save the server's Home as tar+zstd (verified before it counts)",
		Long: `Save the server's Home as tar+zstd, to FILE (written beside it and renamed into
place once verified) or to stdout. On a terminal, stderr shows the bytes saved and
the rate, and a Home of 256 MiB or more is announced with its size first (counted
by a short du job on the server).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out != "-" {
				if err := checkWritableDir(out); err != nil {
					return err
				}
			}
			cl, err := cf.client()
			if err != nil {
				return err
			}
			prog := progressOut()
			if prog != nil {
				announceHome(cmd.Context(), cl, prog, *notice.n)
			}
			st, err := snapshot.SaveToFile(cmd.Context(), snapshot.Conn{BaseURL: cl.BaseURL, Token: cl.Token, HTTP: cl.HTTP}, out, excludes, prog)
			if err != nil {
				return err
			}
			if out == "-" {
				// Standard output carries the archive: nothing else goes there.
				return nil
			}
			cf.print(st, func() { fmt.Fprintf(os.Stderr, "saved %s\n", out) })
			return nil
		},
	}
	save.Flags().StringVarP(&out, "output", "o", "-", "file to write (- for stdout)")
	save.Flags().StringArrayVar(&excludes, "exclude", nil, "gitignore-style pattern to leave out (repeatable)")
	save.Flags().Var(notice, "announce-size", "announce a Home at least this large before saving")
	_ = save.Flags().MarkHidden("announce-size")
	restore := &cobra.Command{
		Use:   "restore FILE|-",
		Short: "Restore a saved Home into the server's Home",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client()
			if err != nil {
				return err
			}
			if args[0] != "-" {
				if _, err := os.Stat(args[0]); err != nil {
					return fmt.Errorf("cannot read the snapshot %s: %w", args[0], unwrapPath(err))
				}
			}
			st, err := snapshot.RestoreFromFile(cmd.Context(), snapshot.Conn{BaseURL: cl.BaseURL, Token: cl.Token, HTTP: cl.HTTP}, args[0], progressOut())
			if err != nil {
				return err
			}
			cf.print(st, func() { fmt.Fprintf(os.Stderr, "restored %s\n", args[0]) })
			return nil
		},
	}
	c.AddCommand(save, restore)
	return c
}

// checkWritableDir refuses an output path whose directory is missing or
// not writable, naming the path the user gave (the archive is first written
// to a temporary file beside it).
func checkWritableDir(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("cannot write %s: its directory %s: %w", path, dir, unwrapPath(err))
	case !fi.IsDir():
		return fmt.Errorf("cannot write %s: %s is not a directory", path, dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("cannot write %s: directory %s is not writable: %w", path, dir, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("cannot write %s: it is a directory; give a file name such as %s", path, filepath.Join(path, "home.tar.zst"))
	}
	return nil
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// announceHome tells w the size of the server's Home when it is at least
// min bytes, counted by a du job on the server (it may be elsewhere). It
// gives up quietly when the count fails, and after 5 s says Home is large.
func announceHome(ctx context.Context, c *client.Client, w io.Writer, min int64) {
	res, err := c.Run(ctx, client.RunRequest{Script: `exec du -sk -- "$HOME" 2>/dev/null`, Mode: "stdio", Timeout: 5})
	if err != nil {
		return
	}
	defer c.Delete(context.WithoutCancel(ctx), res.JobID, true, 0)
	if !res.Done {
		fmt.Fprintln(w, "shellctl: Home is large (counting it took over 5 s): saving it may take a while")
		return
	}
	f := strings.Fields(res.Output)
	if len(f) < 2 {
		return
	}
	kib, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || kib*1024 < min {
		return
	}
	fmt.Fprintf(w, "shellctl: Home (%s) holds %s on disk before compression and excludes: saving it may take a while\n",
		strings.Join(f[1:], " "), humanSize(kib*1024))
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// progressOut is stderr when it is a terminal, else nil (no progress).
func progressOut() io.Writer {
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err == nil {
		return os.Stderr
	}
	return nil
}
