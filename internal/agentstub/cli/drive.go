package cli

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
)

// The drive commands of agent-cli-backend.md (the original's home-snapshot
// line; the newest Agent Stub has no /drive routes and answers 404).

// EnvDriveBase is the local drive root; DefaultDriveBase when unset.
const (
	EnvDriveBase     = "DIFY_AGENT_STUB_DRIVE_BASE"
	DefaultDriveBase = "/mnt/drive"
)

// Names skipped by drive push, as directories anywhere in the tree, and
// (skillSkipFiles) as files in a skill's zip.
var (
	pushSkipDirs   = map[string]bool{".git": true, "__pycache__": true, ".pytest_cache": true, ".mypy_cache": true, ".ruff_cache": true, ".venv": true, "node_modules": true}
	skillSkipFiles = map[string]bool{".DS_Store": true, skillZipName: true}
)

const skillZipName = ".DIFY-SKILL-FULL.zip"

func (a *app) driveCmd() *cobra.Command {
	c := group("drive COMMAND", "List, pull and push the agent's drive")
	c.Long = "The drive is the agent's shared file store; pulled files land under " + EnvDriveBase + "\n(default " + DefaultDriveBase + ")."
	c.AddCommand(a.driveListCmd(), a.drivePullCmd(), a.drivePushCmd())
	return c
}

func (a *app) driveListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [REMOTE_PREFIX] [--json]",
		Short: "List drive items under a prefix: size, type, hash and key per line",
		Long: `Lists the drive items whose key starts with REMOTE_PREFIX (default: all), one
per line: <size>\t<mime_type>\t<hash>\t<key>, "-" for a missing value.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			items, err := c.DriveManifest(ctxOf(cmd), prefix, false)
			if err != nil {
				return plainf("%v", err)
			}
			if asJSON {
				return a.printJSON(map[string]any{"items": listJSON(items)})
			}
			var b strings.Builder
			for _, it := range items {
				size := "-"
				if it.Size != nil {
					size = fmt.Sprint(*it.Size)
				}
				// Fields from the backend, escaped: a key holding ESC or a
				// newline must not reach the terminal as it is, nor split
				// the line (escape.go).
				fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", size, escapeUnsafe(orDash(it.MimeType)), escapeUnsafe(orDash(it.Hash)), escapeUnsafe(it.Key))
			}
			_, err = io.WriteString(a.stdout, b.String())
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, jsonFlag, false, "Emit the drive manifest as JSON.")
	return c
}

// listItem is an item of drive list --json: exactly these keys, in order.
type listItem struct {
	Key         string  `json:"key"`
	Size        *int64  `json:"size,omitempty"`
	MimeType    string  `json:"mime_type,omitempty"`
	Hash        string  `json:"hash,omitempty"`
	DownloadURL *string `json:"download_url,omitempty"`
}

func listJSON(items []agentstub.DriveEntry) []listItem {
	out := make([]listItem, 0, len(items))
	for _, it := range items {
		li := listItem{Key: it.Key, Size: it.Size, DownloadURL: it.DownloadURL}
		if it.MimeType != nil {
			li.MimeType = *it.MimeType
		}
		if it.Hash != nil {
			li.Hash = *it.Hash
		}
		out = append(out, li)
	}
	return out
}

func orDash(p *string) string {
	if p == nil || *p == "" {
		return "-"
	}
	return *p
}

// pulled is one pulled target of drive pull.
type pulled struct {
	Key       string `json:"key"`
	LocalPath string `json:"local_path"`
}

func (a *app) drivePullCmd() *cobra.Command {
	var to string
	var asJSON bool
	c := &cobra.Command{
		Use:   "pull [REMOTE]... [--to DIR] [--json]",
		Short: "Download drive items (all, or those under each REMOTE prefix) and print local paths",
		Long: `Downloads every drive item under each REMOTE prefix (default: the whole drive)
to <base>/<key>, overwriting, one at a time, and prints the local path of each
REMOTE that matched. The base is --to, else ` + EnvDriveBase + `, else ` + DefaultDriveBase + `.
A key that would land outside the base, or reach it through a symlink, is refused.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			base := to
			if base == "" {
				base = strings.TrimSpace(a.getenv(EnvDriveBase))
			}
			if base == "" {
				base = DefaultDriveBase
			}
			if base, err = filepath.Abs(base); err != nil {
				return plainf("drive base: %v", err)
			}
			targets := args
			if len(targets) == 0 {
				targets = []string{""}
			}
			ctx := ctxOf(cmd)
			out := []pulled{}
			for _, target := range targets {
				items, err := c.DriveManifest(ctx, target, true)
				if err != nil {
					return plainf("%v", err)
				}
				if len(items) == 0 {
					continue
				}
				out = append(out, pulled{Key: target, LocalPath: filepath.Join(base, filepath.FromSlash(target))})
				for _, it := range items {
					if err := pullItem(cmd, c, base, it); err != nil {
						return err
					}
				}
			}
			if asJSON {
				return a.printJSON(map[string]any{"items": out})
			}
			var b strings.Builder
			for _, p := range out {
				b.WriteString(p.LocalPath + "\n")
			}
			_, err = io.WriteString(a.stdout, b.String())
			return err
		},
	}
	c.Flags().StringVar(&to, "to", "", "Local base directory for pulled drive files.")
	c.Flags().BoolVar(&asJSON, jsonFlag, false, "Emit the pull result as JSON.")
	return c
}

// pullItem downloads one item to base/key: refused before anything is
// written when the key leaves the base; written through a temporary file.
func pullItem(cmd *cobra.Command, c *agentstub.Client, base string, it agentstub.DriveEntry) error {
	if it.DownloadURL == nil || *it.DownloadURL == "" {
		return plainf("drive manifest item is missing download_url: %s", it.Key)
	}
	rel, err := cleanKey(it.Key)
	if err != nil {
		return plainf("drive key resolves outside the drive base: %s", it.Key)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return plainf("create drive base %s: %v", base, err)
	}
	dest := filepath.Join(base, filepath.FromSlash(rel))
	var fetchErr error
	err = writeBeneath(base, rel, func(f *os.File) error {
		n, err := c.Fetch(ctxOf(cmd), *it.DownloadURL, agentstub.LocalWriter(f))
		switch {
		case err != nil:
			fetchErr = plainf("download %s: %v", it.Key, err)
		case it.Size != nil && n != *it.Size:
			fetchErr = plainf("downloaded drive file size mismatch for %s", it.Key)
		}
		return fetchErr
	})
	switch {
	case err == nil:
		return nil
	case fetchErr != nil:
		return fetchErr
	}
	return plainf("write %s: %v", dest, err)
}

// pushItem is one local file to upload under a drive key.
type pushItem struct {
	key, path, name string
}

func (a *app) drivePushCmd() *cobra.Command {
	var kind string
	var asJSON bool
	c := &cobra.Command{
		Use:   "push LOCAL_PATH REMOTE_PATH [--kind skill|dir] [--json]",
		Short: "Upload a file, a directory (--kind dir) or a skill (--kind skill) to the drive",
		Long: `Uploads LOCAL_PATH under the drive key REMOTE_PATH and prints the committed items
as JSON. A file goes to REMOTE_PATH itself. A directory needs --kind dir (every
regular file to REMOTE_PATH/<relative path>) or --kind skill (SKILL.md and a zip
of the whole skill). .git, node_modules, .venv and caches are skipped;
symlinks are refused. Nothing is committed if an upload fails.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(args[0])
			if err != nil {
				return plainf("local path not found: %s", args[0])
			}
			remote := args[1]
			fi, err := os.Stat(abs)
			if err != nil {
				return plainf("local path not found: %s", abs)
			}
			var items []pushItem
			var cleanup func()
			switch {
			case fi.IsDir() && kind == "":
				return plainf("directory drive push requires --kind skill or --kind dir")
			case fi.IsDir() && kind == "file":
				return plainf("--kind file requires a file")
			case fi.IsDir() && kind == "dir":
				if items, err = dirItems(abs, remote); err != nil {
					return err
				}
			case fi.IsDir():
				if items, cleanup, err = skillItems(abs, remote); err != nil {
					return err
				}
				defer cleanup()
			case kind == "skill":
				return plainf("--kind skill requires a directory containing SKILL.md")
			case kind == "dir":
				return plainf("--kind dir requires a directory")
			default:
				items = []pushItem{{key: remote, path: abs, name: filepath.Base(abs)}}
			}
			ctx := ctxOf(cmd)
			commit := make([]agentstub.DriveCommitItem, 0, len(items))
			for _, it := range items {
				id, err := uploadForDrive(cmd, c, it)
				if err != nil {
					return err
				}
				commit = append(commit, agentstub.DriveCommitItem{Key: it.key, FileRef: agentstub.FileRef{Kind: "tool_file", ID: id}})
			}
			body, err := c.DriveCommit(ctx, commit)
			if err != nil {
				return plainf("%v", err)
			}
			_, err = a.stdout.Write(append(bytes.TrimRight(body, "\n"), '\n'))
			return err
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "Directory upload kind: skill or dir.")
	c.Flags().BoolVar(&asJSON, jsonFlag, false, "Accepted for consistency; drive push output is already emitted as JSON.")
	return c
}

// uploadForDrive uploads one file and returns the id of the upload.
func uploadForDrive(cmd *cobra.Command, c *agentstub.Client, it pushItem) (string, error) {
	f, err := os.Open(it.path)
	if err != nil {
		return "", plainf("read %s: %v", it.path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", plainf("read %s: %v", it.path, err)
	}
	ctx := ctxOf(cmd)
	mt := guessMIME(it.name)
	u, err := c.RequestUploadURL(ctx, it.name, mt, false)
	if err != nil {
		return "", stubFail("upload "+it.key+": request file upload URL", err)
	}
	reply, err := c.UploadFile(ctx, u, it.name, mt, f, fi.Size())
	if err != nil {
		return "", plainf("upload %s: upload file data: %v", it.key, err)
	}
	var out struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(reply, &out)
	id := idText(out.ID)
	if id == "" {
		return "", plainf("upload %s: upload response is missing id", it.key)
	}
	return id, nil
}

// idText accepts an id sent as a JSON string or number.
func idText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// driveJoin is base and child joined by exactly one "/" ("" base: child).
func driveJoin(base, child string) string {
	if base == "" {
		return child
	}
	return strings.TrimSuffix(base, "/") + "/" + strings.TrimPrefix(child, "/")
}

// walkPush walks dir in lexical order, skipping pushSkipDirs, refusing
// symlinks, and calls file for every regular file with its slash path
// relative to dir.
func walkPush(dir string, file func(rel, path string) error) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return plainf("drive push does not support symlinked files: %s", p)
		case t.IsDir():
			if pushSkipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		case !t.IsRegular():
			return nil // sockets, FIFOs, devices: nothing to upload
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return file(filepath.ToSlash(rel), p)
	})
	var pe *plainError
	if err != nil && !errors.As(err, &pe) {
		return plainf("read %s: %v", dir, err)
	}
	return err
}

func dirItems(dir, remote string) ([]pushItem, error) {
	var items []pushItem
	err := walkPush(dir, func(rel, p string) error {
		items = append(items, pushItem{key: driveJoin(remote, rel), path: p, name: filepath.Base(p)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, plainf("directory has no regular files: %s", dir)
	}
	return items, nil
}

// skillItems returns SKILL.md and a zip of the skill, built in a temporary
// file that cleanup removes.
func skillItems(dir, remote string) ([]pushItem, func(), error) {
	skill := filepath.Join(dir, "SKILL.md")
	if fi, err := os.Lstat(skill); err != nil || !fi.Mode().IsRegular() {
		return nil, nil, plainf("--kind skill requires a directory containing SKILL.md")
	}
	tmp, err := os.CreateTemp("", "dify-skill-*.zip")
	if err != nil {
		return nil, nil, plainf("create skill archive: %v", err)
	}
	cleanup := func() { os.Remove(tmp.Name()) }
	zw := zip.NewWriter(tmp)
	err = walkPush(dir, func(rel, p string) error {
		if skillSkipFiles[filepath.Base(p)] {
			return nil
		}
		return zipFile(zw, rel, p)
	})
	if err == nil {
		err = zw.Close()
	}
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		var pe *plainError
		if errors.As(err, &pe) {
			return nil, nil, err
		}
		return nil, nil, plainf("create skill archive: %v", err)
	}
	return []pushItem{
		{key: driveJoin(remote, "SKILL.md"), path: skill, name: "SKILL.md"},
		{key: driveJoin(remote, skillZipName), path: tmp.Name(), name: skillZipName},
	}, cleanup, nil
}

func zipFile(zw *zip.Writer, rel, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr, err := zip.FileInfoHeader(fi)
	if err != nil {
		return err
	}
	hdr.Name, hdr.Method = rel, zip.Deflate
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	return err
}
