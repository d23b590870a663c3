package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/snapshot"
)

// The hidden home-snapshot commands of agent-cli-backend.md: the backend
// runs them as shellctl jobs to move an agent's Home through the Agent
// Stub's Home Snapshot gateway. The archive is the one of
// internal/snapshot (tar+zstd, streamed both ways), written by
// snapshot.Save and read by snapshot.Restore: the same code and the same
// refusals as /v1/snapshot/save and /v1/snapshot/restore.

// homeSaveOptions make snapshot.Save write the archive of the original's
// upload: lexical walk order, directory names without "/", every name of
// a hard-linked file stored as a file of its own, and absolute symlink
// targets inside HOME made relative.
func homeSaveOptions(patterns []string) snapshot.SaveOptions {
	return snapshot.SaveOptions{
		Excludes:      patterns,
		Lexical:       true,
		BareDirNames:  true,
		NoHardLinks:   true,
		RelativeLinks: true,
	}
}

// homeRestoreOptions add the original download's refusals to those of
// /v1/snapshot/restore: names that are not clean, hard links and names
// that appear twice.
var homeRestoreOptions = snapshot.RestoreOptions{
	CleanNames:   true,
	NoHardLinks:  true,
	NoDuplicates: true,
}

func (a *app) homeSnapshotCmd() *cobra.Command {
	c := group("home-snapshot COMMAND", "Move this Home through the Agent Stub (run by the backend)")
	c.Hidden = true
	c.AddCommand(a.homeUploadCmd(), a.homeDownloadCmd())
	return c
}

// homeDir checks $HOME as the original does and returns it cleaned.
func (a *app) homeDir() (string, error) {
	home := strings.TrimSpace(a.getenv("HOME"))
	switch {
	case home == "":
		return "", plainf("HOME must be set")
	case !filepath.IsAbs(home):
		return "", plainf("HOME must be an absolute path")
	}
	fi, err := os.Stat(home)
	if err != nil {
		return "", plainf("stat HOME: %v", err)
	}
	if !fi.IsDir() {
		return "", plainf("HOME must be a directory")
	}
	return filepath.Clean(home), nil
}

// excludePattern checks one --exclude (a path relative to HOME, covering
// itself and everything below) and returns the gitignore pattern of
// snapshot.Save that means exactly that path: anchored by a leading "/".
func excludePattern(v string) (string, error) {
	if v == "" || filepath.IsAbs(v) || strings.HasPrefix(v, "/") || strings.Contains(v, `\`) {
		return "", plainf("invalid Home Snapshot exclude %q", v)
	}
	if strings.ContainsAny(v, "*?[") {
		return "", plainf("Home Snapshot exclude must not be a glob: %q", v)
	}
	c := path.Clean(v)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", plainf("invalid Home Snapshot exclude %q", v)
	}
	if c != v {
		return "", plainf("Home Snapshot exclude must be normalized: %q", v)
	}
	if strings.TrimSpace(v) != v {
		// Gitignore patterns lose trailing blanks; such a name cannot be
		// excluded exactly, so it is refused rather than missed.
		return "", plainf("invalid Home Snapshot exclude %q: leading or trailing white space", v)
	}
	return "/" + v, nil
}

func (a *app) homeUploadCmd() *cobra.Command {
	var excludes []string
	c := &cobra.Command{
		Use:   "upload",
		Short: "Stream this Home as tar+zstd to the Home Snapshot gateway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			home, err := a.homeDir()
			if err != nil {
				return err
			}
			patterns := make([]string, 0, len(excludes))
			for _, v := range excludes {
				p, err := excludePattern(v)
				if err != nil {
					return err
				}
				patterns = append(patterns, p)
			}
			ctx, cancel := context.WithCancel(ctxOf(cmd))
			defer cancel()
			pr, pw := io.Pipe()
			packed := make(chan error, 1)
			var st snapshot.SaveStats // read after packed
			go func() {
				var err error
				st, err = snapshot.Save(ctx, pw, home, homeSaveOptions(patterns))
				if err != nil {
					err = fmt.Errorf("pack HOME: %w", err)
					pw.CloseWithError(err)
				} else {
					pw.Close()
				}
				packed <- err
			}()
			upErr := c.PutHomeSnapshot(ctx, pr)
			if upErr != nil {
				cancel()
				pr.CloseWithError(upErr) // a producer blocked on the pipe returns
			}
			packErr := <-packed // always joined before exit
			switch {
			case upErr != nil:
				return plainf("%v", upErr)
			case packErr != nil:
				return plainf("%v", packErr)
			}
			if st.TooDeep > 0 {
				// The one line this command prints on success, and only
				// then: the archive is whole but for what the bound left out.
				fmt.Fprintf(cmd.ErrOrStderr(), "dify-agent: warning: Home Snapshot left out %d entries more than %d levels below HOME, the first %q\n",
					st.TooDeep, snapshot.MaxDepth, st.FirstTooDeep)
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&excludes, "exclude", nil, "Path relative to HOME to leave out, with everything below it (repeatable).")
	_ = c.Flags().MarkHidden("exclude")
	return c
}

func (a *app) homeDownloadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "download",
		Short: "Restore this empty Home from the Home Snapshot gateway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			home, err := a.homeDir()
			if err != nil {
				return err
			}
			d, err := os.Open(home)
			if err != nil {
				return plainf("stat HOME: %v", err)
			}
			names, err := d.Readdirnames(1)
			d.Close()
			if len(names) > 0 {
				return plainf("HOME must be empty before Home Snapshot download")
			}
			if err != nil && err != io.EOF {
				return plainf("read HOME: %v", err)
			}
			ctx := ctxOf(cmd)
			body, err := c.GetHomeSnapshot(ctx)
			if err != nil {
				return plainf("%v", err)
			}
			defer body.Close()
			if _, err := snapshot.Restore(ctx, body, home, homeRestoreOptions); err != nil {
				return plainf("restore Home Snapshot: %v", err)
			}
			return nil
		},
	}
}
