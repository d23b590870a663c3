package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/skillzip"
)

// maxTransfers is how many items are transferred at once: enough to hide
// the latency of the signed URLs, few enough not to flood the sandbox's link
// or the storage host.
const maxTransfers = 4

// itemResult is one line of the outcome of an item command, in input order.
type itemResult struct {
	Name  string     `json:"name"`
	Path  string     `json:"path,omitempty"` // pull: where it landed
	ID    string     `json:"id,omitempty"`   // push: the uploaded file's id
	Error *errorJSON `json:"error,omitempty"`

	done string // text line on success, e.g. "pushed skill foo"
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (r *itemResult) setErr(f *failure) {
	r.Error = &errorJSON{Code: f.Code, Message: f.Message}
}

func (a *app) itemsCmd(k agentstub.Kind) *cobra.Command {
	plural := string(k) + "s"
	dir := filepath.Join(confDir, plural)
	g := group(plural+" COMMAND", "Pull, push and delete "+plural+" (local copies in .dify_conf/"+plural+"/)")
	pull := &cobra.Command{
		Use:   "pull [NAME...] [--json]",
		Short: "Download " + plural + " (default: all) into .dify_conf/" + plural + "/NAME and print their paths",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.pullItems(cmd, k, dir, args)
		},
	}
	push := &cobra.Command{
		Use:   "push PATH... [--json]",
		Short: "Upload files; each is named after its file name",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.pushItems(cmd, k, args)
		},
	}
	if k == agentstub.KindSkill {
		push.Use = "push DIR... [--json]"
		push.Short = "Upload skill directories (each holding SKILL.md); each is named after its directory"
	}
	pull.Long = pull.Short + ".\nA local copy is replaced by the backend's; a failed pull leaves it as it was."
	del := &cobra.Command{
		Use:   "delete NAME... [--json]",
		Short: "Remove " + plural + " from the configuration",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.deleteItems(cmd, k, args)
		},
	}
	for _, c := range []*cobra.Command{pull, push, del} {
		c.Flags().Bool(jsonFlag, false, jsonFlagUse)
	}
	g.AddCommand(pull, push, del)
	return g
}

// checkName accepts a name that is one path element, so that it can never
// address anything outside .dify_conf/skills or .dify_conf/files.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return &failure{Code: codeInvalidName, Message: fmt.Sprintf("%q is not a valid name (one path element)", name)}
	}
	return nil
}

// uniqueNames is a usage error when a name repeats: two transfers of one
// item would race on its local copy.
func uniqueNames(cmd *cobra.Command, names []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return &usageError{path: cmd.CommandPath(), msg: fmt.Sprintf("%q is given twice", n)}
		}
		seen[n] = true
	}
	return nil
}

// each runs fn(i) for i in [0,n) with at most maxTransfers at a time.
func each(n int, fn func(i int)) {
	sem := make(chan struct{}, maxTransfers)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// report prints the results in input order (text lines or JSON on stdout)
// and returns every failure, in input order, as the command's error.
func (a *app) report(cmd *cobra.Command, what string, results []itemResult) error {
	asJSON, _ := cmd.Flags().GetBool(jsonFlag)
	var fs failures
	for _, r := range results {
		if r.Error != nil {
			fs = append(fs, &failure{What: what + " " + r.Name, Code: r.Error.Code, Message: r.Error.Message})
		} else if !asJSON {
			fmt.Fprintln(a.stdout, escapeUnsafe(r.done)) // names from the backend: escape.go
		}
	}
	if asJSON {
		if results == nil {
			results = []itemResult{}
		}
		if err := a.printJSON(map[string]any{"items": results}); err != nil {
			return err
		}
	}
	if len(fs) > 0 {
		return fs
	}
	return nil
}

func (a *app) pullItems(cmd *cobra.Command, k agentstub.Kind, dir string, names []string) error {
	what := "pull " + string(k)
	if err := uniqueNames(cmd, names); err != nil {
		return err
	}
	c, err := a.client(what)
	if err != nil {
		return err
	}
	ctx := ctxOf(cmd)
	if len(names) == 0 {
		m, err := c.Manifest(ctx)
		if err != nil {
			return fail("read manifest", err)
		}
		names = m.Names(k)
	}
	results := make([]itemResult, len(names))
	each(len(names), func(i int) {
		r := &results[i]
		r.Name = names[i]
		path, err := pullOne(ctx, c, k, dir, names[i])
		if err != nil {
			r.setErr(fail("", err))
			return
		}
		r.Path, r.done = path, path
	})
	return a.report(cmd, what, results)
}

// pullOne downloads one item next to its final place and then moves it
// there, so a failed pull leaves the previous local copy as it was.
func pullOne(ctx context.Context, c *agentstub.Client, k agentstub.Kind, dir, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(absDir, 0o755); err != nil {
		return "", writeFailed(err)
	}
	t, err := c.DownloadRequest(ctx, k, name)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(absDir, "."+name+".download-*")
	if err != nil {
		return "", writeFailed(err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := c.Download(ctx, t, tmp)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(absDir, name)
	if k == agentstub.KindFile {
		if err := tmp.Chmod(0o644); err != nil {
			return "", writeFailed(err)
		}
		if err := tmp.Close(); err != nil {
			return "", writeFailed(err)
		}
		if err := os.Rename(tmp.Name(), dest); err != nil {
			return "", writeFailed(err)
		}
		return dest, nil
	}
	unpacked, err := os.MkdirTemp(absDir, "."+name+".unpack-*")
	if err != nil {
		return "", writeFailed(err)
	}
	defer os.RemoveAll(unpacked) // gone after the rename; cleans up on failure
	if err := skillzip.Unpack(tmp, n, unpacked); err != nil {
		return "", err
	}
	if err := os.Chmod(unpacked, 0o755); err != nil {
		return "", writeFailed(err)
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", writeFailed(err)
	}
	if err := os.Rename(unpacked, dest); err != nil {
		return "", writeFailed(err)
	}
	return dest, nil
}

func writeFailed(err error) *failure {
	return &failure{Code: codeWriteFailed, Message: oneLine(err.Error())}
}

// upload is one item to push, read or packed locally.
type upload struct {
	name, filename, mimetype string
	open                     func() (io.ReadCloser, int64, error)
}

func (a *app) pushItems(cmd *cobra.Command, k agentstub.Kind, paths []string) error {
	what := "push " + string(k)
	ups := make([]upload, len(paths))
	names := make([]string, len(paths))
	for i, p := range paths {
		ups[i] = prepare(k, p)
		names[i] = ups[i].name
	}
	if err := uniqueNames(cmd, names); err != nil {
		return err
	}
	c, err := a.client(what)
	if err != nil {
		return err
	}
	ctx := ctxOf(cmd)
	results := make([]itemResult, len(ups))
	each(len(ups), func(i int) {
		r := &results[i]
		r.Name = ups[i].name
		id, err := uploadOne(ctx, c, ups[i])
		if err != nil {
			r.setErr(fail("", err))
			return
		}
		r.ID = id
	})
	// One config push for every item that uploaded: it is the only request
	// that changes the configuration, and it is sent once.
	var refs []agentstub.Ref
	for _, r := range results {
		if r.Error == nil {
			refs = append(refs, agentstub.Ref{Name: r.Name, FileRef: &agentstub.FileRef{Kind: "tool_file", ID: r.ID}})
		}
	}
	a.pushRefs(ctx, c, k, refs, results, "pushed")
	return a.report(cmd, what, results)
}

// pushRefs sends refs in one config push and marks the results that are not
// failed yet as done (verb) or as failed with the push's error.
func (a *app) pushRefs(ctx context.Context, c *agentstub.Client, k agentstub.Kind, refs []agentstub.Ref, results []itemResult, verb string) {
	if len(refs) == 0 {
		return
	}
	p := agentstub.Push{Files: refs}
	if k == agentstub.KindSkill {
		p = agentstub.Push{Skills: refs}
	}
	_, err := c.PushConfig(ctx, p)
	for i := range results {
		r := &results[i]
		switch {
		case r.Error != nil:
		case err != nil:
			r.ID = ""
			r.setErr(fail("", err))
		default:
			r.done = verb + " " + string(k) + " " + r.Name
		}
	}
}

// prepare names the item and says how to read it; problems surface when it
// is opened, as that item's failure.
func prepare(k agentstub.Kind, p string) upload {
	name := filepath.Base(filepath.Clean(p))
	if abs, err := filepath.Abs(p); err == nil {
		name = filepath.Base(abs)
	}
	if k == agentstub.KindSkill {
		return upload{name: name, filename: name + ".zip", mimetype: "application/zip",
			open: func() (io.ReadCloser, int64, error) {
				if st, err := os.Stat(p); err != nil || !st.IsDir() {
					if err != nil {
						return nil, 0, err
					}
					return nil, 0, &failure{Code: "invalid_skill", Message: p + " is not a directory"}
				}
				b, err := skillzip.Pack(p)
				if err != nil {
					return nil, 0, err
				}
				return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
			}}
	}
	return upload{name: name, filename: name, mimetype: mimeType(p),
		open: func() (io.ReadCloser, int64, error) {
			f, err := os.Open(p)
			if err != nil {
				return nil, 0, err
			}
			st, err := f.Stat()
			if err == nil && !st.Mode().IsRegular() {
				err = &failure{Code: codeReadFailed, Message: p + " is not a regular file"}
			}
			if err != nil {
				f.Close()
				return nil, 0, err
			}
			return f, st.Size(), nil
		}}
}

func uploadOne(ctx context.Context, c *agentstub.Client, u upload) (string, error) {
	if err := checkName(u.name); err != nil {
		return "", err
	}
	rc, size, err := u.open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	url, err := c.UploadRequest(ctx, u.filename, u.mimetype)
	if err != nil {
		return "", err
	}
	return c.Upload(ctx, url, u.filename, u.mimetype, rc, size)
}

// mimeType guesses from the extension, then from the first bytes.
func mimeType(p string) string {
	if t := mime.TypeByExtension(filepath.Ext(p)); t != "" {
		return t
	}
	f, err := os.Open(p)
	if err != nil {
		return "application/octet-stream"
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	return http.DetectContentType(head[:n])
}

func (a *app) deleteItems(cmd *cobra.Command, k agentstub.Kind, names []string) error {
	what := "delete " + string(k)
	if err := uniqueNames(cmd, names); err != nil {
		return err
	}
	c, err := a.client(what)
	if err != nil {
		return err
	}
	results := make([]itemResult, len(names))
	var refs []agentstub.Ref
	for i, n := range names {
		results[i].Name = n
		if err := checkName(n); err != nil {
			results[i].setErr(fail("", err))
			continue
		}
		refs = append(refs, agentstub.Ref{Name: n}) // nil FileRef: "file_ref": null
	}
	a.pushRefs(ctxOf(cmd), c, k, refs, results, "deleted")
	return a.report(cmd, what, results)
}
