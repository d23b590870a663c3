package api

// GET /v1/openapi.json (extended-api.md §6): the OpenAPI 3.1 document of
// every route, a file of the repository embedded in the binary. The
// integration tests check every answer they get against it
// (internal/openapicheck), so it cannot drift from the handlers.

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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

// Schema is the document's component schema name as a JSON Schema that
// stands alone: every reference to another component is replaced by that
// component (the components refer to each other without cycles). MCP's
// shell_status advertises the record's this way, from the one document.
func Schema(name string) (json.RawMessage, error) {
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("decode the OpenAPI document: %w", err)
	}
	const prefix = "#/components/schemas/"
	var inline func(v any, depth int) (any, error)
	inline = func(v any, depth int) (any, error) {
		if depth > maxSchemaDepth {
			return nil, fmt.Errorf("schema %s: references nest deeper than %d (a cycle?)", name, maxSchemaDepth)
		}
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, prefix) {
				target, ok := doc.Components.Schemas[strings.TrimPrefix(ref, prefix)]
				if !ok {
					return nil, fmt.Errorf("schema %s: %s names no component", name, ref)
				}
				return inline(target, depth+1)
			}
			out := make(map[string]any, len(x))
			for k, e := range x {
				r, err := inline(e, depth+1)
				if err != nil {
					return nil, err
				}
				out[k] = r
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				r, err := inline(e, depth+1)
				if err != nil {
					return nil, err
				}
				out[i] = r
			}
			return out, nil
		}
		return v, nil
	}
	s, ok := doc.Components.Schemas[name]
	if !ok {
		return nil, fmt.Errorf("the OpenAPI document has no schema %q", name)
	}
	v, err := inline(s, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// maxSchemaDepth bounds the nesting Schema follows: far more than any
// schema of the document has, and a stop for a reference cycle.
const maxSchemaDepth = 64
