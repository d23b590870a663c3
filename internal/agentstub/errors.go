package agentstub

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error codes the client reports for failures that did not come with a code
// from the backend. Backend codes (from the {"error":{"code","message"}}
// envelope) are passed through unchanged.
const (
	CodeMissingEnv       = "missing_env"       // a required environment variable is unset
	CodeInvalidEnv       = "invalid_env"       // an environment variable has a bad value
	CodeTimeout          = "timeout"           // no (complete) answer within the timeout
	CodeConnectionFailed = "connection_failed" // the request could not be sent or the reply was cut
	CodeBadResponse      = "bad_response"      // a 2xx reply that is not the JSON we expect
	CodeTransferFailed   = "transfer_failed"   // a signed-URL transfer failed
	CodeConfigReadOnly   = "config_read_only"  // backend code for snapshot / shared-draft configs
	// CodeAuthExpired is the Agent Stub's code for a token past its 300 s.
	CodeAuthExpired = "agent_stub_authorization_expired"
)

// AuthExpiredText is what the CLI says for CodeAuthExpired instead of the
// server's message: the token of this shell call cannot be renewed.
const AuthExpiredText = "Agent Stub authorization expired after 5 minutes; the authorization in this process " +
	"will not refresh automatically; start a new shell tool call and retry the command"

// StubText is err as the commands of agent-cli-backend.md report an Agent
// Stub failure: "HTTP <status>: <message>" for an HTTP answer (the expiry
// text for CodeAuthExpired), the message alone for anything else.
func StubText(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if e.Status == 0 {
		return e.Message
	}
	if e.Code == CodeAuthExpired {
		return fmt.Sprintf("HTTP %d: %s", e.Status, AuthExpiredText)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// rawBodyLimit bounds how much of a non-envelope body ends up in an error
// message: enough to recognise an HTML error page or a proxy message, short
// enough to stay one readable line.
const rawBodyLimit = 200

// Error is a failure with a machine-readable code and a one-line message.
// Status is the HTTP status when the failure is an HTTP answer, else 0.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// CodeOf returns the code of err if it is (or wraps) an *Error, else "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Shorten turns an arbitrary body into one short line: control characters
// (including newlines) become spaces, invalid UTF-8 is replaced, and the text
// is cut at rawBodyLimit bytes on a rune boundary with "..." appended.
func Shorten(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= rawBodyLimit {
		return s
	}
	cut := rawBodyLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
