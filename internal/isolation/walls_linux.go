package isolation

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The walls beside Landlock (see Walls): a root job keeps a container's
// capabilities, not root's, and runs under a seccomp filter. Both are
// applied by the process that becomes the job, on the thread that then
// calls execve, after its Landlock domain: the direct start's child with
// raw system calls on a plan made before the clone (wallPlan, which
// childMain reads and never writes), the stage with the same calls. The
// order matters: the ambient set cleared; the bounding set cut while
// CAP_SETPCAP is still effective; then capset, which drops CAP_SETPCAP
// itself when it is not kept; then no_new_privs (a filter needs it once
// CAP_SYS_ADMIN is gone) and the filter last, so that nothing of ours runs
// under it but the signal resets and execve.

// Steps of applying the walls, as a failure names them (continuing the
// direct start's table: see direct_linux.go).
const (
	wallStepAmbient  = 1 // clear the ambient capabilities
	wallStepBounding = 2 // cut the bounding set
	wallStepCapset   = 3 // cut the permitted, effective, inheritable sets
	wallStepNNP      = 4 // no_new_privs for the filter
	wallStepSeccomp  = 5 // install the seccomp filter
)

// wallStepWhat says what each step does, for its failure.
var wallStepWhat = [...]string{
	wallStepAmbient:  "limit the job's capabilities: prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
	wallStepBounding: "limit the job's capabilities: prctl(PR_CAPBSET_DROP)",
	wallStepCapset:   "limit the job's capabilities: capset",
	wallStepNNP:      "apply the job's seccomp filter: prctl(PR_SET_NO_NEW_PRIVS)",
	wallStepSeccomp:  "apply the job's seccomp filter: seccomp(SECCOMP_SET_MODE_FILTER)",
}

// maxCaps bounds the capability numbers a kernel may know (the sets are
// 64 bits wide).
const maxCaps = 64

// wallPlan is what applying the walls needs, made before the job's
// process does it.
type wallPlan struct {
	limitCaps bool
	// drop are the capabilities to take out of the bounding set (those in
	// it now and not kept), dropN of them; none when we cannot (no
	// CAP_SETPCAP: a non-root server, whose jobs hold nothing anyway).
	drop  [maxCaps]uint8
	dropN int
	hdr   unix.CapUserHeader
	data  [2]unix.CapUserData
	// kept is what the job will hold: the permitted set after capset.
	kept uint64
	// fprog is the seccomp program; nil: no filter.
	fprog  *unix.SockFprog
	filter []unix.SockFilter
}

// seccompMaxInsns is the kernel's bound on a filter's length (BPF_MAXINSNS).
const seccompMaxInsns = 4096

// planWalls prepares w for the calling process's own capabilities. An
// error means the job must not run.
func planWalls(w *Walls) (*wallPlan, error) {
	p := &wallPlan{limitCaps: w.LimitCaps}
	if w.LimitCaps {
		p.hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var cur [2]unix.CapUserData
		if err := unix.Capget(&p.hdr, &cur[0]); err != nil {
			return nil, fmt.Errorf("limit the job's capabilities: capget: %w", err)
		}
		perm := uint64(cur[0].Permitted) | uint64(cur[1].Permitted)<<32
		eff := uint64(cur[0].Effective) | uint64(cur[1].Effective)<<32
		inh := uint64(cur[0].Inheritable) | uint64(cur[1].Inheritable)<<32
		keep := w.KeepCaps
		if eff&(1<<unix.CAP_SETPCAP) != 0 {
			// Every capability the kernel knows that is not kept: a drop
			// of one already out of the set is no error, one past the
			// kernel's last is (EINVAL).
			last := lastCap()
			for c := 0; c <= last; c++ {
				if keep&(1<<c) == 0 {
					p.drop[p.dropN] = uint8(c)
					p.dropN++
				}
			}
			if last < maxCaps-1 {
				keep &= 1<<(last+1) - 1
			}
		}
		// Only what is held can be kept; the inheritable set may only
		// take what was inheritable or permitted.
		p.kept = keep & perm
		newInh := keep & (inh | perm)
		newEff := p.kept
		p.hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		p.data[0] = unix.CapUserData{Effective: uint32(newEff), Permitted: uint32(p.kept), Inheritable: uint32(newInh)}
		p.data[1] = unix.CapUserData{Effective: uint32(newEff >> 32), Permitted: uint32(p.kept >> 32), Inheritable: uint32(newInh >> 32)}
	}
	if len(w.Seccomp) > 0 {
		n := len(w.Seccomp) / 8
		if len(w.Seccomp)%8 != 0 || n > seccompMaxInsns {
			return nil, fmt.Errorf("apply the job's seccomp filter: a program of %d bytes is not 1 to %d instructions of 8 bytes (a server of another build?)", len(w.Seccomp), seccompMaxInsns)
		}
		p.filter = make([]unix.SockFilter, n)
		for i := range p.filter {
			b := w.Seccomp[i*8:]
			p.filter[i] = unix.SockFilter{
				Code: binary.NativeEndian.Uint16(b[0:]),
				Jt:   b[2],
				Jf:   b[3],
				K:    binary.NativeEndian.Uint32(b[4:]),
			}
		}
		p.fprog = &unix.SockFprog{Len: uint16(n), Filter: &p.filter[0]}
	}
	return p, nil
}

// lastCap is the highest capability number the kernel knows: the one
// PR_CAPBSET_READ still answers, looked for from the last this build
// names (a few calls, where reading /proc/sys/kernel/cap_last_cap would
// be an open, a read and a close).
func lastCap() int {
	known := func(c int) bool {
		_, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		return err == nil
	}
	c := len(capNames) - 1
	if known(c) {
		for c+1 < maxCaps && known(c+1) {
			c++
		}
		return c
	}
	for c > 0 && !known(c) {
		c--
	}
	return c
}

// applied fills in a what the plan applies once applyWalls succeeded.
func (p *wallPlan) applied(w *Walls, a *Applied) {
	if p.limitCaps {
		a.Capabilities = CapabilityNames(p.kept)
	}
	a.Seccomp = "off"
	if p.fprog != nil {
		a.Seccomp = "default"
	}
	a.IPCNamespace = w.NewIPC
}

// applyWalls applies the plan to the calling thread: raw system calls
// only, no allocation and no stack growth (the direct start's child runs
// it). It returns the step that failed and its errno, or 0.
//
//go:nosplit
//go:norace
//go:nocheckptr
func applyWalls(p *wallPlan) (uintptr, syscall.Errno) {
	var e syscall.Errno
	if p.limitCaps {
		if _, _, e = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 {
			return wallStepAmbient, e
		}
		for i := 0; i < p.dropN; i++ {
			if _, _, e = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(p.drop[i]), 0, 0, 0, 0); e != 0 {
				return wallStepBounding, e
			}
		}
		if _, _, e = syscall.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&p.hdr)), uintptr(unsafe.Pointer(&p.data[0])), 0); e != 0 {
			return wallStepCapset, e
		}
	}
	if p.fprog != nil {
		if _, _, e = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
			return wallStepNNP, e
		}
		if _, _, e = syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(p.fprog))); e != 0 {
			return wallStepSeccomp, e
		}
	}
	return 0, 0
}

// wallFailure is the error of a wall step that failed with e.
func wallFailure(step uintptr, e syscall.Errno) error {
	switch {
	case step == wallStepNNP || step == wallStepSeccomp:
		return fmt.Errorf("%s: %w (a kernel without seccomp filters: start the server with --job-seccomp=off)", wallStepWhat[step], e)
	case step > 0 && int(step) < len(wallStepWhat):
		return fmt.Errorf("%s: %w (start the server with another --job-capabilities)", wallStepWhat[step], e)
	}
	return fmt.Errorf("apply the job's walls: unknown step %d: %w", step, e)
}
