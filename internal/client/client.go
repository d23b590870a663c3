// Package client is a Go client of the shellctl /v1 API, used by the
// shellctl command's client verbs and by the integration tests.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/shellctl/shellctl/internal/wire"
)

// Client talks to one shellctl server.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:8765
	Token   string
	HTTP    *http.Client
}

// Error is an error answer of the API.
type Error struct {
	Status  int
	Code    string
	Message string
	// Taken: of an input_backpressure, the input's bytes the job's
	// stdin pipe took (the rest were not sent).
	Taken int64
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// The answer shapes (package wire, shared with the server).
type (
	JobResult = wire.JobResult
	JobStatus = wire.JobStatus
	JobInfo   = wire.JobInfo
)

// Terminal is a terminal size.
type Terminal struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// RunRequest is the body of run. Zero fields are left out (server defaults).
type RunRequest struct {
	Script           string            `json:"script"`
	Mode             string            `json:"mode,omitempty"`
	Cwd              string            `json:"cwd,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	Terminal         *Terminal         `json:"terminal,omitempty"`
	Timeout          float64           `json:"timeout,omitempty"`
	OutputLimit      int               `json:"output_limit,omitempty"`
	IdleFlushSeconds float64           `json:"idle_flush_seconds,omitempty"`
	SessionID        string            `json:"session_id,omitempty"`
	// Stdin: "pipe" gives a stdio job a stdin pipe (pipes.go).
	Stdin string `json:"stdin,omitempty"`
}

// WaitRequest is the body of wait (and, with Text, of input).
type WaitRequest struct {
	Offset           int64    `json:"offset"`
	Timeout          *float64 `json:"timeout,omitempty"`
	OutputLimit      int      `json:"output_limit,omitempty"`
	IdleFlushSeconds float64  `json:"idle_flush_seconds,omitempty"`
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Do sends one request and returns the status and the raw body. body may be
// nil, a []byte (sent as is) or any value (sent as JSON).
func (c *Client) Do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	status, raw, err := c.Do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var env struct {
			Error struct {
				Code, Message string
				Taken         int64 `json:"taken"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
			return &Error{Status: status, Code: env.Error.Code, Message: env.Error.Message, Taken: env.Error.Taken}
		}
		return &Error{Status: status, Code: "http_" + strconv.Itoa(status), Message: strings.TrimSpace(string(raw))}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// Run starts a job.
func (c *Client) Run(ctx context.Context, r RunRequest) (*JobResult, error) {
	var out JobResult
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/run", r, &out)
}

// Wait waits for output or the end of a job.
func (c *Client) Wait(ctx context.Context, id string, r WaitRequest) (*JobResult, error) {
	var out JobResult
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/wait", r, &out)
}

// Input sends text to a job's terminal.
func (c *Client) Input(ctx context.Context, id, text string, r WaitRequest) (*JobResult, error) {
	body := struct {
		Text string `json:"text"`
		WaitRequest
	}{text, r}
	var out JobResult
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/input", body, &out)
}

// Tail returns the last bytes of a job's output.
func (c *Client) Tail(ctx context.Context, id string, limit int) (*JobResult, error) {
	var out JobResult
	q := ""
	if limit > 0 {
		q = "?output_limit=" + strconv.Itoa(limit)
	}
	return &out, c.call(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/log/tail"+q, nil, &out)
}

// Status returns a job's status view.
func (c *Client) Status(ctx context.Context, id string) (*JobStatus, error) {
	var out JobStatus
	return &out, c.call(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &out)
}

// List lists jobs.
func (c *Client) List(ctx context.Context, status string, limit int) ([]JobInfo, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.JobList
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return out.Jobs, c.call(ctx, http.MethodGet, path, nil, &out)
}

// Terminate ends a job; grace < 0 leaves the server's default.
func (c *Client) Terminate(ctx context.Context, id string, grace float64) (*JobStatus, error) {
	var body any
	if grace >= 0 {
		body = map[string]float64{"grace_seconds": grace}
	}
	var out JobStatus
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/terminate", body, &out)
}

// Delete removes a job; grace < 0 leaves the server's default.
func (c *Client) Delete(ctx context.Context, id string, force bool, grace float64) error {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	if grace >= 0 {
		q.Set("grace_seconds", strconv.FormatFloat(grace, 'f', -1, 64))
	}
	path := "/v1/jobs/" + url.PathEscape(id)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out wire.Deleted
	return c.call(ctx, http.MethodDelete, path, nil, &out)
}
