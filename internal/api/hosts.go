package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/shellctl/shellctl/internal/httperr"
)

// HostCheck answers only requests meant for this server, against DNS
// rebinding (as the MCP specification asks of Streamable HTTP servers): a
// page at evil.example whose name is made to resolve to 127.0.0.1 reaches
// the server from a browser on the machine — a headless browser a job
// runs, for one — and its requests carry Host: evil.example and
// Origin: http://evil.example.
//
//   - Host must be an IP address (a rebinding page can only ever put its own
//     name there: an address in Host means the browser was sent to that
//     address itself), "localhost" (or a name under .localhost), or a name
//     in AllowedHosts; with or without a port. A request without Host
//     (HTTP/1.0) is not a browser's.
//   - Origin, which only browsers send, must be in AllowedOrigins; a
//     request without it is not a browser's and passes.
type HostCheck struct {
	// AllowedHosts are extra names (no port: any port matches), lower
	// case; one starting with "." matches every name ending with it
	// (".svc.cluster.local": the cluster's service names).
	AllowedHosts []string
	// AllowedOrigins are exact origins (scheme://host[:port]), lower case.
	AllowedOrigins []string
}

// Wrap refuses what the check refuses, with 403 and the error envelope.
func (hc HostCheck) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hc.hostAllowed(r.Host) {
			httperr.Write(w, http.StatusForbidden, "forbidden_host",
				"Host "+quoteHeader(r.Host)+" does not name this server: use its address, localhost, or add the name to serve --allowed-hosts")
			return
		}
		if o, ok := r.Header["Origin"]; ok && !hc.originAllowed(o) {
			httperr.Write(w, http.StatusForbidden, "forbidden_origin",
				"Origin "+quoteHeader(strings.Join(o, ", "))+" is not allowed (a browser page may not use this server): add it to serve --allowed-origins if it must")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (hc HostCheck) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	for _, a := range hc.AllowedHosts {
		if a == "*" || a == name || (strings.HasPrefix(a, ".") && strings.HasSuffix(name, a)) {
			return true
		}
	}
	return false
}

func (hc HostCheck) originAllowed(values []string) bool {
	if len(values) != 1 {
		return false
	}
	o := strings.ToLower(strings.TrimSuffix(values[0], "/"))
	for _, a := range hc.AllowedOrigins {
		if a == "*" || a == o {
			return true
		}
	}
	return false
}

// quoteHeader quotes a header value for a message, bounded: it is the
// client's text.
func quoteHeader(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, s) + `"`
}

// NormalizeHosts lower-cases a --allowed-hosts list and drops ports and
// brackets, so entries compare with a request's Host.
func NormalizeHosts(in []string) []string {
	var out []string
	for _, h := range in {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if n, _, err := net.SplitHostPort(h); err == nil {
			h = n
		}
		out = append(out, strings.ToLower(strings.Trim(strings.TrimSuffix(h, "."), "[]")))
	}
	return out
}

// NormalizeOrigins lower-cases a --allowed-origins list without a
// trailing slash.
func NormalizeOrigins(in []string) []string {
	var out []string
	for _, o := range in {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, strings.ToLower(strings.TrimSuffix(o, "/")))
		}
	}
	return out
}
