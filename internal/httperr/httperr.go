// Package httperr writes the JSON bodies of the /v1 API: the error envelope
// {"error":{"code","message"}} and plain JSON answers. Every package that
// answers HTTP (api, snapshot) goes through it so the envelope has one shape.
package httperr

import (
	"encoding/json"
	"net/http"
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

// WriteJSON answers status with v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal_error","message":"encode response"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b = append(b, '\n')
	_, _ = w.Write(b)
}
