package isolation

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// EnvInput is what BuildEnv needs to build a job's environment.
type EnvInput struct {
	// ServerEnv is the server's environment (os.Environ()).
	ServerEnv []string
	// InheritNone is --inherit-env=none: only InheritNoneNames are taken
	// from ServerEnv.
	InheritNone bool
	// Request is the request's env; every valid entry is honoured.
	Request map[string]string
	// Home is the job's HOME (see JobHome); empty means none is forced.
	Home string
	// Cwd is the job's working directory; TMPDIR, TMP and TEMP are set to it.
	Cwd string
	// PTY forces TERM=xterm-256color.
	PTY bool
}

// InheritNoneNames are the only server variables a job sees with
// --inherit-env=none.
var InheritNoneNames = []string{"PATH", "LANG", "USER", "LOGNAME", "SHELL"}

// credentialMarkers make a server variable look like a credential when its
// name contains one of them (case-insensitive).
var credentialMarkers = []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "PASSPHRASE"}

// PTYTerm is the TERM forced in pty mode.
const PTYTerm = "xterm-256color"

// IsCredentialName reports whether a variable name looks like a credential.
func IsCredentialName(name string) bool {
	up := strings.ToUpper(name)
	for _, m := range credentialMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}

// inheritable reports whether a server variable may reach a job (without
// --inherit-env=none).
func inheritable(name string) bool {
	up := strings.ToUpper(name)
	switch {
	case strings.HasPrefix(up, "SHELLCTL_"):
		// The server's own settings, the auth token among them.
		return false
	case name == "TMUX":
		// Would make tools in the job talk to the server's tmux.
		return false
	case IsCredentialName(name):
		return false
	}
	return true
}

// ErrInvalidEnv is returned by ValidateEnv for a name or value execve cannot
// carry.
var ErrInvalidEnv = errors.New("invalid env entry")

// ValidateEnv checks a request's env: names must be non-empty and free of
// '=' and NUL, values free of NUL. The api layer rejects such requests;
// BuildEnv drops such entries defensively.
func ValidateEnv(env map[string]string) error {
	for k, v := range env {
		if err := validEnvEntry(k, v); err != nil {
			return err
		}
	}
	return nil
}

func validEnvEntry(k, v string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty name", ErrInvalidEnv)
	case strings.ContainsAny(k, "=\x00"):
		return fmt.Errorf("%w: name %q contains '=' or NUL", ErrInvalidEnv, k)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%w: value of %q contains NUL", ErrInvalidEnv, k)
	}
	return nil
}

// BuildEnv builds a job's environment in the spec's order, later steps
// winning:
//
//  1. the server's environment without SHELLCTL_* names, TMUX and
//     credential-like names — or, with InheritNone, only InheritNoneNames;
//  2. the request's env, always honoured (even credential-like names);
//  3. forced: TMPDIR, TMP, TEMP = Cwd; HOME = Home; TERM=xterm-256color
//     in pty mode.
//
// The result is sorted by name and has one entry per name.
func BuildEnv(in EnvInput) []string {
	m := make(map[string]string, len(in.ServerEnv)+len(in.Request)+6)
	var allow map[string]bool
	if in.InheritNone {
		allow = make(map[string]bool, len(InheritNoneNames))
		for _, n := range InheritNoneNames {
			allow[n] = true
		}
	}
	for _, kv := range in.ServerEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || validEnvEntry(k, v) != nil {
			continue
		}
		if in.InheritNone {
			if !allow[k] {
				continue
			}
		} else if !inheritable(k) {
			continue
		}
		m[k] = v // a later duplicate wins, as in os/exec
	}
	for k, v := range in.Request {
		if validEnvEntry(k, v) != nil {
			continue
		}
		m[k] = v
	}
	if in.Cwd != "" {
		m["TMPDIR"], m["TMP"], m["TEMP"] = in.Cwd, in.Cwd, in.Cwd
	}
	if in.Home != "" {
		m["HOME"] = in.Home
	}
	if in.PTY {
		m["TERM"] = PTYTerm
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, k := range names {
		out[i] = k + "=" + m[k]
	}
	return out
}

// JobHome returns the job's HOME: the request's HOME when it is set and
// non-empty, else the server's.
func JobHome(request map[string]string, serverHome string) string {
	if h := request["HOME"]; h != "" {
		return h
	}
	return serverHome
}
