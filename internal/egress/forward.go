package egress

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// hopHeaders are the hop-by-hop headers (RFC 9110 §7.6.1) and the proxy's
// own: never forwarded either way.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func dropHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, n := range strings.Split(f, ",") {
			if n = strings.TrimSpace(n); n != "" {
				h.Del(n)
			}
		}
	}
	for _, n := range hopHeaders {
		h.Del(n)
	}
}

// hasPlaceholder reports whether a header or the URL holds a placeholder
// (also percent-encoded).
func hasPlaceholder(r *http.Request) bool {
	for _, vs := range r.Header {
		for _, v := range vs {
			if placeholderRE().MatchString(v) {
				return true
			}
		}
	}
	u := r.URL.String()
	if placeholderRE().MatchString(u) {
		return true
	}
	if d, err := url.PathUnescape(u); err == nil && placeholderRE().MatchString(d) {
		return true
	}
	if d, err := url.QueryUnescape(r.URL.RawQuery); err == nil && placeholderRE().MatchString(d) {
		return true
	}
	return false
}

// plain forwards a plain-HTTP request. No value ever travels in clear: a
// request that carries a placeholder is refused.
func (p *Proxy) plain(w http.ResponseWriter, r *http.Request, c client) {
	host := r.URL.Hostname()
	if !p.allowed(host) {
		p.stats.Refused.Add(1)
		p.audit("refused", c, host, "reason", "not in --egress-allow-domains")
		p.refuse(w, http.StatusForbidden, "domain_not_allowed", "host "+host+" is not in the server's --egress-allow-domains", map[string]string{"domain": host})
		return
	}
	if hasPlaceholder(r) {
		p.stats.Refused.Add(1)
		p.stats.SubstitutionRefuse.Add(1)
		p.audit("refused", c, host, "reason", "placeholder in plain HTTP")
		p.refuse(w, http.StatusForbidden, "plaintext_not_allowed", "a credential placeholder is never replaced in plain HTTP: use https://", map[string]string{"domain": host})
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	dropHop(out.Header)
	p.stats.Forwarded.Add(1)
	p.audit("forwarded", c, host)
	p.roundTrip(w, out, c, host, nil)
}

// intercepted serves one request inside TLS the proxy terminated for
// target (host:port), name being its normalized host.
func (p *Proxy) intercepted(w http.ResponseWriter, r *http.Request, c client, target, name string) {
	creds := p.effective(c.session, c.has)
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme = "https"
	out.URL.Host = target
	// The upstream is the CONNECT's target whatever Host the job sends:
	// a value bound to a host goes to that host only.
	out.Host = target
	dropHop(out.Header)
	var pairs []pair
	for _, cr := range creds {
		pairs = append(pairs, pair{value: []byte(cr.value), placeholder: []byte(cr.Placeholder())})
	}
	if r.Method != http.MethodTrace && r.Method != http.MethodOptions {
		if refused := p.substitute(w, out, c, name, creds); refused {
			return
		}
		// Bodies that come back are scrubbed, so they must come plain.
		out.Header.Set("Accept-Encoding", "identity")
	}
	p.stats.Intercepted.Add(1)
	p.roundTrip(w, out, c, name, pairs)
}

// substitute sets each matching credential's header and replaces the
// placeholders of headers and query; a placeholder of a credential not
// bound to this host is refused (answered 403, reported true).
func (p *Proxy) substitute(w http.ResponseWriter, out *http.Request, c client, host string, creds []*Credential) (refused bool) {
	byKey := make(map[string]*Credential, len(creds))
	for _, cr := range creds {
		byKey[cr.Key()] = cr
	}
	var bad *Credential
	replace := func(s string, enc func(string) string) string {
		return placeholderRE().ReplaceAllStringFunc(s, func(m string) string {
			sub := placeholderRE().FindStringSubmatch(m)
			cr := byKey[sub[1]+"/"+sub[2]]
			if cr == nil {
				return m // no such credential: its own harmless text
			}
			if !cr.Matches(host) {
				if bad == nil {
					bad = cr
				}
				return m
			}
			p.stats.Substitutions.Add(1)
			p.audit("substituted", c, host, "credential", cr.Key())
			return enc(cr.value)
		})
	}
	for k, vs := range out.Header {
		for i, v := range vs {
			if strings.Contains(v, "__secret:") {
				vs[i] = replace(v, func(s string) string { return s })
			}
		}
		out.Header[k] = vs
	}
	if q := out.URL.RawQuery; q != "" {
		// Placeholders may arrive percent-encoded (':' and '/' by most
		// URL builders): decode those forms first.
		q = strings.NewReplacer("%3A", ":", "%3a", ":", "%2F", "/", "%2f", "/").Replace(q)
		if strings.Contains(q, "__secret:") {
			out.URL.RawQuery = replace(q, url.QueryEscape)
		}
	}
	if bad != nil {
		p.stats.Refused.Add(1)
		p.stats.SubstitutionRefuse.Add(1)
		p.audit("refused", c, host, "credential", bad.Key(), "reason", "credential not bound to this host")
		p.refuse(w, http.StatusForbidden, "domain_not_allowed",
			"credential "+bad.Key()+" is not bound to "+host+": it is only sent to "+strings.Join(bad.Domains, ", "),
			map[string]string{"provider": bad.Provider, "name": bad.Name, "domain": host})
		return true
	}
	for _, cr := range creds {
		if !cr.Matches(host) {
			continue
		}
		v, err := cr.headerValue()
		if err != nil {
			continue // checked when registered; cannot fail on a string
		}
		out.Header.Set(cr.Header, v)
		p.stats.Substitutions.Add(1)
		p.audit("injected", c, host, "credential", cr.Key(), "header", cr.Header)
	}
	return false
}

// roundTrip sends out upstream and copies the answer back, every value
// of pairs replaced by its placeholder (headers, and bodies that are not
// compressed). The transport never follows redirects: a redirect is the
// client's next request, matched on its own host.
func (p *Proxy) roundTrip(w http.ResponseWriter, out *http.Request, c client, host string, pairs []pair) {
	// cancel also ends a read of the upstream's body that a failed write
	// to the job left waiting.
	ctx, cancel := context.WithCancel(out.Context())
	defer cancel()
	out = out.WithContext(ctx)
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		if out.Context().Err() != nil {
			return // the job went away
		}
		if len(pairs) > 0 {
			// An error may quote the request (its URL): never a value.
			err = &scrubbedErr{msg: scrubString(err.Error(), pairs), err: err}
		}
		p.dialErr(w, c, out.URL.Host, err)
		return
	}
	defer resp.Body.Close()
	dropHop(resp.Header)
	h := w.Header()
	for k, vs := range resp.Header {
		for _, v := range vs {
			if len(pairs) > 0 {
				v = scrubString(v, pairs)
			}
			h.Add(k, v)
		}
	}
	var body io.Reader = resp.Body
	if len(pairs) > 0 {
		enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
		if enc == "" || enc == "identity" {
			body = newScrubReader(resp.Body, pairs)
			// A placeholder is not as long as its value: the length
			// is the transfer's business now (chunked).
			h.Del("Content-Length")
		}
	}
	// As httputil.ReverseProxy does: an answer of unknown length or an
	// event stream goes to the job as it comes; one of known length is
	// written as the buffers fill.
	stream := resp.ContentLength < 0 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	var flush func()
	if stream {
		flush = func() { _ = rc.Flush() }
	}
	if !stream && resp.ContentLength <= smallAnswer {
		// Too small to gain from reading ahead: one loop, no goroutine.
		buf := make([]byte, max(resp.ContentLength, 512))
		for {
			n, err := body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	rb := ringBufs.Get().(*[]byte)
	defer ringBufs.Put(rb)
	_ = copyAhead(w, body, *rb, flush, cancel)
}

// smallAnswer is the largest answer of known length copied without a
// read-ahead.
const smallAnswer = 64 << 10

// ringBufs are copyAhead's rings, kept between answers.
var ringBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// scrubbedErr is err with its message scrubbed of values; errors.Is and
// errors.As still see err.
type scrubbedErr struct {
	msg string
	err error
}

func (e *scrubbedErr) Error() string { return e.msg }
func (e *scrubbedErr) Unwrap() error { return e.err }
