package client

// Client methods of the egress proxy's session tier (PUT /v1/prepare,
// DELETE /v1/prepare/{session_id}).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// Prepare registers a session's credentials: body is PUT /v1/prepare's
// JSON as is (it holds values: it is never logged here). It returns how
// many the server registered.
func (c *Client) Prepare(ctx context.Context, body json.RawMessage) (int, error) {
	var out struct {
		Registered int `json:"registered"`
	}
	return out.Registered, c.call(ctx, http.MethodPut, "/v1/prepare", body, &out)
}

// Unprepare drops a session's credentials and returns how many there were.
func (c *Client) Unprepare(ctx context.Context, session string) (int, error) {
	var out struct {
		Removed int `json:"removed"`
	}
	return out.Removed, c.call(ctx, http.MethodDelete, "/v1/prepare/"+url.PathEscape(session), nil, &out)
}
