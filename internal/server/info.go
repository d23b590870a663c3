package server

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/buildinfo"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/proctree"
	"github.com/shellctl/shellctl/internal/store"
)

// Info is the answer of GET /v1/info. It holds no secret: no token, no
// token file, no environment value.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Kernel    Kernel `json:"kernel"`

	Landlock isolation.LandlockSupport `json:"landlock"`
	Cgroup   proctree.CgroupSupport    `json:"cgroup"`
	// Tracking is how a job's processes are found: "cgroup2" or
	// "subreaper" (Cgroup.Mode; each runner reports what it got).
	Tracking string `json:"tracking"`

	Limits InfoLimits `json:"limits"`
	Policy InfoPolicy `json:"policy"`

	StateDir      string           `json:"state_dir"`
	StartedAt     time.Time        `json:"started_at"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	Jobs          map[string]int64 `json:"jobs"`
	AuthRequired  bool             `json:"auth_required"`
	// Egress is the egress credential proxy (egress.go).
	Egress *InfoEgress `json:"egress"`
}

// Kernel is uname(2).
type Kernel struct {
	Sysname string `json:"sysname"`
	Release string `json:"release"`
	Version string `json:"version"`
	Machine string `json:"machine"`
}

// InfoLimits are the limits in force (0 = none).
type InfoLimits struct {
	MaxRunningJobs           int     `json:"max_running_jobs"`
	MaxJobRuntimeSeconds     float64 `json:"max_job_runtime_seconds"`
	MaxOutputBytes           int64   `json:"max_output_bytes"`
	JobMemoryMax             int64   `json:"job_memory_max"`
	JobPidsMax               int64   `json:"job_pids_max"`
	MaxRequestBytes          int64   `json:"max_request_bytes"`
	MaxBodyMemory            int64   `json:"max_body_memory"`
	MaxConnections           int     `json:"max_connections"`
	HeaderReadTimeoutSeconds float64 `json:"header_read_timeout_seconds"`
	BodyReadTimeoutSeconds   float64 `json:"body_read_timeout_seconds"`
	IdleTimeoutSeconds       float64 `json:"idle_timeout_seconds"`
	GCIntervalSeconds        float64 `json:"gc_interval_seconds"`
	GCRetentionSeconds       float64 `json:"gc_retention_seconds"`
	SnapshotTimeoutSeconds   float64 `json:"snapshot_timeout_seconds"`
	WarmRunners              int     `json:"warm_runners"`
}

// InfoPolicy is the default policy of jobs.
type InfoPolicy struct {
	Isolation     isolation.Policy `json:"isolation"`
	DefaultShell  string           `json:"default_shell"`
	InheritEnv    string           `json:"inherit_env"`
	WorkspaceRoot string           `json:"workspace_root"`
	// JobCapabilities are the capabilities a job keeps (of those the
	// server holds: none for a non-root server); JobSeccomp is its
	// seccomp filter, "default" or "off"; JobIPCNamespace says each job
	// gets an IPC namespace of its own.
	JobCapabilities []string `json:"job_capabilities"`
	JobSeccomp      string   `json:"job_seccomp"`
	JobIPCNamespace bool     `json:"job_ipc_namespace"`
}

func uname() Kernel {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Kernel{}
	}
	return Kernel{
		Sysname: unix.ByteSliceToString(u.Sysname[:]), Release: unix.ByteSliceToString(u.Release[:]),
		Version: unix.ByteSliceToString(u.Version[:]), Machine: unix.ByteSliceToString(u.Machine[:]),
	}
}

// newInfo builds what does not change while the server runs; the answer
// adds the uptime and the job counts.
func newInfo(cfg *Config, cg proctree.CgroupSupport, policy isolation.Policy, walls isolation.Walls, snapTimeout time.Duration, maxConns int, started time.Time) Info {
	bi := buildinfo.Get()
	if policy.Enabled {
		// The defaults the confinement applies to empty lists.
		if len(policy.RO) == 0 {
			policy.RO = isolation.DefaultRO
		}
		if len(policy.RWDev) == 0 {
			policy.RWDev = isolation.DefaultRWDev
		}
	}
	in := Info{
		Version: bi.Version, Commit: bi.Commit, GoVersion: bi.GoVersion, Kernel: uname(),
		Landlock: isolation.DetectLandlock(), Cgroup: cg, Tracking: cg.Mode,
		Limits: InfoLimits{
			MaxRunningJobs: cfg.MaxRunningJobs, MaxJobRuntimeSeconds: cfg.MaxJobRuntime.Seconds(),
			MaxOutputBytes: cfg.MaxOutputBytes, JobMemoryMax: cfg.JobMemoryMax, JobPidsMax: cfg.JobPidsMax,
			MaxRequestBytes: cfg.MaxRequestBytes, MaxBodyMemory: cfg.MaxBodyMemory, MaxConnections: maxConns,
			HeaderReadTimeoutSeconds: cfg.HeaderReadTimeout.Seconds(), BodyReadTimeoutSeconds: cfg.BodyReadTimeout.Seconds(),
			IdleTimeoutSeconds: cfg.IdleTimeout.Seconds(), GCIntervalSeconds: cfg.GCInterval.Seconds(),
			GCRetentionSeconds: cfg.GCRetention.Seconds(), SnapshotTimeoutSeconds: snapTimeout.Seconds(),
			WarmRunners: cfg.WarmRunners,
		},
		Policy: InfoPolicy{
			Isolation: policy, DefaultShell: cfg.DefaultShell, InheritEnv: cfg.InheritEnv, WorkspaceRoot: cfg.WorkspaceRoot,
			JobCapabilities: isolation.CapabilityNames(walls.KeepCaps), JobSeccomp: "off", JobIPCNamespace: walls.NewIPC,
		},
		StateDir: cfg.StateDir, StartedAt: started.UTC(), AuthRequired: cfg.Token != "",
	}
	if len(walls.Seccomp) > 0 {
		in.Policy.JobSeccomp = "default"
	}
	return in
}

// infoFunc answers GET /v1/info: the fixed part and, per request, the
// uptime and one query's counts of jobs by status.
func infoFunc(base Info, st *store.Store) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		counts, err := st.CountByStatus(ctx)
		if err != nil {
			return nil, err
		}
		in := base
		in.Jobs = counts
		in.UptimeSeconds = time.Since(base.StartedAt).Seconds()
		return in, nil
	}
}
