package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/reqctx"
)

// RequestIDHeader carries a request's id, both ways.
const RequestIDHeader = "X-Request-Id"

// maxRequestID bounds an id taken from a client.
const maxRequestID = 128

func reqInfoFrom(ctx context.Context) *reqctx.Info { return reqctx.From(ctx) }

// RequestID returns the id of the request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string { return reqctx.ID(ctx) }

// requestID keeps a client's id when it is sane (1 to 128 characters of
// A-Z a-z 0-9 . _ : -, nothing that could forge a log line or a header),
// else makes one: 32 hex characters.
func requestID(given string) string {
	if given != "" && len(given) <= maxRequestID {
		ok := true
		for i := 0; i < len(given); i++ {
			c := given[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
				ok = false
				break
			}
		}
		if ok {
			return given
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on Linux
	return hex.EncodeToString(b[:])
}

// routePattern names the route of an (escaped) path as the router
// matches it, ids replaced by {id}: the label of the HTTP metrics and the
// route of the request log. job is the id in the path when it has the
// shape of one.
func routePattern(path string) (pattern, job string) {
	switch path {
	case "/healthz", "/metrics", "/v1/info", "/v1/jobs", "/v1/jobs/run", "/v1/snapshot/save", "/v1/snapshot/restore":
		return path, ""
	}
	if !strings.HasPrefix(path, "/v1/jobs/") {
		return "unmatched", ""
	}
	parts := strings.Split(strings.TrimPrefix(path, "/v1/jobs/"), "/")
	if jobs.ValidID(parts[0]) {
		job = parts[0]
	}
	switch {
	case len(parts) == 1:
		return "/v1/jobs/{id}", job
	case len(parts) == 2 && (parts[1] == "wait" || parts[1] == "input" || parts[1] == "terminate"):
		return "/v1/jobs/{id}/" + parts[1], job
	case len(parts) == 3 && parts[1] == "log" && parts[2] == "tail":
		return "/v1/jobs/{id}/log/tail", job
	case len(parts) == 2 && parts[1] == "stream":
		return "/v1/jobs/{id}/stream", job
	}
	return "unmatched", ""
}
