package agentstub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
)

// maxUploadReply bounds the reply to a signed upload ({"id"}).
const maxUploadReply = 1 << 20

// Signed URLs carry their own authorisation, so no bearer token is sent with
// them: the token must not reach a storage host that the URL points to.

// Download fetches the ticket's signed URL into w within the transfer timeout
// and returns the number of bytes written. A body shorter or longer than the
// ticket's size, or cut mid-way, is an error.
func (c *Client) Download(ctx context.Context, t *Ticket, w io.Writer) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.TransferTimeout)
	defer cancel()
	u, err := c.signedURL(t.DownloadURL)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("build download request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, netError(ctx, err, "download did not finish", c.cfg.TransferTimeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
		return 0, statusError(resp.StatusCode, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		e := netError(ctx, err, "download did not finish", c.cfg.TransferTimeout)
		if e.Code == CodeConnectionFailed {
			e.Code, e.Message = CodeTransferFailed, fmt.Sprintf("download cut after %d bytes: %s", n, e.Message)
		}
		return n, e
	}
	if t.Size != nil && n != *t.Size {
		return n, errorf(CodeTransferFailed, "download has %d bytes, expected %d", n, *t.Size)
	}
	return n, nil
}

// Upload sends size bytes from r as the multipart field "file" to a signed
// upload URL within the transfer timeout and returns the id the backend
// answers. The body has an exact Content-Length: some storage hosts refuse
// chunked uploads.
func (c *Client) Upload(ctx context.Context, uploadURL, filename, mimetype string, r io.Reader, size int64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.TransferTimeout)
	defer cancel()
	u, err := c.signedURL(uploadURL)
	if err != nil {
		return "", err
	}
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, escapeQuotes(filename)))
	h.Set("Content-Type", mimetype)
	if _, err := mw.CreatePart(h); err != nil {
		return "", fmt.Errorf("build upload body: %w", err)
	}
	headLen := head.Len()
	if err := mw.Close(); err != nil {
		return "", fmt.Errorf("build upload body: %w", err)
	}
	// Close wrote the closing boundary ("\r\n--B--\r\n") after the part
	// header; the file bytes go between the two.
	headBytes, tail := head.Bytes()[:headLen], head.Bytes()[headLen:]
	body := io.MultiReader(bytes.NewReader(headBytes), io.LimitReader(r, size), bytes.NewReader(tail))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return "", fmt.Errorf("build upload request: %w", err)
	}
	req.ContentLength = int64(len(headBytes)) + size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		e := netError(ctx, err, "upload did not finish", c.cfg.TransferTimeout)
		if e.Code == CodeConnectionFailed {
			e.Code = CodeTransferFailed
		}
		return "", e
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxUploadReply))
	if err != nil {
		return "", netError(ctx, err, "no complete answer to the upload", c.cfg.TransferTimeout)
	}
	if resp.StatusCode/100 != 2 {
		return "", statusError(resp.StatusCode, b)
	}
	var out struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(b, &out) != nil {
		return "", malformed(b, "not JSON")
	}
	id := idString(out.ID)
	if id == "" {
		return "", malformed(b, `no "id"`)
	}
	return id, nil
}

// idString accepts an id sent as a JSON string or number.
func idString(raw json.RawMessage) string {
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

// signedURL resolves a signed URL against the base URL (it may be relative)
// and checks it is http or https.
func (c *Client) signedURL(raw string) (string, error) {
	ref, err := url.Parse(raw)
	if err != nil {
		return "", errorf(CodeBadResponse, "signed URL is not a URL")
	}
	u := c.base.ResolveReference(ref)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errorf(CodeBadResponse, "signed URL must be http or https, got scheme %q", u.Scheme)
	}
	return u.String(), nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

func escapeQuotes(s string) string { return quoteEscaper.Replace(s) }
