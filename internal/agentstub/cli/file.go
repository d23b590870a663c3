package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
)

// The file commands of agent-cli-backend.md: upload a local file as a tool
// file, get a display URL for a reference, download a file by reference.

const fileRefPrefix = "dify-file-ref:"

func (a *app) fileCmd() *cobra.Command {
	c := group("file COMMAND", "Upload, download and share files")
	c.AddCommand(a.fileUploadCmd(), a.fileDownloadCmd(), a.filePublicURLCmd())
	return c
}

// fileResult is the JSON line of upload and public-url, keys in this order.
type fileResult struct {
	TransferMethod    string `json:"transfer_method"`
	Reference         string `json:"reference"`
	PublicDownloadURL string `json:"public_download_url,omitempty"`
}

func (a *app) fileUploadCmd() *cobra.Command {
	var noLink bool
	c := &cobra.Command{
		Use:   "upload PATH [--no-download-link]",
		Short: "Upload a local file and print its reference and a download link as JSON",
		Long: `Uploads the file at PATH and prints one JSON line:
{"transfer_method":"tool_file","reference":"dify-file-ref:…","public_download_url":"…"}.
The link is a display URL for the user; it may be relative. With
--no-download-link the link is not asked for. If only the link fails, the JSON
line is still printed and stderr says how to get the link again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(args[0])
			if err != nil {
				return plainf("local file not found: %s", args[0])
			}
			f, err := os.Open(abs)
			if err != nil {
				return plainf("local file not found: %s", abs)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil || fi.IsDir() {
				return plainf("local file not found: %s", abs)
			}
			ctx := ctxOf(cmd)
			name := filepath.Base(abs)
			mt := guessMIME(name)
			upURL, err := c.RequestUploadURL(ctx, name, mt, true)
			if err != nil {
				return stepFail("request file upload URL", err)
			}
			reply, err := c.UploadFile(ctx, upURL, name, mt, f, fi.Size())
			if err != nil {
				return plainf("upload file data: %v", err)
			}
			var up struct {
				Reference *string `json:"reference"`
			}
			if err := json.Unmarshal(reply, &up); err != nil {
				return plainf("parse upload result: %v", err)
			}
			if up.Reference == nil || *up.Reference == "" {
				return plainf("signed file upload response is missing reference")
			}
			ref := *up.Reference
			if !canonicalRef(ref) {
				return plainf("signed file upload response has invalid reference")
			}
			res := fileResult{TransferMethod: "tool_file", Reference: ref}
			if noLink {
				return a.printJSON(res)
			}
			link, lerr := publicURL(cmd, c, ref)
			res.PublicDownloadURL = link
			if err := a.printJSON(res); err != nil {
				return err
			}
			if lerr != nil {
				return plainf("%s; retry without uploading again: dify-agent file public-url %s", lerr.(*plainError).msg, shQuote(ref))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&noLink, "no-download-link", false, "Do not request a public download link.")
	return c
}

// publicURL asks for the display URL of ref; failures are *plainError.
func publicURL(cmd *cobra.Command, c *agentstub.Client, ref string) (string, error) {
	t, err := c.RequestFileDownload(ctxOf(cmd), agentstub.FileMapping{TransferMethod: "tool_file", Reference: &ref}, true)
	if err != nil {
		return "", stepFail("request public download URL", err)
	}
	if t.DownloadURL == "" {
		return "", plainf("public file download response is missing download_url")
	}
	return t.DownloadURL, nil
}

func (a *app) filePublicURLCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "public-url REFERENCE",
		Short: "Print a public download link for an uploaded file reference as JSON",
		Long: `Asks for a display URL of REFERENCE (a dify-file-ref:… from file upload) and
prints {"transfer_method":"tool_file","reference":…,"public_download_url":…}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			ref := args[0]
			if ref == "" {
				return plainf("file reference must not be empty")
			}
			link, err := publicURL(cmd, c, ref)
			if err != nil {
				return err
			}
			return a.printJSON(fileResult{TransferMethod: "tool_file", Reference: ref, PublicDownloadURL: link})
		},
	}
}

func (a *app) fileDownloadCmd() *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "download TRANSFER_METHOD REFERENCE_OR_URL [--to DIR]",
		Short: "Download a file by reference (or remote_url URL) and print the written path",
		Long: `Downloads a file into DIR (default: the current directory, created if needed)
and prints the path written. TRANSFER_METHOD is local_file, tool_file,
datasource_file (with a dify-file-ref:… reference) or remote_url (with a URL).
An existing file is never overwritten: " (1)", " (2)", … go before the extension.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			method, x := args[0], args[1]
			f := agentstub.FileMapping{TransferMethod: method, Reference: &x}
			if method == "remote_url" {
				f = agentstub.FileMapping{TransferMethod: method, URL: &x}
			}
			ctx := ctxOf(cmd)
			t, err := c.RequestFileDownload(ctx, f, false)
			if err != nil {
				return stepFail("request file download URL", err)
			}
			if t.DownloadURL == "" {
				return plainf("signed file download response is missing download_url")
			}
			if t.Filename == "" {
				return plainf("signed file download response is missing filename")
			}
			dir := to
			if dir == "" {
				if dir, err = os.Getwd(); err != nil {
					return plainf("current directory: %v", err)
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return plainf("create %s: %v", escapeUnsafe(dir), err)
			}
			out, path, err := createUnique(dir, downloadName(t.Filename))
			if err != nil {
				return plainf("%v", err)
			}
			if _, err := c.Fetch(ctx, t.DownloadURL, agentstub.LocalWriter(out)); err != nil {
				out.Close()
				os.Remove(path)
				return plainf("download file data: %v", err)
			}
			if err := out.Close(); err != nil {
				os.Remove(path)
				return plainf("write %s: %v", escapeUnsafe(path), err)
			}
			// The name is safe already; the directory (--to, the cwd)
			// is the caller's, printed escaped should it hold a control
			// character, so the answer stays one line of text.
			_, err = fmt.Fprintln(a.stdout, escapeUnsafe(path))
			return err
		},
	}
	c.Flags().StringVar(&to, "to", "", "Directory to write the downloaded file into.")
	return c
}

// stepFail is stubFail for the file commands.
func stepFail(step string, err error) error { return stubFail(step, err) }

// guessMIME is the type of name's extension without parameters, or
// application/octet-stream: the upload signature covers the bare type.
func guessMIME(name string) string {
	t := mime.TypeByExtension(filepath.Ext(name))
	if t == "" {
		return "application/octet-stream"
	}
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	if i := strings.IndexByte(t, ';'); i >= 0 {
		return strings.TrimSpace(t[:i])
	}
	return t
}

// canonicalRef reports whether ref is "dify-file-ref:" and padded
// base64url of a JSON object whose record_id is a non-empty string.
func canonicalRef(ref string) bool {
	_, ok := refRecordID(ref)
	return ok
}

func refRecordID(ref string) (string, bool) {
	enc, ok := strings.CutPrefix(ref, fileRefPrefix)
	if !ok || enc == "" {
		return "", false
	}
	raw, err := base64.URLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", false
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if dec.Decode(&obj) != nil || obj == nil || dec.More() {
		return "", false
	}
	var id string
	if json.Unmarshal(obj["record_id"], &id) != nil || id == "" {
		return "", false
	}
	return id, true
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// downloadName is the base name of the server's filename; names that are
// no file name become "downloaded". Control characters, bidirectional
// formatting characters and invalid UTF-8 become "_" (safeFileName): the
// name is printed, and a name from the backend must not drive the
// terminal of whoever reads it (an OSC 52 sequence writes the clipboard).
func downloadName(filename string) string {
	name := filename
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, 0) {
		return "downloaded"
	}
	return safeFileName(name)
}

// createUnique creates dir/name, or dir/"stem (n).ext" for the first n that
// is free, without following a symlink or replacing anything, and returns
// the open file and its path (dir joined with the name).
func createUnique(dir, name string) (*os.File, string, error) {
	stem, ext := name, filepath.Ext(name)
	if ext == name { // ".bashrc": no extension
		ext = ""
	}
	stem = strings.TrimSuffix(name, ext)
	for n := 0; ; n++ {
		cand := name
		if n > 0 {
			cand = fmt.Sprintf("%s (%d)%s", stem, n, ext)
		}
		path := filepath.Join(dir, cand)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err == nil {
			return f, path, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", fmt.Errorf("create %s: %w", escapeUnsafe(path), err)
		}
		if n > 10000 {
			return nil, "", fmt.Errorf("create %s: too many files named like it", escapeUnsafe(filepath.Join(dir, name)))
		}
	}
}
