package isolation

import (
	"path/filepath"
	"strings"
)

// Names of the server environment variables that shape the policy. They are
// read from the server's environment only (PolicyFromEnv); the same names in
// a job's env have no effect on anything.
const (
	EnvEnablePathIsolation = "SHELLCTL_ENABLE_PATH_ISOLATION"
	EnvLandlockRWPaths     = "SHELLCTL_LANDLOCK_RW_PATHS"
	EnvLandlockROPaths     = "SHELLCTL_LANDLOCK_RO_PATHS"
	EnvLandlockRWDevPaths  = "SHELLCTL_LANDLOCK_RW_DEV_PATHS"
)

// Policy is the path-isolation policy of one job. It travels from the server
// to the runner inside the job's spec (JSON), never through the job's env.
type Policy struct {
	Enabled bool `json:"enabled"`
	// RW is the extra read-write list. The job's HOME and cwd are always
	// added at start; the default extra list is empty.
	RW []string `json:"rw,omitempty"`
	// RO is the read-only + execute list; empty means DefaultRO. The
	// job's script is always added.
	RO []string `json:"ro,omitempty"`
	// RWDev is the read-write device list; empty means DefaultRWDev. The
	// job's own terminal is always added.
	RWDev []string `json:"rw_dev,omitempty"`
	// NetRestrict makes the domain handle TCP connect and bind (Landlock
	// ABI 4): only the NetConnectTCP ports may be connected to, and no
	// port bound. It is the egress proxy's proxy-only policy.
	NetRestrict   bool     `json:"net_restrict,omitempty"`
	NetConnectTCP []uint16 `json:"net_connect_tcp,omitempty"`
}

// DefaultRO are the read-only + execute paths of the spec. Those that do not
// exist when the policy is applied are skipped (and recorded).
var DefaultRO = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc",
	"/opt/dify-agent-tools", "/opt/homebrew", "/snap",
}

// DefaultRWDev are the read-write devices of the spec.
var DefaultRWDev = []string{
	"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty",
}

// DefaultPolicy is isolation on with the spec's lists.
func DefaultPolicy() Policy {
	return Policy{
		Enabled: true,
		RO:      append([]string(nil), DefaultRO...),
		RWDev:   append([]string(nil), DefaultRWDev...),
	}
}

// PolicyFromEnv builds the policy from the SERVER's environment.
//
// Isolation is turned off only by SHELLCTL_ENABLE_PATH_ISOLATION=false
// (compared case-insensitively, surrounding spaces ignored). Every other
// value — including "0", "no" and "off" — leaves it on: the spec names one
// way to turn it off, and an ambiguous value must fail safe.
//
// The three list variables are comma-separated; blank entries are ignored,
// entries are cleaned (filepath.Clean) and de-duplicated. A list that is
// unset or has no entry left keeps the default; otherwise it replaces it.
// Relative entries are kept here and skipped (and recorded) when it is applied.
func PolicyFromEnv(getenv func(string) string) Policy {
	p := DefaultPolicy()
	if strings.EqualFold(strings.TrimSpace(getenv(EnvEnablePathIsolation)), "false") {
		p.Enabled = false
	}
	if l := splitPathList(getenv(EnvLandlockRWPaths)); len(l) > 0 {
		p.RW = l
	}
	if l := splitPathList(getenv(EnvLandlockROPaths)); len(l) > 0 {
		p.RO = l
	}
	if l := splitPathList(getenv(EnvLandlockRWDevPaths)); len(l) > 0 {
		p.RWDev = l
	}
	return p
}

func splitPathList(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		part = filepath.Clean(part)
		if seen[part] {
			continue
		}
		seen[part] = true
		out = append(out, part)
	}
	return out
}
