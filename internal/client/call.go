package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Call sends one request (body as in Do) and decodes a 200 answer into out;
// any other status becomes an *Error. It also returns the answer's headers:
// the extended API tells some facts only there (X-Shellctl-Input-Wait).
func (c *Client) Call(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.Header, fmt.Errorf("read %s %s answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var env struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
			return resp.Header, &Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
		}
		return resp.Header, &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(raw))}
	}
	if r, ok := out.(*JobResult); ok {
		// A window of output: read in one pass (wire.JobResult's
		// UnmarshalJSON), without encoding/json's two scans of it first.
		if err := r.UnmarshalJSON(raw); err != nil {
			return resp.Header, fmt.Errorf("decode %s %s answer: %w", method, path, err)
		}
		return resp.Header, nil
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.Header, fmt.Errorf("decode %s %s answer: %w", method, path, err)
		}
	}
	return resp.Header, nil
}
