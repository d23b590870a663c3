package server

import (
	"fmt"
	"strings"
	"unsafe"

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
		if err := seccompFiltersWork(); err != nil {
			return w, fmt.Errorf("--job-seccomp default: this kernel cannot filter a job's system calls (%v): give --job-seccomp=off to run jobs without the filter", err)
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

// seccompFiltersWork asks the kernel whether a filter may return the
// actions the job's filter returns (SECCOMP_GET_ACTION_AVAIL, Linux 4.14):
// so a kernel without seccomp filters stops the server at its start
// rather than every job at its own.
func seccompFiltersWork() error {
	for _, action := range []uint32{unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_ALLOW} {
		a := action
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a))); e != 0 {
			return fmt.Errorf("seccomp(SECCOMP_GET_ACTION_AVAIL, %#x): %w", action, e)
		}
	}
	return nil
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
