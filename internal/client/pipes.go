package client

// Input to a stdio job's stdin pipe (spec/extended-api.md §8).

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
)

// InputBytes sends data (any bytes, as base64) to job id's input — a
// stdin pipe, or a terminal — and closes a pipe after it when eof, then
// waits as Wait does. A job that does not read within r's timeout
// answers an *Error with Code "input_backpressure" whose Taken says how
// many bytes of data were taken.
func (c *Client) InputBytes(ctx context.Context, id string, data []byte, eof bool, r WaitRequest) (*JobResult, error) {
	body := struct {
		Base64 string `json:"base64"`
		EOF    bool   `json:"eof,omitempty"`
		WaitRequest
	}{base64.StdEncoding.EncodeToString(data), eof, r}
	var out JobResult
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/input", body, &out)
}

// CloseInput closes job id's stdin pipe ({"eof": true}), then waits as
// Wait does.
func (c *Client) CloseInput(ctx context.Context, id string, r WaitRequest) (*JobResult, error) {
	body := struct {
		EOF bool `json:"eof"`
		WaitRequest
	}{true, r}
	var out JobResult
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/input", body, &out)
}

// PipeInput writes data to job id's stdin pipe, closing it after when
// eof, waiting at most writeTimeout seconds for a job that does not read,
// and answers at once after (no wait for output). taken is how much of
// data the pipe took: all of it, or less with an *Error whose Code is
// "input_backpressure".
func (c *Client) PipeInput(ctx context.Context, id string, data []byte, eof bool, writeTimeout float64) (taken int64, err error) {
	zero := 0.0
	body := struct {
		Base64       string  `json:"base64"`
		EOF          bool    `json:"eof,omitempty"`
		WriteTimeout float64 `json:"write_timeout"`
		WaitRequest
	}{base64.StdEncoding.EncodeToString(data), eof, writeTimeout, WaitRequest{Timeout: &zero, OutputLimit: 1}}
	var out JobResult
	if err := c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/input", body, &out); err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			return ae.Taken, err
		}
		return 0, err
	}
	return int64(len(data)), nil
}
