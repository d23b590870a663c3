package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"

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
