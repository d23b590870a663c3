package api

// GET /v1/openapi.json (extended-api.md §6): the OpenAPI 3.1 document of
// every route, a file of the repository embedded in the binary. The
// integration tests check every answer they get against it
// (internal/openapicheck), so it cannot drift from the handlers.

import (
	_ "embed"
	"net/http"
	"strconv"
)

// OpenAPI is the document, as served.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(OpenAPI)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(OpenAPI)
	}
}
