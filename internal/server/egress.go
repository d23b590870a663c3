package server

// Wiring of the egress credential proxy (spec egress.md): started before
// the job service (which puts its variables into every job), told the
// server's own listeners (which it never connects to), and its CA
// directory added to every job's read-only paths.

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/shellctl/shellctl/internal/egress"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/metrics"
	"github.com/shellctl/shellctl/internal/statedir"
)

// ownListeners is the addresses of the server's listeners, filled in once
// they listen; the proxy refuses to connect to any of them.
type ownListeners struct {
	mu    sync.Mutex
	addrs []string
}

func (o *ownListeners) add(a string) {
	o.mu.Lock()
	o.addrs = append(o.addrs, a)
	o.mu.Unlock()
}

func (o *ownListeners) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.addrs...)
}

// startEgress starts the proxy when --egress-proxy is given (nil
// otherwise) and opens the CA directory to every job's domain.
func startEgress(cfg *Config, policy *isolation.Policy, own *ownListeners) (*egress.Proxy, error) {
	if cfg.Egress.Listen == "" {
		return nil, nil
	}
	if cfg.Egress.Policy == egress.PolicyProxyOnly && !policy.Enabled {
		return nil, errors.New("--egress=proxy-only is enforced by each job's Landlock domain, and path isolation is off (" + isolation.EnvEnablePathIsolation + "=false): turn isolation on, or use --egress=open")
	}
	if err := checkEgressSecretsHidden(cfg, policy); err != nil {
		return nil, err
	}
	ec := cfg.Egress
	ec.StateDir = cfg.StateDir
	ec.Logger = cfg.Logger
	// The configured addresses too: a job may name the API by the
	// address it was given before the listener reports its own.
	own.add(cfg.Listen)
	if cfg.MetricsListen != "" {
		own.add(cfg.MetricsListen)
	}
	ec.Forbidden = own.list
	p, err := egress.Start(ec)
	if err != nil {
		return nil, err
	}
	if len(policy.RO) == 0 {
		policy.RO = append([]string(nil), isolation.DefaultRO...)
	}
	policy.RO = append(policy.RO, p.CAOut())
	if p.Policy() == egress.PolicyProxyOnly {
		policy.NetRestrict = true
		policy.NetConnectTCP = append([]uint16{p.Port()}, p.AllowPorts()...)
	}
	return p, nil
}

// checkEgressSecretsHidden refuses a CA key directory or a credentials
// file that jobs could read: inside a path of their read-only or
// read-write lists, their HOME or the workspace root (a root job's
// CAP_DAC_OVERRIDE reads a 0600 file all the same). It refuses as well a
// CA output directory inside the state dir, which no job may reach.
func checkEgressSecretsHidden(cfg *Config, policy *isolation.Policy) error {
	if !policy.Enabled {
		return nil // no walls to keep: isolation is off
	}
	readable := map[string]string{cfg.Home: "the server's $HOME (every job's default HOME and cwd)"}
	if cfg.WorkspaceRoot != "" {
		readable[cfg.WorkspaceRoot] = "--workspace-root"
	}
	ro := policy.RO
	if len(ro) == 0 {
		ro = isolation.DefaultRO
	}
	for _, p := range ro {
		readable[p] = "the jobs' read-only path"
	}
	for _, p := range policy.RW {
		readable[p] = "the jobs' read-write path"
	}
	for flag, path := range map[string]string{"--egress-ca-dir": cfg.Egress.CADir, "--egress-credentials-file": cfg.Egress.CredentialsFile} {
		if path == "" {
			continue
		}
		real := resolvedPath(path)
		for p, what := range readable {
			if p != "" && statedir.Within(real, resolvedPath(p)) {
				return fmt.Errorf("%s %s lies inside %s %s, which jobs can read: keep it where no job reaches (e.g. beside the state dir)", flag, path, what, p)
			}
		}
	}
	if out := cfg.Egress.CAOut; out != "" {
		real := resolvedPath(out)
		if state := resolvedPath(cfg.StateDir); statedir.Within(real, state) {
			return fmt.Errorf("--egress-ca-out %s lies inside the state dir %s, which no job may reach: give a directory outside it", out, cfg.StateDir)
		}
		// Every job trusts the bundle there: no job may write it.
		writable := map[string]string{cfg.Home: "the server's $HOME (every job's default HOME and cwd)"}
		if cfg.WorkspaceRoot != "" {
			writable[cfg.WorkspaceRoot] = "--workspace-root"
		}
		for _, p := range policy.RW {
			writable[p] = "the jobs' read-write path"
		}
		for p, what := range writable {
			if p != "" && statedir.Within(real, resolvedPath(p)) {
				return fmt.Errorf("--egress-ca-out %s lies inside %s %s, which jobs can write: every job trusts the bundle there, so give a directory no job can write", out, what, p)
			}
		}
	}
	return nil
}

// resolvedPath is path absolute with its links resolved, as far as it
// exists (a file not made yet is judged by its directory).
func resolvedPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(r, filepath.Base(abs))
	}
	return abs
}

// jobsEgress adapts the proxy to the job service's interface.
type jobsEgress struct{ p *egress.Proxy }

func (j jobsEgress) JobEnv(session string, has bool, jobID string) (map[string]string, map[string]string, []jobs.EgressRef) {
	ph, proxy, refs := j.p.JobEnv(session, has, jobID)
	out := make([]jobs.EgressRef, len(refs))
	for i, r := range refs {
		out[i] = jobs.EgressRef{Provider: r.Provider, Name: r.Name}
	}
	return ph, proxy, out
}

func (j jobsEgress) Policy() string { return j.p.Policy() }
func (j jobsEgress) Addr() string   { return j.p.Addr() }

// egressForJobs is the job service's view of p (nil when off: a nil
// *Proxy in the interface would not be nil).
func egressForJobs(p *egress.Proxy) jobs.Egress {
	if p == nil {
		return nil
	}
	return jobsEgress{p}
}

// registerEgressMetrics exposes p's counters.
func registerEgressMetrics(m *metrics.Metrics, p *egress.Proxy) {
	if p == nil {
		return
	}
	c := p.Counters()
	m.RegisterEgress(metrics.EgressCounters{
		Requests: map[string]func() int64{
			"intercepted": c.Intercepted.Load, "tunnelled": c.Tunnelled.Load,
			"forwarded": c.Forwarded.Load, "refused": c.Refused.Load,
		},
		Substitutions: map[string]func() int64{"done": c.Substitutions.Load, "refused": c.SubstitutionRefuse.Load},
	})
}

// InfoEgress is GET /v1/info's egress: whether the proxy runs, where, its
// policy and its CA's fingerprint (never a credential).
type InfoEgress struct {
	Enabled      bool     `json:"enabled"`
	Proxy        string   `json:"proxy,omitempty"`
	Policy       string   `json:"policy,omitempty"`
	CASHA256     string   `json:"ca_sha256,omitempty"`
	CAOut        string   `json:"ca_out,omitempty"`
	AllowDomains []string `json:"allow_domains,omitempty"`
}

func egressInfo(p *egress.Proxy, cfg *Config) *InfoEgress {
	if p == nil {
		return &InfoEgress{}
	}
	return &InfoEgress{Enabled: true, Proxy: p.Addr(), Policy: p.Policy(), CASHA256: p.Fingerprint(),
		CAOut: p.CAOut(), AllowDomains: cfg.Egress.AllowDomains}
}
