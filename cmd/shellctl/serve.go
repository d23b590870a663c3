package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/api"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/server"
	"github.com/shellctl/shellctl/internal/statedir"
)

// Defaults of serve (jobs.md, isolation.md).
const (
	defaultListen         = "127.0.0.1:8765"
	defaultGCInterval     = 60 * time.Second
	defaultGCRetention    = 300 * time.Second
	defaultMaxRunning     = 256
	defaultMaxOutputBytes = 1 << 30
	// defaultWarmRunners: runners started ahead of need. Two keep a
	// client that runs jobs back to back from ever waiting for a runner's
	// start-up, at the cost of two idle processes (a few MiB, shared text).
	defaultWarmRunners = 2
)

func serveCmd() *cobra.Command {
	home, _ := os.UserHomeDir()
	cfg := server.Config{
		Listen:         defaultListen,
		DefaultShell:   "/bin/sh",
		GCInterval:     defaultGCInterval,
		GCRetention:    defaultGCRetention,
		MaxRunningJobs: defaultMaxRunning,
		WarmRunners:    defaultWarmRunners,
		MaxOutputBytes: defaultMaxOutputBytes,
		InheritEnv:     "all",

		MaxRequestBytes:   api.DefaultMaxRequestBytes,
		MaxBodyMemory:     api.DefaultBodyMemory,
		HeaderReadTimeout: server.DefaultHeaderReadTimeout,
		BodyReadTimeout:   server.DefaultBodyReadTimeout,
		IdleTimeout:       server.DefaultIdleTimeout,
		MaxConnections:    server.DefaultMaxConnections,
	}
	var verbose bool
	var tokenFile string
	var pprofAddr string
	stopGrace := server.DefaultStopGrace
	logFormat := "text"
	c := &cobra.Command{
		Use:   "serve",
		Short: "Start the job server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if !verbose {
				level = slog.LevelWarn
			}
			logger, err := newLogger(logFormat, level)
			if err != nil {
				return err
			}
			serveLogJSON = logFormat == "json"
			cfg.Logger = logger
			tc, err := resolveToken(cfg.Token, tokenFile, os.Getenv)
			if err != nil {
				return err
			}
			for _, n := range tc.notes {
				cfg.Logger.Warn(n)
			}
			// pflag's value and os.Getenv's share memory with the
			// arguments and the environment: copy the token before they
			// are scrubbed.
			cfg.Token = strings.Clone(tc.token)
			scrubArgs(cfg.Token)
			if env := os.Getenv(envToken); env != "" && env != cfg.Token {
				scrubArgs(strings.Clone(env))
			}
			// Credential-like variables of our own environment (the token's
			// among them) leave /proc/<pid>/environ; Go keeps its copies.
			if _, err := scrubEnv(); err != nil {
				cfg.Logger.Warn("credentials stay visible in /proc/<pid>/environ", "err", err)
			}
			cfg.Home = home
			if cfg.StateDir == "" {
				cfg.StateDir = statedir.Default(os.Geteuid())
			}
			if abs, err := filepath.Abs(cfg.StateDir); err == nil {
				cfg.StateDir = abs
			}
			if cfg.RunnerPath == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.RunnerPath = filepath.Join(filepath.Dir(self), "shellctl-runner")
			}
			cfg.Environ = os.Environ()
			cfg.Getenv = os.Getenv
			// Refuse a missing token before anything is opened.
			if err := cfg.CheckToken(); err != nil {
				return err
			}
			if err := server.CheckInitProc(); err != nil {
				return err
			}
			if tc.from != "" {
				cfg.Logger.Info("token configured", "from", tc.from)
			}
			// One server per state dir: the lock is held until we exit.
			if err := statedir.Prepare(cfg.StateDir); err != nil {
				return err
			}
			release, err := statedir.Lock(cfg.StateDir)
			if err != nil {
				return err
			}
			defer release()
			// Descriptors this process inherited (a terminal's, a CI
			// harness's pipe) must not live on in runners and jobs, which
			// outlive us: they would hold them open for as long.
			_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			s, err := server.Start(ctx, cfg)
			if err != nil {
				return err
			}
			if pprofAddr != "" {
				// Profiling for performance work only: its own listener,
				// never the API's, and off unless asked for.
				go func() {
					mux := http.NewServeMux()
					mux.HandleFunc("/debug/pprof/", pprof.Index)
					mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
					mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
					cfg.Logger.Warn("profiling endpoint on", "addr", pprofAddr)
					_ = http.ListenAndServe(pprofAddr, mux)
				}()
			}
			banner(logFormat, fmt.Sprintf("serving on http://%s (state dir %s)", s.Addr(), cfg.StateDir),
				"url", "http://"+s.Addr(), "state_dir", cfg.StateDir)
			if a := s.MetricsAddr(); a != "" {
				banner(logFormat, fmt.Sprintf("metrics without auth on http://%s/metrics", a), "url", "http://"+a+"/metrics")
			}
			if server.IsInit() {
				cfg.Logger.Warn("running as PID 1: every orphan in the namespace is reaped, and a stop (SIGTERM) ends the running jobs and records their ends", "stop_grace", stopGrace.String())
			}
			<-ctx.Done()
			if server.IsInit() {
				return s.StopAsInit(stopGrace)
			}
			cfg.Logger.Warn("stopping (not PID 1): running jobs keep running")
			return s.Stop()
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to listen on")
	f.StringVar(&cfg.StateDir, "state-dir", "", "state directory: database, job output, runner sockets; never inside a path jobs can write (default "+statedir.RootDefault+" for root, /var/tmp/shellctl-<uid> otherwise)")
	f.StringVar(&tokenFile, "token-file", "", "read the bearer token from this file (one line; default $SHELLCTL_AUTH_TOKEN_FILE); unlike --token, /proc never shows it")
	f.StringVar(&cfg.Token, "token", "", "bearer token clients must send (default $SHELLCTL_AUTH_TOKEN); visible in /proc while serve starts: prefer --token-file")
	f.BoolVar(&cfg.RequireToken, "require-auth-token", false, "refuse to start without a non-empty token")
	f.StringVar(&cfg.DefaultShell, "default-shell", cfg.DefaultShell, "shell that runs scripts without a #! line")
	f.Var(durationFlag{&cfg.GCInterval}, "gc-interval", "how often finished jobs are collected (seconds or a duration such as 1m)")
	f.Var(durationFlag{&cfg.GCRetention}, "gc-retention", "how long a finished job is kept")
	f.IntVar(&cfg.MaxRunningJobs, "max-running-jobs", cfg.MaxRunningJobs, "jobs that may run at once; more get 429")
	f.Var(durationFlag{&cfg.MaxJobRuntime}, "max-job-runtime", "wall-clock limit per job (0 = none)")
	f.Var(sizeFlag{&cfg.MaxOutputBytes}, "max-output-bytes", "output limit per job, e.g. 1GiB (0 = none)")
	f.Var(sizeFlag{&cfg.JobMemoryMax}, "job-memory-max", "memory limit per job through its cgroup (0 = none)")
	f.Int64Var(&cfg.JobPidsMax, "job-pids-max", 0, "process limit per job through its cgroup (0 = none)")
	f.StringVar(&cfg.InheritEnv, "inherit-env", cfg.InheritEnv, "all: jobs inherit the server's filtered environment; none: only PATH, LANG, USER, LOGNAME, SHELL")
	f.StringVar(&cfg.WorkspaceRoot, "workspace-root", "", "refuse a cwd outside this directory (403)")
	f.StringVar(&cfg.RunnerPath, "runner", "", "path of shellctl-runner (default: beside this binary)")
	f.IntVar(&cfg.WarmRunners, "warm-runners", cfg.WarmRunners, "runners kept started and waiting for the next jobs (0 = start one per job)")
	f.BoolVar(&cfg.DisableCgroup, "no-cgroup", false, "track job processes without a cgroup (as child subreaper only)")
	f.StringVar(&cfg.JobStart, "job-start", "direct", "how a runner starts its job: direct (its own child becomes the job; linux/amd64, elsewhere as stage) or stage (through a shellctl-stage process)")
	f.Var(sizeFlag{&cfg.MaxRequestBytes}, "max-request-bytes", "largest run or input body, e.g. 64MiB (other bodies: 64KiB)")
	f.Var(sizeFlag{&cfg.MaxBodyMemory}, "max-body-memory", "memory that large request bodies may hold at once; more wait, then 503")
	f.Var(durationFlag{&cfg.HeaderReadTimeout}, "header-read-timeout", "a request's headers must arrive within this (0 = no limit)")
	f.Var(durationFlag{&cfg.BodyReadTimeout}, "body-read-timeout", "a request's body must arrive within this once reading began; else 408 (0 = no limit)")
	f.Var(durationFlag{&cfg.IdleTimeout}, "idle-timeout", "an idle keep-alive connection is closed after this (0 = no limit)")
	f.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "connections open at once; over it the oldest idle one without an authorized request is closed (0 = no cap)")
	f.Var(durationFlag{&stopGrace}, "stop-grace", "as PID 1 only: on SIGTERM each running job gets this long between SIGTERM and SIGKILL before the server exits")
	f.BoolVarP(&verbose, "verbose", "v", false, "log every request and job transition")
	f.StringVar(&logFormat, "log-format", logFormat, "log format on stderr: text or json (one object a line)")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "", "also serve GET /metrics on this address, without auth (e.g. 127.0.0.1:9090); /metrics on --listen always needs the token")
	// Who may be a client (docs/security.md "No job can use the API").
	f.BoolVar(&cfg.AllowJobClients, "allow-job-clients", false, "UNSAFE: let jobs' processes use the API (by default a connection a job opened gets 403 forbidden_from_job, whatever the token: through the API a job could start a job with any cwd and leave its confinement)")
	f.StringSliceVar(&cfg.AllowedHosts, "allowed-hosts", nil, "Host names answered besides IP addresses and localhost, comma-separated or repeated (a Service's DNS name, e.g. shellctl.sandbox.svc); other names get 403 forbidden_host (DNS rebinding)")
	f.StringSliceVar(&cfg.AllowedOrigins, "allowed-origins", nil, "browser origins allowed (scheme://host[:port]), comma-separated or repeated; a request with any other Origin header gets 403 forbidden_origin")
	f.StringVar(&pprofAddr, "pprof", "", "serve Go profiles on this loopback address (performance work)")
	_ = f.MarkHidden("pprof")
	// What a job keeps of root's powers (docs/security.md).
	f.StringVar(&cfg.JobCapabilities, "job-capabilities", strings.Join(isolation.DefaultJobCapabilities, ","), "capabilities a job of a root server keeps (comma-separated names, CAP_ optional), or none; every other one is dropped before the job starts")
	f.StringVar(&cfg.JobSeccomp, "job-seccomp", "default", "the job's seccomp filter: default (refuses namespaces, mounts, keyrings, BPF, perf events, module loading, clock changes, resource calls on other processes, ...) or off")
	return c
}

// durationFlag takes seconds ("60", "0.5") or a Go duration ("1m").
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return "0"
	}
	return f.d.String()
}
func (f durationFlag) Type() string { return "duration" }
func (f durationFlag) Set(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(n) || math.IsInf(n, 0) || n > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("%q is not a finite number of seconds", s)
		}
		if n < 0 {
			return fmt.Errorf("%q is negative", s)
		}
		*f.d = time.Duration(n * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a number of seconds or a duration such as 90s", s)
	}
	*f.d = d
	return nil
}

// sizeFlag takes bytes with an optional K, M, G (powers of 1024; KiB, MB
// spellings accepted).
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil {
		return "0"
	}
	return strconv.FormatInt(*f.n, 10)
}
func (f sizeFlag) Type() string { return "bytes" }
func (f sizeFlag) Set(s string) error {
	v, err := parseSize(s)
	if err != nil {
		return err
	}
	*f.n = v
	return nil
}

func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size such as 1GiB or 1048576", s)
	}
	return n * mult, nil
}

// serveLogJSON: serve logs JSON, so every line it writes to stderr is a
// JSON object — the banner and a failure's last word included.
var serveLogJSON bool

// banner writes one of serve's start-up lines, whatever the log level: the
// plain "shellctl: …" line that scripts wait for, or under --log-format
// json an object whose msg is the same text, with attrs.
func banner(format, msg string, attrs ...any) {
	if format == "json" {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Info(msg, attrs...)
		return
	}
	fmt.Fprintln(os.Stderr, "shellctl: "+msg)
}

// newLogger makes serve's logger on stderr in format (text or json).
func newLogger(format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q is not one of text, json", format)
}
