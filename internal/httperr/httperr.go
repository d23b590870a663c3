// Package httperr writes the JSON bodies of the /v1 API: the error envelope
// {"error":{"code","message"}} and plain JSON answers. Every package that
// answers HTTP (api, snapshot) goes through it so the envelope has one shape.
package httperr

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

type envelope struct {
	Error body `json:"error"`
}

type body struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Write answers status with the error envelope.
func Write(w http.ResponseWriter, status int, code, message string) {
	WriteJSON(w, status, envelope{Error: body{Code: code, Message: message}})
}

// WriteJSON answers status with v encoded as JSON. HTML escaping is off:
// answers carry terminal text, and escaping '<' '>' '&' only makes it bigger.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal_error","message":"encode response"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
