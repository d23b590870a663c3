package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/shellctl/shellctl/internal/api"
	"github.com/shellctl/shellctl/internal/buildinfo"
	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/mcp"
)

// mcpSessionTimeout closes MCP sessions idle this long (their jobs go on).
const mcpSessionTimeout = 30 * time.Minute

// mcpHandler is /mcp: the MCP tools over the API's own handler, called in
// process (no socket; the validation, logs and metrics of /v1). The outer
// /mcp request has passed the token check already; the inner calls carry
// the token too. Once stop is closed (the server's shutdown), every /mcp
// request still open ends: a client's event stream never holds a stop.
func mcpHandler(h *api.Server, token string, log *slog.Logger, stop <-chan struct{}) http.Handler {
	c := &client.Client{BaseURL: "http://in-process", Token: token, HTTP: &http.Client{Transport: mcp.InProcess(h)}}
	srv := mcp.New(mcp.ClientJobs{C: c}, mcp.Options{Version: buildinfo.Get().Version, Logger: log, Files: c}).HTTPHandler(mcpSessionTimeout)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		srv.ServeHTTP(w, r.WithContext(ctx))
	})
}
