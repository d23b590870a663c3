package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// FileStat is a file as stat and list see it.
type FileStat struct {
	Path       string `json:"path,omitempty"`
	Name       string `json:"name,omitempty"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	Mtime      string `json:"mtime"`
	LinkTarget string `json:"link_target,omitempty"`
}

// FileList is the answer of list.
type FileList struct {
	Path      string     `json:"path"`
	Entries   []FileStat `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// FileWritten is the answer of PUT content.
type FileWritten struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FileEdit is the body of edit.
type FileEdit struct {
	Path       string `json:"path"`
	OldText    string `json:"old_text"`
	NewText    string `json:"new_text"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// FileEdited is the answer of edit.
type FileEdited struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	SHA256       string `json:"sha256"`
}

// ArchiveOptions are the query parameters of archive (zero: the server's
// defaults).
type ArchiveOptions struct {
	Format                                              string // "tar" or "tar.zst"
	MaxFiles, MaxFileBytes, MaxBytes, MaxEntriesVisited int64
}

func fileQuery(route string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return route + "?" + v.Encode()
}

// Stat is GET /v1/files/stat.
func (c *Client) Stat(ctx context.Context, path string, follow bool) (*FileStat, error) {
	var out FileStat
	_, err := c.Call(ctx, http.MethodGet, fileQuery("/v1/files/stat", "path", path, "follow", strconv.FormatBool(follow)), nil, &out)
	return &out, err
}

// ListDir is GET /v1/files/list (limit 0: the server's default).
func (c *Client) ListDir(ctx context.Context, path string, limit int, hidden bool) (*FileList, error) {
	l := ""
	if limit > 0 {
		l = strconv.Itoa(limit)
	}
	var out FileList
	_, err := c.Call(ctx, http.MethodGet, fileQuery("/v1/files/list", "path", path, "limit", l, "hidden", strconv.FormatBool(hidden)), nil, &out)
	return &out, err
}

// stream sends a request whose answer is not JSON; a status other than
// ok is decoded as an *Error.
func (c *Client) stream(ctx context.Context, method, path string, body io.Reader, hdr map[string]string, ok ...int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if s, isSized := body.(*sized); isSized {
		req.ContentLength = s.n
		if s.n == 0 {
			req.Body = http.NoBody
		}
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
		return nil, &Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
	}
	return nil, &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(raw))}
}

// ReadFile is GET /v1/files/content: the caller reads and closes the
// body. rng is a Range header value ("" for all of it).
func (c *Client) ReadFile(ctx context.Context, path, rng string) (io.ReadCloser, http.Header, error) {
	h := map[string]string{}
	if rng != "" {
		h["Range"] = rng
	}
	resp, err := c.stream(ctx, http.MethodGet, fileQuery("/v1/files/content", "path", path), nil, h, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return nil, nil, err
	}
	return resp.Body, resp.Header, nil
}

// WriteFile is PUT /v1/files/content. mode "" keeps the server's default;
// ifMatch "" sends no If-Match.
func (c *Client) WriteFile(ctx context.Context, path string, body io.Reader, size int64, mode string, mkdirs bool, ifMatch string) (*FileWritten, error) {
	h := map[string]string{}
	if ifMatch != "" {
		h["If-Match"] = ifMatch
	}
	req := fileQuery("/v1/files/content", "path", path, "mode", mode, "mkdirs", strconv.FormatBool(mkdirs))
	if size >= 0 {
		body = &sized{Reader: body, n: size}
	}
	resp, err := c.stream(ctx, http.MethodPut, req, body, h, http.StatusOK, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out FileWritten
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode PUT %s answer: %w", path, err)
	}
	return &out, nil
}

// sized is a body of known size, sent with its Content-Length (the
// server refuses one over its limit before reading it).
type sized struct {
	io.Reader
	n int64
}

// EditFile is POST /v1/files/edit.
func (c *Client) EditFile(ctx context.Context, e FileEdit) (*FileEdited, error) {
	var out FileEdited
	_, err := c.Call(ctx, http.MethodPost, "/v1/files/edit", e, &out)
	return &out, err
}

// Mkdir is POST /v1/files/mkdir.
func (c *Client) Mkdir(ctx context.Context, path string, parents bool, mode string) error {
	body := map[string]any{"path": path, "parents": parents}
	if mode != "" {
		body["mode"] = mode
	}
	resp, err := c.stream(ctx, http.MethodPost, "/v1/files/mkdir", strings.NewReader(mustJSON(body)), map[string]string{"Content-Type": "application/json"}, http.StatusOK, http.StatusCreated)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// Move is POST /v1/files/move.
func (c *Client) Move(ctx context.Context, from, to string, overwrite bool) error {
	var out map[string]string
	_, err := c.Call(ctx, http.MethodPost, "/v1/files/move", map[string]any{"from": from, "to": to, "overwrite": overwrite}, &out)
	return err
}

// Remove is DELETE /v1/files; it answers how many entries went.
func (c *Client) Remove(ctx context.Context, path string, recursive bool) (int, error) {
	var out struct {
		Removed int `json:"removed"`
	}
	_, err := c.Call(ctx, http.MethodDelete, fileQuery("/v1/files", "path", path, "recursive", strconv.FormatBool(recursive)), nil, &out)
	return out.Removed, err
}

// Archive is GET /v1/files/archive: the caller reads the body to its end,
// then finds the X-Archive-* trailers in the response's Trailer.
func (c *Client) Archive(ctx context.Context, path string, o ArchiveOptions) (*http.Response, error) {
	n := func(v int64) string {
		if v <= 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	return c.stream(ctx, http.MethodGet, fileQuery("/v1/files/archive", "path", path, "format", o.Format,
		"max_files", n(o.MaxFiles), "max_file_bytes", n(o.MaxFileBytes), "max_bytes", n(o.MaxBytes), "max_entries_visited", n(o.MaxEntriesVisited)), nil, nil, http.StatusOK)
}

// Watch is GET /v1/files/watch: the caller reads the event stream.
func (c *Client) Watch(ctx context.Context, path string, recursive bool) (*http.Response, error) {
	return c.stream(ctx, http.MethodGet, fileQuery("/v1/files/watch", "path", path, "recursive", strconv.FormatBool(recursive)), nil, map[string]string{"Accept": "text/event-stream"}, http.StatusOK)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
