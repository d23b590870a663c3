package main

// The file verbs: cp (docker's convention), ls, cat, over the file routes.

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/client"
)

func fileCmds(cf *clientFlags) []*cobra.Command {
	return []*cobra.Command{cpCmd(cf), lsCmd(cf), catCmd(cf)}
}

func lsCmd(cf *clientFlags) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "ls PATH",
		Short: "List a directory on the server (mode, size, mtime, name)",
		Long: `List a directory on the server, sorted by name; links are shown, not followed.
PATH is absolute or relative to the server's Home, beneath one of its file roots.`,
		Example: `  shellctl ls project/src
  shellctl --json ls /workspace`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			l, err := c.ListDir(cmd.Context(), args[0], 10000, all)
			if err != nil {
				return err
			}
			cf.print(l, func() {
				for _, e := range l.Entries {
					name := strconv.Quote(e.Name)
					if name[1:len(name)-1] == e.Name {
						name = e.Name
					}
					if e.Type == "dir" {
						name += "/"
					}
					fmt.Printf("%s %-7s %12d %s %s\n", e.Mode, e.Type, e.Size, e.Mtime, name)
				}
				if l.Truncated {
					fmt.Fprintln(os.Stderr, "shellctl: more entries than listed (10000 at most)")
				}
			})
			return nil
		},
	}
	c.Flags().BoolVarP(&all, "all", "a", true, "include names that start with a dot")
	return c
}

func catCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "cat PATH",
		Short:   "Print a file on the server",
		Example: `  shellctl cat project/README.md`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			body, _, err := c.ReadFile(cmd.Context(), args[0], "")
			if err != nil {
				return err
			}
			defer body.Close()
			_, err = io.Copy(os.Stdout, body)
			return err
		},
	}
}

func cpCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files between here and the server (docker cp's convention)",
		Long: `Copy a file or a directory between this machine and the server. The side on the
server is written :PATH (absolute, or relative to the server's Home). As with
docker cp, - is a tar stream: "cp :DIR -" writes a tar of DIR on stdout,
"cp - :DIR" extracts a tar from stdin into DIR on the server.

A directory from the server comes as an archive (its bounds apply: a warning
names what was left out). Writes on the server are atomic per file.`,
		Example: `  shellctl cp ./notes.txt :project/notes.txt
  shellctl cp :project/dist ./dist
  shellctl cp :project - | tar -t
  tar -c src | shellctl cp - :project`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			srcRemote, dstRemote := strings.HasPrefix(src, ":"), strings.HasPrefix(dst, ":")
			if srcRemote == dstRemote {
				return &usageError{"cp copies between here and the server: mark the server's side with a leading colon (:PATH), on one side only"}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if srcRemote {
				return cpDown(ctx, c, src[1:], dst)
			}
			return cpUp(ctx, c, src, dst[1:])
		},
	}
}

// cpDown copies the server's src to the local dst ("-": a tar on stdout).
func cpDown(ctx context.Context, c *client.Client, src, dst string) error {
	st, err := c.Stat(ctx, src, true)
	if err != nil {
		return err
	}
	if st.Type == "file" {
		body, _, err := c.ReadFile(ctx, src, "")
		if err != nil {
			return err
		}
		defer body.Close()
		if dst == "-" {
			tw := tar.NewWriter(os.Stdout)
			if err := tw.WriteHeader(&tar.Header{Name: path.Base(src), Size: st.Size, Mode: modeOf(st.Mode), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			if _, err := io.Copy(tw, body); err != nil {
				return err
			}
			return tw.Close()
		}
		if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
			dst = filepath.Join(dst, path.Base(src))
		}
		return writeLocal(dst, body, fs.FileMode(modeOf(st.Mode)))
	}
	if st.Type != "dir" {
		return fmt.Errorf("%s on the server is a %s: only files and directories are copied", src, st.Type)
	}
	resp, err := c.Archive(ctx, src, client.ArchiveOptions{})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if dst == "-" {
		if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
			return err
		}
	} else {
		// docker's rule: into an existing directory, as its base name;
		// else as dst.
		if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
			dst = filepath.Join(dst, path.Base(strings.TrimRight(src, "/")))
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := untarLocal(dst, resp.Body); err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	status := resp.Trailer.Get("X-Archive-Status")
	if status == "" {
		return errors.New("the archive was cut before its end (no X-Archive-Status): copy again")
	}
	if w := resp.Trailer.Get("X-Archive-Warnings"); w != "" && w != "[]" {
		fmt.Fprintf(os.Stderr, "shellctl: archive %s: %s\n", status, w)
	}
	return nil
}

func modeOf(s string) int64 {
	m, _ := strconv.ParseInt(s, 8, 32)
	return m
}

func writeLocal(dst string, r io.Reader, mode fs.FileMode) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// untarLocal extracts a tar into dir, every name kept beneath it (os.Root:
// an archive's ".." or link cannot lead out).
func untarLocal(dir string, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the archive: %w", err)
		}
		name := filepath.Clean(strings.TrimRight(h.Name, "/"))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, fs.FileMode(h.Mode).Perm()|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(h.Mode).Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		}
	}
}

// cpUp copies the local src ("-": a tar on stdin) to the server's dst.
func cpUp(ctx context.Context, c *client.Client, src, dst string) error {
	if src == "-" {
		return untarRemote(ctx, c, dst, os.Stdin)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st, err := c.Stat(ctx, dst, true); err == nil && st.Type == "dir" {
		dst = path.Join(dst, filepath.Base(src))
	}
	if !fi.IsDir() {
		return putLocal(ctx, c, src, dst, fi)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return c.Mkdir(ctx, target, true, "")
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return putLocal(ctx, c, p, target, info)
		default:
			fmt.Fprintf(os.Stderr, "shellctl: %s is not a regular file nor a directory: left out\n", p)
			return nil
		}
	})
}

func putLocal(ctx context.Context, c *client.Client, src, dst string, fi fs.FileInfo) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = c.WriteFile(ctx, dst, f, fi.Size(), fmt.Sprintf("%04o", fi.Mode().Perm()), true, "")
	return err
}

// untarRemote extracts a tar from r into the server's directory dst.
func untarRemote(ctx context.Context, c *client.Client, dst string, r io.Reader) error {
	if err := c.Mkdir(ctx, dst, true, ""); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the tar stream: %w", err)
		}
		name := path.Clean("/" + strings.TrimRight(h.Name, "/"))
		if name == "/" {
			continue
		}
		target := dst + name
		switch h.Typeflag {
		case tar.TypeDir:
			err = c.Mkdir(ctx, target, true, fmt.Sprintf("%04o", h.Mode&0o7777))
		case tar.TypeReg:
			_, err = c.WriteFile(ctx, target, io.NopCloser(io.LimitReader(tr, h.Size)), h.Size, fmt.Sprintf("%04o", h.Mode&0o7777), true, "")
		default:
			fmt.Fprintf(os.Stderr, "shellctl: %s: a tar entry of type %q is not copied (only files and directories)\n", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}
