package agentstub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"time"
)

// The client side of the commands of agent-cli-backend.md: file, drive,
// knowledge and home-snapshot. Messages follow that spec, since the model
// (file, drive, knowledge) and the backend's logs (home-snapshot) read them.

// FileMapping is the "file" of a download-request: a reference, or for
// remote_url a URL.
type FileMapping struct {
	TransferMethod string  `json:"transfer_method"`
	Reference      *string `json:"reference,omitempty"`
	URL            *string `json:"url,omitempty"`
}

// FileTicket is the answer of a file download-request.
type FileTicket struct {
	Filename    string `json:"filename"`
	MimeType    string `json:"mime_type"`
	Size        *int64 `json:"size"`
	DownloadURL string `json:"download_url"`
}

// RequestUploadURL asks for a signed upload URL. exposeExpiration adds
// ?expose_expiration=true, so an expired token comes back structured.
func (c *Client) RequestUploadURL(ctx context.Context, filename, mimetype string, exposeExpiration bool) (string, error) {
	path := "/files/upload-request"
	if exposeExpiration {
		path += "?expose_expiration=true"
	}
	b, err := c.raw(ctx, http.MethodPost, path, map[string]string{"filename": filename, "mimetype": mimetype})
	if err != nil {
		return "", err
	}
	var out struct {
		UploadURL string `json:"upload_url"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("parse upload URL response: %w", err)
	}
	if out.UploadURL == "" {
		return "", errors.New("signed file upload response is missing upload_url")
	}
	return out.UploadURL, nil
}

// RequestFileDownload asks for the download URL of a file. forFrontend asks
// for a display URL (which may be relative and is never fetched).
func (c *Client) RequestFileDownload(ctx context.Context, f FileMapping, forFrontend bool) (*FileTicket, error) {
	in := struct {
		File        FileMapping `json:"file"`
		ForFrontend bool        `json:"for_frontend"`
	}{f, forFrontend}
	b, err := c.raw(ctx, http.MethodPost, "/files/download-request", in)
	if err != nil {
		return nil, err
	}
	var t FileTicket
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("parse download response: %w", err)
	}
	return &t, nil
}

// maxSignedUploadReply is what is read of a signed upload's answer.
const maxSignedUploadReply = 1 << 20

// UploadFile sends size bytes of r, streamed, as the multipart field "file"
// to a signed upload URL within the upload timeout (no bearer token) and
// returns the answer's body.
func (c *Client) UploadFile(ctx context.Context, uploadURL, filename, mimetype string, r io.Reader, size int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.UploadTimeout)
	defer cancel()
	u, err := c.signedURL(uploadURL)
	if err != nil {
		return nil, err
	}
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, escapeQuotes(filename)))
	h.Set("Content-Type", mimetype)
	if _, err := mw.CreatePart(h); err != nil {
		return nil, fmt.Errorf("build upload body: %w", err)
	}
	headLen := head.Len()
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("build upload body: %w", err)
	}
	headBytes, tail := head.Bytes()[:headLen], head.Bytes()[headLen:]
	body := io.MultiReader(bytes.NewReader(headBytes), io.LimitReader(r, size), bytes.NewReader(tail))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, fmt.Errorf("build upload request: %w", err)
	}
	req.ContentLength = int64(len(headBytes)) + size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transferErr(ctx, "upload", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSignedUploadReply))
	if err != nil {
		return nil, transferErr(ctx, "upload", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("upload failed with status %d: %s", resp.StatusCode, Shorten(b))
	}
	return b, nil
}

// Fetch GETs a signed download URL into w within the transfer timeout
// (redirects followed, no bearer token) and returns the bytes written.
func (c *Client) Fetch(ctx context.Context, downloadURL string, w io.Writer) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.TransferTimeout)
	defer cancel()
	u, err := c.signedURL(downloadURL)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("build download request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, transferErr(ctx, "download", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxSignedUploadReply))
		return 0, fmt.Errorf("download failed with status %d: %s", resp.StatusCode, Shorten(b))
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		var we writeError
		if errors.As(err, &we) {
			return n, we.err
		}
		return n, transferErr(ctx, "download", err)
	}
	return n, nil
}

// writeError marks an error of the local writer in Fetch, so it is not
// taken for a transfer error.
type writeError struct{ err error }

func (e writeError) Error() string { return e.err.Error() }

// LocalWriter wraps w so that Fetch reports its errors as they are.
func LocalWriter(w io.Writer) io.Writer { return localWriter{w} }

type localWriter struct{ w io.Writer }

func (l localWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err != nil {
		return n, writeError{err}
	}
	return n, nil
}

// transferErr says what went wrong with a signed transfer; the URL is left
// out (it carries a signature).
func transferErr(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s request timed out", op)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s request failed: %v", op, err)
}

// LegacyError is how the drive and home-snapshot commands report an HTTP
// error, as the original's home-snapshot line did:
// "agent stub <op> failed (HTTP <n>): <detail>".
func LegacyError(op string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status > 0 {
		return fmt.Errorf("agent stub %s failed (HTTP %d): %s", op, e.Status, e.Message)
	}
	return fmt.Errorf("agent stub %s failed: %w", op, err)
}

// DriveEntry is one item of the drive manifest. Fields the CLI does not
// print are not kept.
type DriveEntry struct {
	Key         string  `json:"key"`
	Size        *int64  `json:"size"`
	Hash        *string `json:"hash"`
	MimeType    *string `json:"mime_type"`
	DownloadURL *string `json:"download_url"`
}

// DriveManifest lists the drive items under prefix (prefix is always sent).
func (c *Client) DriveManifest(ctx context.Context, prefix string, withURL bool) ([]DriveEntry, error) {
	b, err := c.raw(ctx, http.MethodGet, fmt.Sprintf("/drive/manifest?include_download_url=%t&prefix=%s",
		withURL, url.QueryEscape(prefix)), nil)
	if err != nil {
		return nil, LegacyError("drive manifest", err)
	}
	var out struct {
		Items []DriveEntry `json:"items"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("parse drive manifest: %w", err)
	}
	return out.Items, nil
}

// DriveCommitItem is one item of a drive commit.
type DriveCommitItem struct {
	Key     string  `json:"key"`
	FileRef FileRef `json:"file_ref"`
}

// DriveCommit commits uploaded files under their keys and returns the
// answer's body as it came.
func (c *Client) DriveCommit(ctx context.Context, items []DriveCommitItem) ([]byte, error) {
	b, err := c.raw(ctx, http.MethodPost, "/drive/commit", map[string]any{"items": items})
	if err != nil {
		return nil, LegacyError("drive commit", err)
	}
	return b, nil
}

// noRedirects is an http.Client that never follows a redirect: the bearer
// token must never leave the Agent Stub.
func (c *Client) noRedirects(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     c.http.Transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// KnowledgeTimeout bounds one knowledge exchange (65 s, as the original).
const KnowledgeTimeout = 65 * time.Second

// EnvTestKnowledgeTimeout replaces KnowledgeTimeout in tests.
const EnvTestKnowledgeTimeout = "DIFY_AGENT_TEST_KNOWLEDGE_TIMEOUT"

// KnowledgeReply is the answer to a knowledge command.
type KnowledgeReply struct {
	Status int
	Body   []byte // at most limit+1 bytes were read
	Over   bool   // the body was longer than limit
}

// Knowledge posts body to /knowledge/commands without following redirects
// and reads at most limit bytes of the answer. A transport failure, a
// timeout or a cancellation is ErrKnowledgeTransport; a broken read is
// ErrKnowledgeIncomplete.
func (c *Client) Knowledge(ctx context.Context, body []byte, timeout time.Duration, limit int64) (*KnowledgeReply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.BaseURL+"/knowledge/commands", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.noRedirects(timeout).Do(req)
	if err != nil {
		return nil, ErrKnowledgeTransport
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrKnowledgeTransport
		}
		return nil, ErrKnowledgeIncomplete
	}
	return &KnowledgeReply{Status: resp.StatusCode, Body: b, Over: int64(len(b)) > limit}, nil
}

var (
	ErrKnowledgeTransport  = errors.New("knowledge command transport unavailable or cancelled")
	ErrKnowledgeIncomplete = errors.New("knowledge response exceeds the output limit or is incomplete")
)

// homeSnapshotPath is the Home Snapshot gateway's route.
const homeSnapshotPath = "/home-snapshots/archive"

// maxHomeErrorBody is what is read of a gateway error.
const maxHomeErrorBody = 64 << 10

// PutHomeSnapshot streams body (chunked, no length) to the gateway with no
// timeout and no redirects; only ctx cancels it. Any non-2xx is an error.
func (c *Client) PutHomeSnapshot(ctx context.Context, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.cfg.BaseURL+homeSnapshotPath, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Content-Type", "application/zstd")
	resp, err := c.noRedirects(0).Do(req)
	if err != nil {
		return fmt.Errorf("agent stub Home Snapshot upload failed: %w", unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxHomeErrorBody))
		return LegacyError("Home Snapshot upload", statusError(resp.StatusCode, b))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// GetHomeSnapshot opens the archive stream of the gateway (no timeout, no
// redirects). The caller closes it.
func (c *Client) GetHomeSnapshot(ctx context.Context) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.BaseURL+homeSnapshotPath, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	resp, err := c.noRedirects(0).Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent stub Home Snapshot download failed: %w", unwrapURL(err))
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxHomeErrorBody))
		return nil, LegacyError("Home Snapshot download", statusError(resp.StatusCode, b))
	}
	return resp.Body, nil
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
