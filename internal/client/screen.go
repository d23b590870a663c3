package client

// The screen routes (docs/api.md "Screen and keys").

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Screen is what a pty job's terminal shows (GET /v1/jobs/{id}/screen).
type Screen struct {
	Cols   int `json:"cols"`
	Rows   int `json:"rows"`
	Cursor struct {
		Row     int  `json:"row"`
		Col     int  `json:"col"`
		Visible bool `json:"visible"`
	} `json:"cursor"`
	AltScreen bool     `json:"alt_screen"`
	Title     string   `json:"title"`
	Lines     []string `json:"lines"`
	// Scrollback: present when asked for (oldest first).
	Scrollback *[]string `json:"scrollback,omitempty"`
}

// KeysRequest is the body of POST /v1/jobs/{id}/keys. Zero fields are
// left out (server defaults).
type KeysRequest struct {
	Keys       []string `json:"keys"`
	QuietMS    int      `json:"quiet_ms,omitempty"`
	TimeoutMS  int      `json:"timeout_ms,omitempty"`
	Scrollback int      `json:"scrollback,omitempty"`
}

// Screen returns the screen of job id with up to scrollback rows of
// scrollback (0: none).
func (c *Client) Screen(ctx context.Context, id string, scrollback int) (*Screen, error) {
	path := "/v1/jobs/" + url.PathEscape(id) + "/screen"
	if scrollback > 0 {
		path += "?scrollback=" + strconv.Itoa(scrollback)
	}
	var out Screen
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}

// Keys types keys (names such as "Enter", "C-c", "Up", or text) on the
// terminal of job id and returns its screen once the program settled.
func (c *Client) Keys(ctx context.Context, id string, r KeysRequest) (*Screen, error) {
	var out Screen
	return &out, c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/keys", r, &out)
}
