// Package agentstub is the client of the Agent Stub, the agent backend's API
// that the dify-agent CLI talks to from inside the sandbox. It knows the
// routes, the error envelope, the timeouts and the signed-URL transfers; it
// knows nothing of files on disk or of the command line.
package agentstub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxAPIBody bounds an API reply read into memory. Replies are small JSON
// documents; the largest is a prompt, far below this.
const maxAPIBody = 32 << 20

// Client talks to one Agent Stub. It never retries: several requests change
// state, and a retry after a lost reply could apply a change twice.
type Client struct {
	cfg  Config
	base *url.URL
	http *http.Client
}

// New returns a client for cfg (see ConfigFromEnv).
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse base URL: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Timeouts are per request via contexts (API vs transfer differ), so the
	// http.Client itself has none.
	return &Client{cfg: cfg, base: base, http: &http.Client{Transport: tr}}, nil
}

// Kind is what a configuration item is: a skill (zip archive) or a file.
type Kind string

const (
	KindSkill Kind = "skill"
	KindFile  Kind = "file"
)

// Manifest is the answer of GET /config/manifest.
type Manifest struct {
	Skills NameList `json:"skills"`
	Files  NameList `json:"files"`
	Note   string   `json:"note"`
}

// NameList is {"items":[{"name"}]}.
type NameList struct {
	Items []Named `json:"items"`
}

// Named is one manifest item.
type Named struct {
	Name string `json:"name"`
}

// Names returns the names of the items of kind k, in manifest order.
func (m *Manifest) Names(k Kind) []string {
	list := m.Files
	if k == KindSkill {
		list = m.Skills
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	return names
}

// Ticket is the answer of POST /files/download-request.
type Ticket struct {
	Filename    string `json:"filename"`
	MimeType    string `json:"mime_type"`
	Size        *int64 `json:"size"`
	DownloadURL string `json:"download_url"`
}

// FileRef points a configuration item at an uploaded file.
type FileRef struct {
	Kind string `json:"kind"` // always "tool_file"
	ID   string `json:"id"`
}

// Ref is one item of a config push; a nil FileRef (JSON null) deletes it.
type Ref struct {
	Name    string   `json:"name"`
	FileRef *FileRef `json:"file_ref"`
}

// Push is the body of POST /config/push. Empty lists are left out so a push
// of skills never touches files and the other way round.
type Push struct {
	Skills []Ref `json:"skills,omitempty"`
	Files  []Ref `json:"files,omitempty"`
}

// GetPrompt returns the prompt text exactly as the backend holds it.
func (c *Client) GetPrompt(ctx context.Context) (string, error) {
	var out struct {
		Prompt *string `json:"prompt"`
	}
	b, err := c.api(ctx, http.MethodGet, "/config/prompt", nil, &out)
	if err != nil {
		return "", err
	}
	if out.Prompt == nil {
		return "", malformed(b, `no "prompt" string`)
	}
	return *out.Prompt, nil
}

// PutPrompt saves text as the prompt ("" clears it) and returns the saved
// prompt JSON the backend answers.
func (c *Client) PutPrompt(ctx context.Context, text string) (json.RawMessage, error) {
	return c.api(ctx, http.MethodPut, "/config/prompt", map[string]string{"prompt": text}, nil)
}

// Manifest returns the configuration's manifest.
func (c *Client) Manifest(ctx context.Context) (*Manifest, error) {
	var m Manifest
	if _, err := c.api(ctx, http.MethodGet, "/config/manifest", nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// DownloadRequest asks for a signed URL for one item.
func (c *Client) DownloadRequest(ctx context.Context, k Kind, name string) (*Ticket, error) {
	in := map[string]any{
		"config":       map[string]string{"kind": string(k), "name": name},
		"for_frontend": false,
	}
	var t Ticket
	b, err := c.api(ctx, http.MethodPost, "/files/download-request", in, &t)
	if err != nil {
		return nil, err
	}
	if t.DownloadURL == "" {
		return nil, malformed(b, `no "download_url"`)
	}
	return &t, nil
}

// UploadRequest asks for a signed URL to upload one file to.
func (c *Client) UploadRequest(ctx context.Context, filename, mimetype string) (string, error) {
	var out struct {
		UploadURL string `json:"upload_url"`
	}
	b, err := c.api(ctx, http.MethodPost, "/files/upload-request",
		map[string]string{"filename": filename, "mimetype": mimetype}, &out)
	if err != nil {
		return "", err
	}
	if out.UploadURL == "" {
		return "", malformed(b, `no "upload_url"`)
	}
	return out.UploadURL, nil
}

// PushConfig points skills and files at uploaded files, or deletes them.
func (c *Client) PushConfig(ctx context.Context, p Push) (json.RawMessage, error) {
	return c.api(ctx, http.MethodPost, "/config/push", p, nil)
}

// PatchEnv replaces the environment text.
func (c *Client) PatchEnv(ctx context.Context, envText string) (json.RawMessage, error) {
	return c.api(ctx, http.MethodPatch, "/config/env", map[string]string{"env_text": envText}, nil)
}

// PutNote replaces the note.
func (c *Client) PutNote(ctx context.Context, note string) (json.RawMessage, error) {
	return c.api(ctx, http.MethodPut, "/config/note", map[string]string{"note": note}, nil)
}

// Connect asks the backend for a connection described by argv.
func (c *Client) Connect(ctx context.Context, argv []string, metadata map[string]string) (json.RawMessage, error) {
	if argv == nil {
		argv = []string{}
	}
	if metadata == nil {
		metadata = map[string]string{}
	}
	return c.api(ctx, http.MethodPost, "/connections", map[string]any{"argv": argv, "metadata": metadata}, nil)
}

// api sends one API request under the base URL with the bearer token and the
// API timeout. A 2xx reply must be JSON; it is decoded into out when out is
// not nil, and returned raw either way.
func (c *Client) api(ctx context.Context, method, path string, in, out any) (json.RawMessage, error) {
	b, err := c.raw(ctx, method, path, in)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, malformed(b, "not JSON")
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, malformed(b, "unexpected shape")
		}
	}
	return json.RawMessage(b), nil
}

// raw sends one API request (path may carry a query) under the base URL
// with the bearer token and the API timeout, and returns the body of a 2xx
// reply as it came. Any other status is an *Error (see statusError).
func (c *Client) raw(ctx context.Context, method, path string, in any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.APITimeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, netError(ctx, err, "no answer from the agent stub", c.cfg.APITimeout)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return nil, netError(ctx, err, "no complete answer from the agent stub", c.cfg.APITimeout)
	}
	if resp.StatusCode/100 != 2 {
		return nil, statusError(resp.StatusCode, b)
	}
	return b, nil
}

// marshal encodes v as JSON without HTML escaping, so text such as "<tag>"
// travels as written (it decodes the same either way).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// statusError turns a non-2xx reply into an *Error. Both envelopes are
// understood: FastAPI's {"detail": string | {"code","message"}} (what the
// Agent Stub sends) and {"error":{"code","message"}}. A detail that is a
// string is the message; an object gives its code and message (its raw JSON
// when the message is empty); anything else (FastAPI's 422 list, a body that
// is not JSON) leaves the raw body, shortened, as the message. The code is
// http_<status> when the body names none.
func statusError(status int, body []byte) *Error {
	code, msg := fmt.Sprintf("http_%d", status), ""
	var env struct {
		Detail json.RawMessage `json:"detail"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil {
		var text string
		var obj struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		switch {
		case len(env.Detail) > 0 && json.Unmarshal(env.Detail, &text) == nil:
			msg = Shorten([]byte(text))
		case len(env.Detail) > 0 && env.Detail[0] == '{' && json.Unmarshal(env.Detail, &obj) == nil:
			if obj.Code != "" {
				code = obj.Code
			}
			msg = Shorten([]byte(obj.Message))
			if msg == "" {
				msg = Shorten(env.Detail)
			}
		case env.Error != nil && env.Error.Code != "":
			code, msg = env.Error.Code, Shorten([]byte(env.Error.Message))
		}
	}
	if msg == "" {
		msg = Shorten(body)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Code: code, Message: msg}
}

func malformed(body []byte, why string) *Error {
	msg := "malformed reply (" + why + ")"
	if s := Shorten(body); s != "" {
		msg += ": " + s
	} else {
		msg += ": empty body"
	}
	return &Error{Code: CodeBadResponse, Message: msg}
}

// netError classifies a failure to send a request or read its reply. The
// request URL is left out of the message: signed URLs carry secrets.
func netError(ctx context.Context, err error, timeoutMsg string, limit time.Duration) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return errorf(CodeTimeout, "%s within %s", timeoutMsg, limit)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "connection closed before the reply was complete (" + msg + ")"
	}
	return &Error{Code: CodeConnectionFailed, Message: strings.TrimSpace(msg)}
}

// StatusError is the *Error of an HTTP answer with status and body, for
// callers that read the body themselves (knowledge).
func StatusError(status int, body []byte) *Error { return statusError(status, body) }
