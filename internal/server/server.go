// Package server wires shellctl serve: configuration, the database, the job
// service, the snapshot service and the HTTP server, and their orderly stop.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/api"
	"github.com/shellctl/shellctl/internal/egress"
	"github.com/shellctl/shellctl/internal/files"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/jobpeer"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/metrics"
	"github.com/shellctl/shellctl/internal/proctree"
	"github.com/shellctl/shellctl/internal/snapshot"
	"github.com/shellctl/shellctl/internal/statedir"
	"github.com/shellctl/shellctl/internal/store"
)

// Defaults of the limits that keep slow, idle or too many clients from
// holding the server (jobs.md "Limits that protect the server"). Waits
// answer within their own timeout (≤ 600 s), so there is no write timeout:
// a long wait is not a slow client.
const (
	DefaultHeaderReadTimeout = 10 * time.Second
	DefaultBodyReadTimeout   = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxConnections    = 4096
	shutdownTimeout          = 10 * time.Second
)

// Config is the configuration of serve, every default filled in.
type Config struct {
	Listen         string
	StateDir       string
	Token          string
	RequireToken   bool
	Home           string
	RunnerPath     string
	DefaultShell   string
	GCInterval     time.Duration
	GCRetention    time.Duration
	MaxRunningJobs int
	WarmRunners    int
	MaxJobRuntime  time.Duration
	MaxOutputBytes int64
	JobMemoryMax   int64
	JobPidsMax     int64
	InheritEnv     string // "all" or "none"
	WorkspaceRoot  string
	DisableCgroup  bool
	// JobStart is how runners start jobs: "direct" (a child of the runner
	// becomes the job, where the build can; else through a stage) or
	// "stage" (always through a stage process). "" is "direct".
	JobStart string
	// JobCapabilities (--job-capabilities) is the capability list a job
	// keeps, comma-separated, or "none"; "" is Docker's default set.
	// JobSeccomp (--job-seccomp) is "default" (also "") or "off".
	JobCapabilities string
	JobSeccomp      string

	MaxRequestBytes   int64         // run and input bodies
	MaxBodyMemory     int64         // bytes large bodies may hold at once
	HeaderReadTimeout time.Duration // 0 = none
	BodyReadTimeout   time.Duration // 0 = none
	IdleTimeout       time.Duration // 0 = none
	MaxConnections    int           // 0 = no cap

	// FileRoots (--file-root) are roots of the file routes besides Home
	// and the workspace root; MaxFileBytes (--max-file-bytes) bounds a
	// PUT (0: files.DefaultMaxFileBytes).
	FileRoots    []string
	MaxFileBytes int64

	// MetricsListen, when set, serves GET /metrics on its own address,
	// without auth (for a scraper on a private network).
	MetricsListen string

	// Who may be a client (docs/security.md "No job can use the API").
	// AllowJobClients turns off the refusal of connections opened by
	// jobs' processes (unsafe). AllowedHosts are Host names answered
	// besides addresses and localhost; AllowedOrigins the browser
	// origins allowed (none by default).
	AllowJobClients bool
	AllowedHosts    []string
	AllowedOrigins  []string

	// Egress is the credential proxy's configuration (egress.md; off
	// without Egress.Listen).
	Egress egress.Config

	Environ []string // the server's environment
	Getenv  func(string) string
	Logger  *slog.Logger
}

// CheckToken enforces --require-auth-token before anything is opened.
func (c *Config) CheckToken() error {
	if c.RequireToken && strings.TrimSpace(c.Token) == "" {
		return errors.New("--require-auth-token is set but no token is configured: give --token-file (or SHELLCTL_AUTH_TOKEN_FILE) a file holding a non-blank token, or pass --token or SHELLCTL_AUTH_TOKEN")
	}
	return nil
}

// Server is a running shellctl serve.
type Server struct {
	cfg  Config
	st   *store.Store
	jobs *jobs.Service
	http *http.Server
	ln   net.Listener
	// metricsHTTP serves --metrics-listen (nil without it).
	metricsHTTP *http.Server
	metricsLn   net.Listener
	hostCheck   api.HostCheck
	egress      *egress.Proxy
}

// Start opens everything and starts listening.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.CheckToken(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	snapTimeout, err := snapshot.TimeoutFromEnv(cfg.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.JobStart != "" && cfg.JobStart != "direct" && cfg.JobStart != "stage" {
		return nil, fmt.Errorf("--job-start %q is not one of direct, stage", cfg.JobStart)
	}
	walls, err := jobWalls(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.InheritEnv != "all" && cfg.InheritEnv != "none" {
		return nil, fmt.Errorf("--inherit-env %q is not one of all, none", cfg.InheritEnv)
	}
	var workspaceGiven string
	if cfg.WorkspaceRoot != "" {
		abs, err := filepath.Abs(cfg.WorkspaceRoot)
		if err != nil {
			return nil, fmt.Errorf("--workspace-root %q: %w", cfg.WorkspaceRoot, err)
		}
		// Resolved, so it compares with the resolved cwd of each job.
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("--workspace-root %q: %w", cfg.WorkspaceRoot, err)
		}
		cfg.WorkspaceRoot, workspaceGiven = filepath.Clean(real), abs
	}
	if err := cfg.checkLimits(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.RunnerPath); err != nil {
		return nil, fmt.Errorf("runner binary %s: %w", cfg.RunnerPath, err)
	}
	// Jobs whose forks count against a pids limit of the server's own (a
	// container's) could take every pid, and the server would die the
	// first time it needed a thread: it makes its spare ones now
	// (proctree/reserve.go).
	cg := proctree.ProbeCgroup(cfg.DisableCgroup)
	if proctree.NeedSpareThreads(cg.Mode, cfg.JobPidsMax > 0 && slices.Contains(cg.Controllers, "pids")) {
		proctree.ReserveThreads(proctree.ServerThreads)
		log.Info("spare threads made: the jobs may take pids the server needs (no group of their own, or none with a pids limit under one of the server's)", "threads", proctree.ServerThreads, "tracking", cg.Mode)
	}
	if err := statedir.Prepare(cfg.StateDir); err != nil {
		return nil, err
	}
	// Made before the first runner starts: runners name their job's
	// cgroup after it (statedir.ServerIDFile).
	if _, err := statedir.ServerID(cfg.StateDir); err != nil {
		return nil, err
	}
	stateReal, err := statedir.Real(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	policy := isolation.PolicyFromEnv(cfg.Getenv)
	// No job may reach the state dir: refuse one inside a path jobs are
	// given to write (their Home and default cwd, the RW list, and any
	// cwd a request may pick under --workspace-root).
	writable := map[string]string{cfg.Home: "the server's $HOME (every job's default HOME and cwd)"}
	if cfg.WorkspaceRoot != "" {
		writable[cfg.WorkspaceRoot] = "--workspace-root"
	}
	if policy.Enabled {
		for _, p := range policy.RW {
			writable[p] = isolation.EnvLandlockRWPaths + " entry"
		}
	}
	if err := statedir.CheckOutside(stateReal, writable); err != nil {
		return nil, err
	}
	started := time.Now()
	own := &ownListeners{}
	eg, err := startEgress(&cfg, &policy, own)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.StateDir)
	if err != nil {
		eg.Close()
		return nil, err
	}
	m := metrics.New()
	svc, err := jobs.New(ctx, jobs.Config{
		StateDir:           cfg.StateDir,
		RunnerPath:         cfg.RunnerPath,
		DefaultShell:       cfg.DefaultShell,
		Home:               cfg.Home,
		ServerEnv:          cfg.Environ,
		InheritNone:        cfg.InheritEnv == "none",
		Policy:             policy,
		ForceIsolationFail: cfg.Getenv("SHELLCTL_TEST_FORCE_ISOLATION_FAILURE"),
		BenchNoScreen:      cfg.Getenv("SHELLCTL_BENCH_NO_SCREEN") == "1",
		Walls:              walls,
		WorkspaceRoot:      cfg.WorkspaceRoot,
		WorkspaceRootGiven: workspaceGiven,
		MaxRunning:         cfg.MaxRunningJobs,
		WarmRunners:        cfg.WarmRunners,
		MaxRuntime:         cfg.MaxJobRuntime,
		MaxOutputBytes:     cfg.MaxOutputBytes,
		MemoryMax:          cfg.JobMemoryMax,
		PidsMax:            cfg.JobPidsMax,
		DisableCgroup:      cfg.DisableCgroup,
		JobStartStage:      cfg.JobStart == "stage",
		GCInterval:         cfg.GCInterval,
		GCRetention:        cfg.GCRetention,
		Logger:             log,
		Metrics:            m,
		Egress:             egressForJobs(eg),
	}, st)
	if err != nil {
		st.Close()
		eg.Close()
		return nil, err
	}
	m.RegisterGauges(metrics.Gauges{JobsRunning: svc.Running, JobsLive: svc.Live, WarmRunners: svc.WarmRunners})
	registerEgressMetrics(m, eg)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		svc.Close()
		st.Close()
		eg.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	var metricsLn net.Listener
	if cfg.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			ln.Close()
			svc.Close()
			st.Close()
			eg.Close()
			return nil, fmt.Errorf("--metrics-listen %s: %w", cfg.MetricsListen, err)
		}
	}
	h := &api.Server{
		Jobs:  svc,
		Token: cfg.Token,
		Home:  cfg.Home,
		Limits: api.Limits{
			MaxRequestBytes: cfg.MaxRequestBytes,
			BodyReadTimeout: cfg.BodyReadTimeout,
			BodyMemory:      cfg.MaxBodyMemory,
		},
		Snapshot: snapshot.NewService(snapshot.Config{
			Home: cfg.Home, StateDir: cfg.StateDir, Timeout: snapTimeout, Logger: log, Metrics: m,
		}),
		Logger:  log,
		Metrics: m,
	}
	if eg != nil {
		h.Egress = eg
		own.add(ln.Addr().String())
		if metricsLn != nil {
			own.add(metricsLn.Addr().String())
		}
	}
	maxConns := cfg.MaxConnections
	if lim := fdLimit(); maxConns > 0 && lim > 0 && uint64(maxConns) > lim/2 {
		// Connections may take at most half the descriptors: the rest are
		// for jobs' control channels, the database and the runners.
		log.Warn("--max-connections lowered to half the descriptor limit", "asked", maxConns, "nofile", lim, "now", lim/2)
		maxConns = int(lim / 2)
	}
	fileRoots := append([]string(nil), cfg.FileRoots...)
	if cfg.WorkspaceRoot != "" {
		fileRoots = append(fileRoots, cfg.WorkspaceRoot)
	}
	fsvc, err := files.New(files.Config{Home: cfg.Home, Roots: fileRoots, StateDir: cfg.StateDir, MaxFileBytes: cfg.MaxFileBytes, BodyIdle: cfg.BodyReadTimeout, Logger: log})
	if err != nil {
		ln.Close()
		if metricsLn != nil {
			metricsLn.Close()
		}
		svc.Close()
		st.Close()
		eg.Close()
		return nil, err
	}
	h.Files = fsvc
	base := newInfo(&cfg, cg, policy, walls, snapTimeout, maxConns, started)
	base.Egress = egressInfo(eg, &cfg)
	h.Info = infoFunc(base, st)
	mcpStop := make(chan struct{})
	h.MCP = mcpHandler(h, cfg.Token, log, mcpStop)
	s := &Server{egress: eg}
	if !cfg.AllowJobClients {
		gc := jobpeer.Config{RunnerComm: filepath.Base(cfg.RunnerPath)}
		if cg.Mode == proctree.KindCgroup2 {
			gc.CgroupDir, gc.JobGroups = cg.Dir, true
		} else if own := proctree.ProbeCgroup(false); own.Dir != "" {
			// No job groups, but the server's own group still tells the
			// jobs' sockets (made there) from other clients'.
			gc.CgroupDir = own.Dir
		}
		guard := jobpeer.New(gc)
		ln = &jobGuardListener{Listener: ln, g: guard, log: log}
		if metricsLn != nil {
			metricsLn = &jobGuardListener{Listener: metricsLn, g: guard, log: log}
		}
	} else {
		log.Warn("--allow-job-clients: jobs' processes may use the API, and through it leave their confinement")
	}
	hosts := api.HostCheck{AllowedHosts: api.NormalizeHosts(cfg.AllowedHosts), AllowedOrigins: api.NormalizeOrigins(cfg.AllowedOrigins)}
	s.hostCheck = hosts
	ll := newLimitListener(ln, maxConns)
	s.cfg, s.st, s.jobs, s.ln = cfg, st, svc, ll
	s.http = &http.Server{
		Handler:           hosts.Wrap(trackRequests(h)),
		ReadHeaderTimeout: cfg.HeaderReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	s.http.RegisterOnShutdown(h.StopStreams) // streams end at once; clients resume
	s.http.RegisterOnShutdown(func() { close(mcpStop) })
	s.http.RegisterOnShutdown(fsvc.Stop) // file watches end at once
	if cfg.Token == "" {
		log.Warn("no auth token configured: every client on this address can run commands")
	}
	log.Info("serving", "addr", ln.Addr().String(), "state_dir", cfg.StateDir, "isolation", policy.Enabled)
	go func() {
		if err := s.http.Serve(ll); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
		}
	}()
	if metricsLn != nil {
		s.serveMetrics(metricsLn, m, log)
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Stop stops accepting requests, lets the ones in flight finish (bounded),
// and closes the database. Running jobs go on: their runners outlive us.
func (s *Server) Stop() error {
	err := s.shutdownHTTP()
	s.jobs.Close()
	if cerr := s.st.Close(); err == nil {
		err = cerr
	}
	return err
}

// shutdownHTTP closes the listeners and lets the requests in flight
// finish (bounded).
func (s *Server) shutdownHTTP() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(ctx)
	_ = s.egress.Close()
	if s.metricsHTTP != nil {
		_ = s.metricsHTTP.Shutdown(ctx)
	}
	return err
}

// log is the configured logger, or one that discards.
func (s *Server) log() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.Logger
}

// checkLimits refuses limits that cannot work.
func (c *Config) checkLimits() error {
	switch {
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("--max-request-bytes %d is negative", c.MaxRequestBytes)
	case c.MaxRequestBytes > 0 && c.MaxRequestBytes < 64<<10:
		return fmt.Errorf("--max-request-bytes %d is below 64KiB, the limit of every other body: give at least 65536", c.MaxRequestBytes)
	case c.MaxBodyMemory < 0:
		return fmt.Errorf("--max-body-memory %d is negative", c.MaxBodyMemory)
	case c.MaxConnections < 0:
		return fmt.Errorf("--max-connections %d is negative (0 = no cap)", c.MaxConnections)
	}
	return nil
}

// fdLimit is this process's descriptor limit, 0 when unknown.
func fdLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// trackRequests tells the connection limiter which connections have a
// request in the handler, and which have carried an authorized one.
func trackRequests(h *api.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc := trackedFrom(r.Context()); tc != nil {
			tc.begin(h.Authorized(r))
			defer tc.end()
		}
		h.ServeHTTP(w, r)
	})
}

// serveMetrics serves GET /metrics, and nothing else, on ln without auth.
func (s *Server) serveMetrics(ln net.Listener, m *metrics.Metrics, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	s.metricsLn = ln
	s.metricsHTTP = &http.Server{
		Handler:           s.hostCheck.Wrap(mux),
		ReadHeaderTimeout: DefaultHeaderReadTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving metrics without auth", "addr", ln.Addr().String())
	go func() {
		if err := s.metricsHTTP.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve metrics", "err", err)
		}
	}()
}

// MetricsAddr is the address of --metrics-listen ("" without it).
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}
