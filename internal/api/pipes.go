package api

// Stdin pipes (spec/extended-api.md §8): the run request's stdin, the
// input body's base64 and eof, and the answer of a job that does not read.

import (
	"errors"
	"net/http"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
)

// runStdin checks a run request's stdin against its mode and answers the
// service's RunRequest.Stdin; false when it answered the error.
func runStdin(w http.ResponseWriter, stdin *string, mode string) (string, bool) {
	if stdin == nil {
		return "", true
	}
	switch *stdin {
	case "", jobs.StdinNull:
		return "", true
	case jobs.StdinPipe:
		if mode != "stdio" {
			validation(w, "stdin %q needs mode \"stdio\" (mode is %q): a pty job's input goes to its terminal through /input without it", *stdin, mode)
			return "", false
		}
		return jobs.StdinPipe, true
	}
	validation(w, "stdin %q is not one of \"null\", \"pipe\"", *stdin)
	return "", false
}

// inputBytes is the input of an /input body: text (UTF-8, sent as is) or
// base64 (any bytes), not both; none at all only with eof. false when it
// answered the error.
func inputBytes(w http.ResponseWriter, b *inputBody, text []byte, b64 *b64Sink) ([]byte, bool) {
	eof := b.EOF != nil && *b.EOF
	if b.base64 == bigString {
		if b.text == bigString {
			httperr.Write(w, http.StatusBadRequest, "invalid_request", "give text or base64, not both")
			return nil, false
		}
		d, err := b64.Bytes()
		if err != nil {
			validation(w, "base64: %v: give the bytes in standard base64 (RFC 4648, with padding)", err)
			return nil, false
		}
		return d, true
	}
	if b.text != bigString {
		if eof {
			return nil, true
		}
		// The original's answer, unchanged.
		httperr.Write(w, http.StatusBadRequest, "invalid_request", "text is required")
		return nil, false
	}
	return text, true
}

// backpressureBody is the error envelope of input_backpressure: the
// usual code and message, and taken, the bytes of the input the job's
// pipe took (the rest were not sent).
type backpressureBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Taken   int64  `json:"taken"`
	} `json:"error"`
}

// writeBackpressure answers err when it is a *jobs.BackpressureError.
func writeBackpressure(w http.ResponseWriter, err error) bool {
	var be *jobs.BackpressureError
	if !errors.As(err, &be) {
		return false
	}
	var b backpressureBody
	b.Error.Code, b.Error.Message, b.Error.Taken = "input_backpressure", be.Error(), be.Taken
	httperr.WriteJSON(w, http.StatusConflict, b)
	return true
}
