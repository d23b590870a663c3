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
	// Placeholders are the egress proxy's credential placeholder
	// variables (egress.md), set after Request; Proxy its proxy and CA
	// variables, set after them so that neither a request nor a
	// credential's env_name can point the job at another proxy or CA.
	Placeholders map[string]string
	Proxy        map[string]string
}

// InheritNoneNames are the only server variables a job sees with
// --inherit-env=none.
var InheritNoneNames = []string{"PATH", "LANG", "USER", "LOGNAME", "SHELL"}

// credentialMarkers make a server variable look like a credential when its
// name contains one of them (case-insensitive).
var credentialMarkers = []string{
	"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE", "COOKIE",
}

// credentialParts make a server variable look like a credential when they
// are a whole '_'-separated part of its name (case-insensitive): MY_PASS,
// HTTP_AUTH, SENTRY_DSN, but not BYPASS_CACHE or GIT_AUTHOR_NAME.
var credentialParts = []string{"PASS", "AUTH", "DSN"}

// PTYTerm is the TERM forced in pty mode.
const PTYTerm = "xterm-256color"

// IsCredentialName reports whether a variable name looks like a credential:
// it contains one of credentialMarkers, or one of credentialParts is a whole
// '_'-separated part of it.
func IsCredentialName(name string) bool {
	up := strings.ToUpper(name)
	for _, m := range credentialMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	for part := range strings.SplitSeq(up, "_") {
		for _, p := range credentialParts {
			if part == p {
				return true
			}
		}
	}
	return false
}

// HasURLPassword reports whether a value carries a password in a URL,
// scheme://user:secret@host, anywhere in it (a list of URLs, a JSON blob).
// The user may be empty (redis://:secret@host); an empty secret
// (scheme://user:@host) is no password. host:port/path@x is not taken for
// user:secret: a secret made of digits up to a '/', '?' or '#' is a port.
func HasURLPassword(value string) bool {
	for rest := value; ; {
		i := strings.Index(rest, "://")
		if i < 0 {
			return false
		}
		scheme := rest[:i]
		after := rest[i+3:]
		rest = after
		if !endsWithScheme(scheme) {
			continue
		}
		// The authority's end is unknown while a raw secret may hold '/':
		// look up to the first blank for the '@' that ends a userinfo.
		if j := strings.IndexAny(after, " \t\r\n"); j >= 0 {
			after = after[:j]
		}
		at := strings.IndexByte(after, '@')
		if at < 0 {
			continue
		}
		user, secret, ok := strings.Cut(after[:at], ":")
		if !ok || secret == "" || strings.ContainsAny(user, "/?#[]") {
			continue
		}
		if isPortThenPath(secret) {
			continue
		}
		return true
	}
}

// endsWithScheme reports whether s ends with a URL scheme: a letter, then
// letters, digits, '+', '-' or '.'.
func endsWithScheme(s string) bool {
	n := 0
	for n < len(s) {
		c := s[len(s)-1-n]
		if isAlpha(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.' {
			n++
			continue
		}
		break
	}
	// The scheme's first character must be a letter; walk back to one.
	for n > 0 && !isAlpha(s[len(s)-n]) {
		n--
	}
	return n > 0
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isPortThenPath reports whether s is digits followed by '/', '?' or '#':
// what follows host: in host:port/path.
func isPortThenPath(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i < len(s) && strings.IndexByte("/?#", s[i]) >= 0
}

// IsCredential reports whether a server variable looks like a credential by
// its name (IsCredentialName) or its value (HasURLPassword). Such variables
// never reach a job from the server's environment, and the server scrubs
// their values from its own environment memory.
func IsCredential(name, value string) bool {
	return IsCredentialName(name) || HasURLPassword(value)
}

// inheritable reports whether a server variable may reach a job (without
// --inherit-env=none).
func inheritable(name, value string) bool {
	up := strings.ToUpper(name)
	switch {
	case strings.HasPrefix(up, "SHELLCTL_"):
		// The server's own settings, the auth token among them.
		return false
	case name == "TMUX":
		// Would make tools in the job talk to the server's tmux.
		return false
	case IsCredential(name, value):
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
//     credentials (IsCredential: by name, or a password in a URL value) —
//     or, with InheritNone, only InheritNoneNames;
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
		} else if !inheritable(k, v) {
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
	for _, layer := range []map[string]string{in.Placeholders, in.Proxy} {
		for k, v := range layer {
			if validEnvEntry(k, v) == nil {
				m[k] = v
			}
		}
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
