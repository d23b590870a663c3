// Package egress is the credential proxy of shellctl serve (spec
// egress.md): a CA and per-host leaf certificates, the two tiers of
// credentials (system, per session), the HTTP(S) proxy that puts a value
// into a request only inside TLS it verified and only toward the domains
// the credential is bound to, and the variables that point a job at it.
// It knows nothing of jobs but their session id and job id.
package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"golang.org/x/net/idna"
)

// Error kinds of PUT /v1/prepare; the api layer turns them into answers.
var (
	// ErrInvalidRequest: 400 invalid_request (no credentials, not JSON).
	ErrInvalidRequest = errors.New("invalid_request")
	// ErrValidation: 422 validation_error (a field's value is wrong).
	ErrValidation = errors.New("validation_error")
	// ErrAmbiguous: 422 ambiguous_binding (two credentials would set one
	// header on overlapping domains).
	ErrAmbiguous = errors.New("ambiguous_binding")
	// ErrNotFound: 404 not_found (DELETE of a session with nothing).
	ErrNotFound = errors.New("not_found")
)

// Bounds of a credential (egress.md). Each is what a header may sensibly
// carry; a larger value is a mistake, not a credential.
const (
	maxValueBytes = 16 << 10
	maxSessionID  = 128
	maxNamePart   = 64
	// maxCredentials bounds one tier: every intercepted request scans
	// the tier, so its size is a cost on every request.
	maxCredentials = 256
	// maxDomains bounds one credential's domain list for the same reason.
	maxDomains = 64
)

// The patterns are compiled on first use, not at start: their bounded
// repetitions ({1,128}) make large programs, and compiling them took 11 ms
// and 4 400 allocations at every start of every shellctl process (the CLI's
// too), most of which never handle a credential.
var (
	sessionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`) })
	namePart  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`) })
	// placeholderRE finds placeholders in headers and queries. Provider
	// and name use namePart's alphabet.
	placeholderRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`__secret:([a-zA-Z0-9_.-]{1,64})/([a-zA-Z0-9_.-]{1,64})__`)
	})
)

// ValidSessionID reports whether id is a session id (egress.md).
func ValidSessionID(id string) bool { return sessionRE().MatchString(id) }

// Credential is one registered credential, validated.
type Credential struct {
	Provider string
	Name     string
	value    string // never logged, never marshalled
	Header   string // canonical header name
	expr     *template.Template
	Domains  []string // lower case, punycode; "*.suffix" or exact
	EnvNames []string // extra job variables holding the placeholder
}

// Ref names a credential without its value (record, info, logs).
type Ref struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

// Key is provider/name.
func (c *Credential) Key() string { return c.Provider + "/" + c.Name }

// Placeholder is what a job holds instead of the value.
func (c *Credential) Placeholder() string { return Placeholder(c.Provider, c.Name) }

// Placeholder is the text that stands for provider/name's value.
func Placeholder(provider, name string) string { return "__secret:" + provider + "/" + name + "__" }

// EnvName is the job variable SECRET_<PROVIDER>_<NAME> of a credential.
func EnvName(provider, name string) string {
	b := []byte("SECRET_" + provider + "_" + name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// Matches reports whether host (any case, a port ignored) is one of the
// credential's domains.
func (c *Credential) Matches(host string) bool {
	h := normHost(host)
	for _, d := range c.Domains {
		if domainMatch(d, h) {
			return true
		}
	}
	return false
}

// headerValue is the header's value from the template.
func (c *Credential) headerValue() (string, error) {
	var b strings.Builder
	if err := c.expr.Execute(&b, struct{ Value string }{c.value}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// normHost lower-cases host, drops a port and brackets, and turns a
// Unicode name into punycode so it compares with the domains.
func normHost(host string) string {
	h := host
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return strings.ToLower(h[1:i])
		}
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.Count(h, ":") == 1 {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if a, err := idna.Lookup.ToASCII(h); err == nil {
		h = a
	}
	return h
}

// domainMatch: "*.s" matches every subdomain of s (not s itself); any
// other pattern matches itself only.
func domainMatch(pattern, host string) bool {
	if suf, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suf)
	}
	return pattern == host
}

// domainsOverlap reports whether some host matches both patterns.
func domainsOverlap(a, b string) bool {
	as, aw := strings.CutPrefix(a, "*.")
	bs, bw := strings.CutPrefix(b, "*.")
	switch {
	case !aw && !bw:
		return a == b
	case aw && !bw:
		return domainMatch(a, b)
	case !aw && bw:
		return domainMatch(b, a)
	}
	return as == bs || strings.HasSuffix(as, "."+bs) || strings.HasSuffix(bs, "."+as)
}

// wireCredential is one credential as Dify's pull request sends it. Both
// of its shapes are taken: inject.http_header (newest) and inject.config.
type wireCredential struct {
	Provider *string         `json:"provider"`
	Name     *string         `json:"name"`
	Value    *string         `json:"value"`
	EnvName  json.RawMessage `json:"env_name"`
	EnvNames json.RawMessage `json:"env_names"`
	Inject   *struct {
		Type       *string     `json:"type"`
		Config     *wireHeader `json:"config"`
		HTTPHeader *wireHeader `json:"http_header"`
	} `json:"inject"`
}

type wireHeader struct {
	Name    *string  `json:"name"`
	Expr    *string  `json:"expr"`
	Domains []string `json:"domains"`
}

type wirePrepare struct {
	SessionID   json.RawMessage   `json:"session_id"`
	SandboxID   json.RawMessage   `json:"sandbox_id"`
	Credentials []json.RawMessage `json:"credentials"`
}

func fail(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// ParsePrepare decodes and validates a PUT /v1/prepare body. Unknown
// fields are ignored (Dify's backend may send more than we use).
func ParsePrepare(body []byte) (session string, creds []*Credential, err error) {
	var w wirePrepare
	if err := json.Unmarshal(body, &w); err != nil {
		return "", nil, fail(ErrInvalidRequest, "body is not a JSON object with session_id and credentials: %v", err)
	}
	raw := w.SessionID
	field := "session_id"
	if len(raw) == 0 || string(raw) == "null" {
		raw, field = w.SandboxID, "sandbox_id"
	}
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, fail(ErrValidation, "session_id (or sandbox_id) is required: give the sandbox's id, %s", sessionRE())
	}
	if err := json.Unmarshal(raw, &session); err != nil || !ValidSessionID(session) {
		return "", nil, fail(ErrValidation, "%s %s must be a string matching %s", field, raw, sessionRE())
	}
	if len(w.Credentials) == 0 {
		return "", nil, fail(ErrInvalidRequest, "credentials must be a non-empty list of credential objects")
	}
	creds, err = parseCredentials(w.Credentials, "credentials")
	return session, creds, err
}

// ParseCredentialsFile decodes the system tier (--egress-credentials-file):
// a JSON array of credential objects.
func ParseCredentialsFile(body []byte) ([]*Credential, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fail(ErrInvalidRequest, "not a JSON array of credential objects: %v", err)
	}
	if len(list) == 0 {
		return nil, fail(ErrInvalidRequest, "the array holds no credential")
	}
	return parseCredentials(list, "credentials")
}

func parseCredentials(list []json.RawMessage, at string) ([]*Credential, error) {
	if len(list) > maxCredentials {
		return nil, fail(ErrValidation, "%s holds %d credentials, at most %d are taken", at, len(list), maxCredentials)
	}
	out := make([]*Credential, 0, len(list))
	seen := map[string]int{}
	for i, raw := range list {
		c, err := parseCredential(raw, fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		if j, ok := seen[c.Key()]; ok {
			return nil, fail(ErrValidation, "%s[%d] and %s[%d] are both %s: give each provider/name once", at, j, at, i, c.Key())
		}
		seen[c.Key()] = i
		out = append(out, c)
	}
	if err := checkAmbiguous(out, at); err != nil {
		return nil, err
	}
	return out, nil
}

func parseCredential(raw json.RawMessage, at string) (*Credential, error) {
	var w wireCredential
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&w); err != nil {
		return nil, fail(ErrValidation, "%s is not a credential object: %v", at, err)
	}
	c := &Credential{}
	switch {
	case w.Provider == nil || !namePart().MatchString(*w.Provider):
		return nil, fail(ErrValidation, "%s.provider must be a string matching %s", at, namePart())
	case w.Name == nil || !namePart().MatchString(*w.Name):
		return nil, fail(ErrValidation, "%s.name must be a string matching %s", at, namePart())
	case w.Value == nil || *w.Value == "":
		return nil, fail(ErrValidation, "%s.value must be a non-empty string", at)
	case len(*w.Value) > maxValueBytes:
		return nil, fail(ErrValidation, "%s.value is %d bytes, at most %d are taken", at, len(*w.Value), maxValueBytes)
	case strings.ContainsAny(*w.Value, "\r\n\x00"):
		// A value goes into a header: a line break would split it.
		return nil, fail(ErrValidation, "%s.value holds a line break or NUL, which no header can carry", at)
	case w.Inject == nil:
		return nil, fail(ErrValidation, "%s.inject is required: {\"type\":\"http-header\",\"config\":{\"name\",\"expr\",\"domains\"}}", at)
	}
	c.Provider, c.Name, c.value = *w.Provider, *w.Name, strings.Clone(*w.Value)
	if w.Inject.Type == nil || *w.Inject.Type != "http-header" {
		t := "missing"
		if w.Inject.Type != nil {
			t = fmt.Sprintf("%q", *w.Inject.Type)
		}
		return nil, fail(ErrValidation, "%s.inject.type is %s: the only type is \"http-header\"", at, t)
	}
	h := w.Inject.HTTPHeader
	hat := at + ".inject.http_header"
	if h == nil {
		h, hat = w.Inject.Config, at+".inject.config"
	}
	if h == nil {
		return nil, fail(ErrValidation, "%s.inject.config (or inject.http_header) is required", at)
	}
	if h.Name == nil || !validHeaderName(*h.Name) {
		return nil, fail(ErrValidation, "%s.name must be a header name (letters, digits and !#$%%&'*+-.^_`|~)", hat)
	}
	switch http.CanonicalHeaderKey(*h.Name) {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Proxy-Authorization", "Te", "Upgrade", "Trailer":
		return nil, fail(ErrValidation, "%s.name %q is a header the proxy owns; name the header the service reads", hat, *h.Name)
	}
	c.Header = http.CanonicalHeaderKey(*h.Name)
	expr := "{{.Value}}"
	if h.Expr != nil && *h.Expr != "" {
		expr = *h.Expr
	}
	t, err := parseExpr(expr)
	if err != nil {
		return nil, fail(ErrValidation, "%s.expr %q: %v", hat, expr, err)
	}
	c.expr = t
	if v, err := c.headerValue(); err != nil || strings.ContainsAny(v, "\r\n\x00") {
		return nil, fail(ErrValidation, "%s.expr %q does not make a header value", hat, expr)
	}
	if len(h.Domains) == 0 {
		return nil, fail(ErrValidation, "%s.domains must be a non-empty list of hosts or *.suffix patterns", hat)
	}
	if len(h.Domains) > maxDomains {
		return nil, fail(ErrValidation, "%s.domains holds %d entries, at most %d are taken", hat, len(h.Domains), maxDomains)
	}
	for i, d := range h.Domains {
		n, err := NormDomain(d)
		if err != nil {
			return nil, fail(ErrValidation, "%s.domains[%d] %q: %v", hat, i, d, err)
		}
		c.Domains = append(c.Domains, n)
	}
	names, err := envNames(w.EnvName, w.EnvNames, at)
	if err != nil {
		return nil, err
	}
	c.EnvNames = names
	return c, nil
}

// envNames reads env_name (a string) and env_names (a list).
func envNames(one, many json.RawMessage, at string) ([]string, error) {
	var out []string
	if len(one) > 0 && string(one) != "null" {
		var s string
		if err := json.Unmarshal(one, &s); err != nil {
			return nil, fail(ErrValidation, "%s.env_name must be a string", at)
		}
		out = append(out, s)
	}
	if len(many) > 0 && string(many) != "null" {
		var l []string
		if err := json.Unmarshal(many, &l); err != nil {
			return nil, fail(ErrValidation, "%s.env_names must be a list of strings", at)
		}
		out = append(out, l...)
	}
	for _, n := range out {
		if !envNameRE().MatchString(n) {
			return nil, fail(ErrValidation, "%s.env_name %q must match %s", at, n, envNameRE())
		}
		if isProxyVar(n) {
			return nil, fail(ErrValidation, "%s.env_name %q is one of the proxy and CA variables the server sets", at, n)
		}
	}
	return out, nil
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })

// NormDomain checks and normalizes one domain pattern: an exact host or
// "*.suffix", lower case, punycode, no port, no trailing dot.
func NormDomain(d string) (string, error) {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	wild := false
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		s, wild = rest, true
	}
	if s == "" || strings.ContainsAny(s, "*/:@ ") {
		return "", errors.New("must be a host name or *.suffix (no scheme, port, path or other wildcard)")
	}
	a, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("not a host name: %v", err)
	}
	if wild {
		return "*." + a, nil
	}
	return a, nil
}

// parseExpr parses a header template that may use .Value and nothing
// else: no functions, no other fields, no control structures.
func parseExpr(expr string) (*template.Template, error) {
	t, err := template.New("expr").Option("missingkey=error").Parse(expr)
	if err != nil {
		return nil, err
	}
	if t.Tree == nil || t.Tree.Root == nil {
		return nil, errors.New("empty template")
	}
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
		case *parse.ActionNode:
			p := n.Pipe
			if len(p.Decl) != 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil, errors.New("only {{.Value}} may be used")
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 || f.Ident[0] != "Value" {
				return nil, errors.New("only {{.Value}} may be used")
			}
		default:
			return nil, errors.New("only text and {{.Value}} may be used")
		}
	}
	return t, nil
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// checkAmbiguous refuses two credentials of one tier that set the same
// header on overlapping domains: the proxy would have to guess.
func checkAmbiguous(cs []*Credential, at string) error {
	for i, a := range cs {
		for _, b := range cs[i+1:] {
			if a.Header != b.Header {
				continue
			}
			for _, da := range a.Domains {
				for _, db := range b.Domains {
					if domainsOverlap(da, db) {
						return fail(ErrAmbiguous, "%s: %s and %s both set %s on %s / %s: bind them to domains that do not overlap, or use another header", at, a.Key(), b.Key(), a.Header, da, db)
					}
				}
			}
		}
	}
	return nil
}
