package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/shellctl/shellctl/internal/agentstub"
)

// Codes for failures found locally, before or without the backend.
const (
	codeFileNotFound = "file_not_found" // an input file does not exist
	codeReadFailed   = "read_failed"    // an input could not be read
	codeWriteFailed  = "write_failed"   // an output could not be written
	codeInvalidUTF8  = "invalid_utf8"   // an input is not valid UTF-8
	codeInvalidName  = "invalid_name"   // a name that is not a single path element
	codeFailed       = "failed"         // anything without a better code
)

// failure is one reported failure: printed as
// "dify-agent: <what>: <code>: <message>" on stderr, exit status 1.
type failure struct {
	What, Code, Message string
}

func (f *failure) Error() string {
	return "dify-agent: " + f.What + ": " + f.Code + ": " + f.Message
}

// failures are several failures of one command, in input order.
type failures []*failure

func (fs failures) Error() string {
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.Error()
	}
	return strings.Join(lines, "\n")
}

// fail turns err into a failure of what, keeping the code of an
// *agentstub.Error and saying plainly what a few codes mean.
func fail(what string, err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	code, msg := codeFailed, err.Error()
	var ae *agentstub.Error
	switch {
	case errors.As(err, &ae):
		code, msg = ae.Code, ae.Message
		switch {
		case ae.Code == agentstub.CodeAuthExpired:
			msg = agentstub.AuthExpiredText
		case ae.Code == agentstub.CodeConfigReadOnly:
			msg = "the configuration is read-only: only your own build draft can be changed, not a snapshot or a shared draft"
		case ae.Status == 401:
			msg += " (check " + agentstub.EnvToken + ")"
		}
	case errors.Is(err, fs.ErrNotExist):
		code = codeFileNotFound
	}
	return &failure{What: what, Code: code, Message: oneLine(msg)}
}

// oneLine makes s one line of text: runs of white space become one
// space, and the control characters left (ESC, BEL, …), which may come
// from the backend's answers, are escaped (escapeUnsafe), so stderr
// carries no terminal sequence.
func oneLine(s string) string { return escapeUnsafe(strings.Join(strings.Fields(s), " ")) }

// usageError is a command line the CLI cannot run: exit status 2.
type usageError struct {
	path string // command path, e.g. "dify-agent config prompt push"
	msg  string
}

func (u *usageError) Error() string {
	prefix := "dify-agent: "
	if what := strings.TrimPrefix(u.path, rootName+" "); what != u.path {
		prefix += what + ": "
	}
	return prefix + "usage: " + oneLine(u.msg) + "; see '" + u.path + " --help'"
}

// plainError is a failure of the commands of agent-cli-backend.md, printed
// as "dify-agent: <message>" (the original's form), exit status 1.
type plainError struct{ msg string }

func (p *plainError) Error() string { return "dify-agent: " + oneLine(p.msg) }

func plainf(format string, args ...any) error { return &plainError{msg: fmt.Sprintf(format, args...)} }

// stubFail reports an Agent Stub failure of a step: "<step>: HTTP <n>: …".
func stubFail(step string, err error) error {
	return &plainError{msg: step + ": " + agentstub.StubText(err)}
}

// envFail reports a missing or malformed connection variable.
func envFail(err error) error {
	var ae *agentstub.Error
	if errors.As(err, &ae) {
		return &plainError{msg: ae.Message}
	}
	return &plainError{msg: err.Error()}
}
