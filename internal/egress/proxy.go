package egress

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Policies (--egress).
const (
	PolicyOpen      = "open"
	PolicyProxyOnly = "proxy-only"
)

// DefaultCAOut is where the CA and the bundle go when --egress-ca-out is
// not given and it is writable.
const DefaultCAOut = "/run/shellctl/egress"

// Bounds of the proxy's own connections.
const (
	headerTimeout = 30 * time.Second
	idleTimeout   = 120 * time.Second
	// tunnelIdle: a tunnel with no byte either way for this long is
	// closed, so a job cannot hold proxy goroutines forever.
	tunnelIdle = 10 * time.Minute
	// maxConns bounds the proxy's connections from jobs (each holds a
	// descriptor, and a tunnel or an interception two): more wait in the
	// kernel's backlog, so jobs cannot take the server's descriptors.
	maxConns = 1024
)

// Config is the configuration of the proxy, every default filled in by
// the caller but CAOut.
type Config struct {
	Listen          string
	CADir           string   // --egress-ca-dir: a stable CA ("" = in memory)
	CAOut           string   // --egress-ca-out: CA + bundle, read by jobs
	StateDir        string   // CAOut's fallback is beside it
	UpstreamCA      string   // --egress-upstream-ca: more roots for upstreams
	HostsFile       string   // --egress-hosts
	AllowPrivate    bool     // --egress-allow-private
	Policy          string   // --egress: open or proxy-only
	AllowDomains    []string // --egress-allow-domains ("" = every host)
	AllowPorts      []uint16 // --egress-allow-port (proxy-only)
	NoProxy         []string // --egress-no-proxy
	CredentialsFile string   // --egress-credentials-file: the system tier
	// Forbidden lists the server's other listeners (API, metrics): the
	// proxy never connects to them.
	Forbidden func() []string
	Logger    *slog.Logger
}

// Proxy is a running egress proxy.
type Proxy struct {
	cfg     Config
	log     *slog.Logger
	ca      *authority
	ln      net.Listener
	srv     *http.Server
	secret  []byte
	dial    *dialer
	tr      *http.Transport
	allow   []string
	caOut   string
	started time.Time

	mu       sync.RWMutex
	system   []*Credential
	sessions map[string][]*Credential

	stats Stats
}

// Stats are the proxy's counters (metrics).
type Stats struct {
	Intercepted        atomic.Int64 // requests answered inside TLS the proxy terminated
	Tunnelled          atomic.Int64 // CONNECTs passed through untouched
	Forwarded          atomic.Int64 // plain-HTTP requests forwarded
	Refused            atomic.Int64 // requests and CONNECTs refused
	Substitutions      atomic.Int64 // values put into requests (headers set, placeholders replaced)
	SubstitutionRefuse atomic.Int64 // placeholders refused (misbound, plaintext)
}

// Start makes or loads the CA, writes the CA and the bundle where jobs
// read them, loads the system tier and listens.
func Start(cfg Config) (*Proxy, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Policy {
	case "":
		cfg.Policy = PolicyOpen
	case PolicyOpen, PolicyProxyOnly:
	default:
		return nil, fmt.Errorf("--egress %q is not one of open, proxy-only", cfg.Policy)
	}
	p := &Proxy{cfg: cfg, log: log, sessions: map[string][]*Credential{}, started: time.Now()}
	for _, d := range cfg.AllowDomains {
		n, err := NormDomain(d)
		if err != nil {
			return nil, fmt.Errorf("--egress-allow-domains %q: %v", d, err)
		}
		p.allow = append(p.allow, n)
	}
	p.secret = make([]byte, 32)
	if _, err := rand.Read(p.secret); err != nil {
		return nil, err
	}
	ca, err := loadOrMakeCA(cfg.CADir)
	if err != nil {
		return nil, err
	}
	p.ca = ca
	if cfg.CredentialsFile != "" {
		b, err := os.ReadFile(cfg.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("--egress-credentials-file: %w", err)
		}
		creds, err := ParseCredentialsFile(b)
		clear(b)
		if err != nil {
			return nil, fmt.Errorf("--egress-credentials-file %s: %w", cfg.CredentialsFile, err)
		}
		p.system = creds
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if cfg.UpstreamCA != "" {
		b, err := os.ReadFile(cfg.UpstreamCA)
		if err != nil {
			return nil, fmt.Errorf("--egress-upstream-ca: %w", err)
		}
		if !roots.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--egress-upstream-ca %s holds no PEM certificate", cfg.UpstreamCA)
		}
	}
	p.dial = &dialer{allowPrivate: cfg.AllowPrivate}
	if cfg.HostsFile != "" {
		if p.dial.hosts, err = parseHosts(cfg.HostsFile); err != nil {
			return nil, err
		}
	}
	p.tr = &http.Transport{
		DialContext:           p.dial.dial,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		DisableCompression:    true, // bodies pass as sent; scrubbing needs them plain
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Larger than the 4 KiB default: a download through an
		// interception is copied through these.
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
	}
	if err := p.writeCA(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--egress-proxy %s: %w", cfg.Listen, err)
	}
	p.ln = ln
	self := ln.Addr().String()
	p.dial.forbidden = func() []netip.AddrPort {
		addrs := []string{self}
		if cfg.Forbidden != nil {
			addrs = append(addrs, cfg.Forbidden()...)
		}
		return listenerAddrs(addrs)
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() { _ = p.srv.Serve(newLimitListener(ln, maxConns)) }()
	log.Info("egress proxy listening", "addr", self, "policy", cfg.Policy, "ca_out", p.caOut,
		"ca_sha256", ca.Fingerprint(), "system_credentials", len(p.system))
	return p, nil
}

// writeCA writes the CA and the bundle to --egress-ca-out, or the default
// (/run/shellctl/egress when it can be made, else beside the state dir).
func (p *Proxy) writeCA() error {
	dirs := []string{p.cfg.CAOut}
	if p.cfg.CAOut == "" {
		dirs = []string{DefaultCAOut}
		if p.cfg.StateDir != "" {
			dirs = append(dirs, filepath.Join(filepath.Dir(p.cfg.StateDir), filepath.Base(p.cfg.StateDir)+"-egress"))
		}
	}
	var errs []error
	for _, d := range dirs {
		roots, err := p.ca.writeOut(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.caOut = d
		if roots == "" {
			p.log.Warn("no system root bundle found: the jobs' bundle holds only the proxy's CA", "bundle", filepath.Join(d, BundleFile))
		}
		return nil
	}
	return fmt.Errorf("write the egress CA: %w", errors.Join(errs...))
}

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's TCP port.
func (p *Proxy) Port() uint16 {
	if a, ok := p.ln.Addr().(*net.TCPAddr); ok {
		return uint16(a.Port)
	}
	return 0
}

// CAOut is the directory jobs read the CA and the bundle from.
func (p *Proxy) CAOut() string { return p.caOut }

// Policy is open or proxy-only.
func (p *Proxy) Policy() string { return p.cfg.Policy }

// AllowPorts are the ports a proxy-only job may connect to besides the
// proxy's.
func (p *Proxy) AllowPorts() []uint16 { return p.cfg.AllowPorts }

// Fingerprint is the CA certificate's SHA-256.
func (p *Proxy) Fingerprint() string { return p.ca.Fingerprint() }

// Counters are the proxy's counters.
func (p *Proxy) Counters() *Stats { return &p.stats }

// Close stops the proxy (nil: nothing to stop).
func (p *Proxy) Close() error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	p.tr.CloseIdleConnections()
	return err
}

// Prepare replaces session's credentials (the session tier) with creds.
func (p *Proxy) Prepare(session string, creds []*Credential) int {
	p.mu.Lock()
	p.sessions[session] = creds
	p.mu.Unlock()
	refs := make([]string, len(creds))
	for i, c := range creds {
		refs[i] = c.Key()
	}
	p.log.Info("egress credentials registered", "session", session, "credentials", strings.Join(refs, ","))
	return len(creds)
}

// Remove drops session's credentials.
func (p *Proxy) Remove(session string) (int, error) {
	p.mu.Lock()
	n := len(p.sessions[session])
	_, ok := p.sessions[session]
	delete(p.sessions, session)
	p.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("%w: session %q has no credentials registered (PUT /v1/prepare registers them)", ErrNotFound, session)
	}
	p.log.Info("egress credentials removed", "session", session, "count", n)
	return n, nil
}

// effective is the credentials a job of session may use: the system tier
// with the session tier over it (same provider/name: the session's).
func (p *Proxy) effective(session string, has bool) []*Credential {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var sess []*Credential
	if has {
		sess = p.sessions[session]
	}
	if len(sess) == 0 {
		return p.system
	}
	out := make([]*Credential, 0, len(p.system)+len(sess))
	out = append(out, sess...)
	for _, c := range p.system {
		shadowed := false
		for _, s := range sess {
			if s.Key() == c.Key() {
				shadowed = true
				break
			}
		}
		if !shadowed {
			out = append(out, c)
		}
	}
	return out
}

// Proxy and CA variables a job gets; neither a request's env nor a
// credential's env_name may set them.
var proxyVars = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
	"ALL_PROXY", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
	"NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY",
}

func isProxyVar(n string) bool {
	for _, v := range proxyVars {
		if strings.EqualFold(v, n) {
			return true
		}
	}
	return false
}

// JobEnv is what a job of session (has: the job has a session) gets: the
// placeholder variables (system tier, then the session's over it), the
// proxy and CA variables (set last, after the request's env), and which
// credentials it may use.
func (p *Proxy) JobEnv(session string, has bool, jobID string) (placeholders, forced map[string]string, refs []Ref) {
	placeholders = map[string]string{}
	p.mu.RLock()
	var sess []*Credential
	if has {
		sess = p.sessions[session]
	}
	for _, tier := range [][]*Credential{p.system, sess} {
		for _, c := range tier {
			placeholders[EnvName(c.Provider, c.Name)] = c.Placeholder()
			for _, n := range c.EnvNames {
				placeholders[n] = c.Placeholder()
			}
		}
	}
	p.mu.RUnlock()
	for _, c := range p.effective(session, has) {
		refs = append(refs, Ref{Provider: c.Provider, Name: c.Name})
	}
	user := "_"
	if has {
		user = session
	}
	u := "http://" + user + ":" + p.jobKey(session, has, jobID) + "@" + p.Addr()
	bundle := filepath.Join(p.caOut, BundleFile)
	noProxy := strings.Join(append([]string{"localhost", "127.0.0.1", "::1"}, p.cfg.NoProxy...), ",")
	forced = map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
		"SSL_CERT_FILE": bundle, "REQUESTS_CA_BUNDLE": bundle, "CURL_CA_BUNDLE": bundle,
		"GIT_SSL_CAINFO": bundle, "PIP_CERT": bundle,
		"NODE_EXTRA_CA_CERTS": filepath.Join(p.caOut, CAFile), "NODE_USE_ENV_PROXY": "1",
	}
	return placeholders, forced, refs
}

// jobKey is the proxy password of a job: its id and a MAC over it and its
// session, so a job cannot make the key of another session (or of no
// session when it has one) by editing its proxy variable.
func (p *Proxy) jobKey(session string, has bool, jobID string) string {
	return jobID + "." + p.mac(session, has, jobID)
}

func (p *Proxy) mac(session string, has bool, jobID string) string {
	m := hmac.New(sha256.New, p.secret)
	marker := "-"
	if has {
		marker = "s:" + session
	}
	m.Write([]byte(jobID + "\x00" + marker))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// client is who sent a request through the proxy.
type client struct {
	session string
	has     bool
	job     string
}

func (c client) sessionLabel() string {
	if !c.has {
		return "-"
	}
	return c.session
}

// authenticate reads Proxy-Authorization (Basic session:key).
func (p *Proxy) authenticate(r *http.Request) (client, bool) {
	h := r.Header.Get("Proxy-Authorization")
	scheme, enc, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return client{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return client{}, false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return client{}, false
	}
	job, mac, ok := strings.Cut(pass, ".")
	if !ok || job == "" {
		return client{}, false
	}
	try := func(session string, has bool) bool {
		return hmac.Equal([]byte(mac), []byte(p.mac(session, has, job)))
	}
	switch {
	case ValidSessionID(user) && try(user, true):
		return client{session: user, has: true, job: job}, true
	case user == "_" && try("", false):
		return client{job: job}, true
	}
	return client{}, false
}

// allowed reports whether --egress-allow-domains lets host through.
func (p *Proxy) allowed(host string) bool {
	if len(p.allow) == 0 {
		return true
	}
	h := normHost(host)
	for _, d := range p.allow {
		if domainMatch(d, h) {
			return true
		}
	}
	return false
}

// ServeHTTP is the proxy's front door: CONNECT, or an absolute-URI request
// (plain HTTP).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := p.authenticate(r)
	if !ok {
		p.stats.Refused.Add(1)
		w.Header().Set("Proxy-Authenticate", `Basic realm="shellctl egress"`)
		p.refuse(w, http.StatusProxyAuthRequired, "proxy_auth_required", "the proxy takes the key in the job's HTTP(S)_PROXY variable", nil)
		p.audit("refused", c, r.Host, "reason", "no or wrong proxy key")
		return
	}
	r.Header.Del("Proxy-Authorization")
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r, c)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.plain(w, r, c)
	default:
		p.stats.Refused.Add(1)
		p.refuse(w, http.StatusBadRequest, "bad_proxy_request", "send CONNECT host:port or an absolute http:// URL", nil)
	}
}

// refuse answers a JSON error that never carries a value.
func (p *Proxy) refuse(w http.ResponseWriter, status int, code, msg string, extra map[string]string) {
	var b strings.Builder
	b.WriteString(`{"error":`)
	b.WriteString(jsonString(code))
	for _, k := range []string{"provider", "name", "domain"} {
		if v, ok := extra[k]; ok {
			b.WriteString(`,` + jsonString(k) + `:` + jsonString(v))
		}
	}
	b.WriteString(`,"message":` + jsonString(msg) + "}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

// audit logs one decision: refusals as warnings (seen without -v), the
// rest at info. Never a value: credentials by provider/name only.
func (p *Proxy) audit(decision string, c client, host string, attrs ...any) {
	level := slog.LevelInfo
	if decision == "refused" {
		level = slog.LevelWarn
	}
	p.log.Log(context.Background(), level, "egress", append([]any{"decision", decision, "session", c.sessionLabel(), "job", c.job, "host", host}, attrs...)...)
}

// dialErr answers a failed connection to an upstream.
func (p *Proxy) dialErr(w http.ResponseWriter, c client, host string, err error) {
	p.stats.Refused.Add(1)
	var uerr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, errAddressNotAllowed):
		p.audit("refused", c, host, "reason", err.Error())
		p.refuse(w, http.StatusForbidden, "address_not_allowed", err.Error(), map[string]string{"domain": hostOnly(host)})
	case errors.As(err, &uerr) || strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"):
		p.audit("refused", c, host, "reason", "upstream TLS")
		p.refuse(w, http.StatusBadGateway, "upstream_tls", "the upstream's certificate was not verified: "+err.Error()+" (a private CA is given by the server's --egress-upstream-ca)", map[string]string{"domain": hostOnly(host)})
	default:
		p.audit("refused", c, host, "reason", "upstream unreachable")
		p.refuse(w, http.StatusBadGateway, "upstream_unreachable", err.Error(), map[string]string{"domain": hostOnly(host)})
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// connect serves CONNECT: a plain tunnel to a host no credential of the
// job matches; else TLS terminated here and each request handled inside.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, c client) {
	target := r.Host
	host, port, err := net.SplitHostPort(target)
	if err != nil || port == "" {
		p.stats.Refused.Add(1)
		p.refuse(w, http.StatusBadRequest, "bad_proxy_request", "CONNECT needs host:port, got "+target, nil)
		return
	}
	if !p.allowed(host) {
		p.stats.Refused.Add(1)
		p.audit("refused", c, host, "reason", "not in --egress-allow-domains")
		p.refuse(w, http.StatusForbidden, "domain_not_allowed", "host "+host+" is not in the server's --egress-allow-domains", map[string]string{"domain": host})
		return
	}
	creds := p.effective(c.session, c.has)
	match := false
	for _, cr := range creds {
		if cr.Matches(host) {
			match = true
			break
		}
	}
	if !match {
		p.tunnel(w, r, c, target)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		p.refuse(w, http.StatusInternalServerError, "internal_error", "connection cannot be taken over", nil)
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	var inner net.Conn = conn
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		inner = &prefixConn{Conn: conn, prefix: append([]byte(nil), b...)}
	}
	name := normHost(host)
	tc := tls.Server(inner, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.ca.leaf(name)
		},
	})
	ln := newOneConnListener(tc)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.intercepted(w, r, c, target, name)
		}),
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	go func() {
		_ = srv.Serve(ln)
	}()
}

// tunnel passes bytes both ways to target, seeing nothing in them.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, c client, target string) {
	up, err := p.dial.dial(r.Context(), "tcp", target)
	if err != nil {
		p.dialErr(w, c, target, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.stats.Tunnelled.Add(1)
	p.audit("tunnelled", c, target)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			conn.Close()
			up.Close()
			return
		}
	}
	pipe(conn, up)
}

// pipe copies both ways until either side ends or is idle for
// tunnelIdle. Between two TCP sockets io.Copy splices in the kernel (the
// bytes never come up to the proxy); the idle deadline is renewed
// between slices of at most tunnelSlice. Closing closes a and b
// themselves, which frees their place under the connection cap.
func pipe(a, b net.Conn) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	cp := func(dst, src net.Conn) {
		defer closeBoth()
		for {
			_ = src.SetReadDeadline(time.Now().Add(tunnelIdle))
			n, err := io.Copy(dst, io.LimitReader(src, tunnelSlice))
			if err != nil || n < tunnelSlice {
				return
			}
		}
	}
	ra, rb := rawConn(a), rawConn(b)
	go cp(ra, rb)
	cp(rb, ra)
}

// tunnelSlice is how much a tunnel copies between two renewals of its
// idle deadline.
const tunnelSlice = 64 << 20

// rawConn is the socket under the connection cap's wrapper, so that
// copies between two TCP sockets can splice.
func rawConn(c net.Conn) net.Conn {
	if lc, ok := c.(*limitConn); ok {
		return lc.Conn
	}
	return c
}

// limitListener accepts at most n connections at once; more wait in the
// kernel's backlog until one closes.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// oneConnListener hands out one connection, then blocks until it is
// closed, so an http.Server serves exactly that connection and ends.
type oneConnListener struct {
	conn   net.Conn
	taken  atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{closed: make(chan struct{})}
	l.conn = &notifyConn{Conn: c, l: l}
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if l.taken.CompareAndSwap(false, true) {
		return l.conn, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

type notifyConn struct {
	net.Conn
	l *oneConnListener
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.l.Close()
	return err
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
