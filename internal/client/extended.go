package client

// Client methods of the extended API's job routes (spec/extended-api.md §2,
// §3) and of GET /v1/info, for the shellctl command's verbs.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// Record is the part of a job's record (GET /v1/jobs/{id}/record) the
// command line shows; RecordJSON gives the whole answer.
type Record struct {
	JobID       string    `json:"job_id"`
	Status      string    `json:"status"`
	Done        bool      `json:"done"`
	ExitCode    *int      `json:"exit_code"`
	Signal      *string   `json:"signal"`
	Reason      *string   `json:"reason"`
	Message     *string   `json:"message"`
	Mode        string    `json:"mode"`
	Stdin       string    `json:"stdin"`
	Cwd         string    `json:"cwd"`
	Terminal    *Terminal `json:"terminal"`
	CreatedAt   string    `json:"created_at"`
	StartedAt   *string   `json:"started_at"`
	EndedAt     *string   `json:"ended_at"`
	OutputBytes int64     `json:"output_bytes"`
	StderrBytes int64     `json:"stderr_bytes"`
}

func jobPath(id, rest string) string { return "/v1/jobs/" + url.PathEscape(id) + rest }

// Record returns the part of job id's record that Record holds.
func (c *Client) Record(ctx context.Context, id string) (*Record, error) {
	var out Record
	return &out, c.call(ctx, http.MethodGet, jobPath(id, "/record"), nil, &out)
}

// RecordJSON returns job id's whole record as the server sent it.
func (c *Client) RecordJSON(ctx context.Context, id string) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.call(ctx, http.MethodGet, jobPath(id, "/record"), nil, &out)
}

// Signal sends sig (a name such as "INT" or "SIGTERM", or a number) to job
// id; target is "foreground", "group", "tree" or "" (the server's default
// for the job's mode).
func (c *Client) Signal(ctx context.Context, id, sig, target string) (*Record, error) {
	body := map[string]any{"signal": sig}
	if n, err := strconv.Atoi(sig); err == nil {
		body["signal"] = n
	}
	if target != "" {
		body["target"] = target
	}
	var out Record
	return &out, c.call(ctx, http.MethodPost, jobPath(id, "/signal"), body, &out)
}

// Resize sets the size of job id's terminal.
func (c *Client) Resize(ctx context.Context, id string, cols, rows int) error {
	var out Record
	return c.call(ctx, http.MethodPost, jobPath(id, "/resize"), Terminal{Cols: cols, Rows: rows}, &out)
}

// Stderr pages stderr.log of a stdio job from offset (limit ≤ 0: the
// server's default window).
func (c *Client) Stderr(ctx context.Context, id string, offset int64, limit int) (*JobResult, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	if limit > 0 {
		q.Set("output_limit", strconv.Itoa(limit))
	}
	var out JobResult
	return &out, c.call(ctx, http.MethodGet, jobPath(id, "/stderr?"+q.Encode()), nil, &out)
}

// Info is the part of GET /v1/info the command line uses.
type Info struct {
	Version  string `json:"version"`
	StateDir string `json:"state_dir"`
}

// Info returns the server's description of itself.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var out Info
	return &out, c.call(ctx, http.MethodGet, "/v1/info", nil, &out)
}
