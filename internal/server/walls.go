package server

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/seccomp"
)

// jobWalls decides, once at the start, every job's capabilities, seccomp
// filter and IPC namespace from --job-capabilities and --job-seccomp: the
// filter is built here, once, and the runners only hand it to the kernel.
// A bad value stops the server before it opens anything.
func jobWalls(cfg *Config) (isolation.Walls, error) {
	w := isolation.Walls{LimitCaps: true, KeepCaps: isolation.DefaultCapMask()}
	if strings.TrimSpace(cfg.JobCapabilities) != "" {
		m, err := isolation.ParseCapabilities(cfg.JobCapabilities)
		if err != nil {
			return w, err
		}
		w.KeepCaps = m
	}
	switch cfg.JobSeccomp {
	case "", "default":
		prog, err := seccomp.Default()
		if err != nil {
			return w, err
		}
		w.Seccomp = prog
	case "off":
	default:
		return w, fmt.Errorf("--job-seccomp %q is not one of default, off", cfg.JobSeccomp)
	}
	// Where the server holds CAP_SYS_ADMIN (root, outside a container
	// that took it), each job gets an IPC namespace of its own: its SysV
	// IPC objects and POSIX message queues are no other job's.
	w.NewIPC = holdsSysAdmin()
	return w, nil
}

// holdsSysAdmin reports whether CAP_SYS_ADMIN is in our effective set.
func holdsSysAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SYS_ADMIN) != 0
}
