//go:build !linux

package jobpeer

import "net/netip"

// Guard is not built outside Linux: no socket diagnosis, every connection
// passes (the server and its jobs are Linux only).
type Guard struct{}

// New makes a guard that refuses nothing.
func New(Config) *Guard { return &Guard{} }

// Check refuses nothing here.
func (*Guard) Check(local, remote netip.AddrPort) Verdict {
	return Verdict{Why: "not checked on this system"}
}

// JobGroupPrefix starts the name of every job group.
const JobGroupPrefix = "shellctl-"
