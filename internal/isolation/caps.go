package isolation

import (
	"fmt"
	"math/bits"
	"strings"
)

// Walls are what confines a job beside its Landlock domain: the powers a
// job of a root server keeps. They travel from the server to the runner in
// the job's spec and to the stage in its request, never through the job's
// environment; the server decides them once, from its flags.
type Walls struct {
	// LimitCaps: the job's bounding, permitted, effective and inheritable
	// capability sets are cut to KeepCaps (bit n: capability n), and its
	// ambient set cleared, before execve.
	LimitCaps bool   `json:"limit_caps,omitempty"`
	KeepCaps  uint64 `json:"keep_caps,omitempty"`
	// Seccomp is the seccomp filter the job gets last before execve: raw
	// struct sock_filter instructions in the machine's byte order, as the
	// server built them once (internal/seccomp). Empty: no filter.
	Seccomp []byte `json:"seccomp,omitempty"`
	// NewIPC: the job gets an IPC namespace of its own (SysV IPC and POSIX
	// message queues), which only a server with CAP_SYS_ADMIN can give.
	NewIPC bool `json:"new_ipc,omitempty"`
}

// capNames are the kernel's capability names (capability.h), by number,
// without the CAP_ prefix.
var capNames = [...]string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
	"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
	"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
	"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// DefaultJobCapabilities is the set a job of a root server keeps unless
// --job-capabilities says otherwise: Docker's default for a container,
// enough for package managers (chown, setuid to a build user, raw ping)
// and nothing that administers the machine (no SYS_ADMIN, SYS_MODULE,
// SYS_TIME, NET_ADMIN, SYS_PTRACE, BPF, ...).
var DefaultJobCapabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
	"SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL",
	"AUDIT_WRITE",
}

// ParseCapabilities reads a --job-capabilities value: comma-separated
// names, with or without CAP_, any case; "none" (alone) keeps none.
func ParseCapabilities(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "none") {
		return 0, nil
	}
	if s == "" {
		return 0, fmt.Errorf("--job-capabilities is empty: give capability names (e.g. CHOWN,SETUID) or none")
	}
	var mask uint64
	for _, part := range strings.Split(s, ",") {
		name := strings.ToUpper(strings.TrimSpace(part))
		name = strings.TrimPrefix(name, "CAP_")
		n := -1
		for i, c := range capNames {
			if c == name {
				n = i
				break
			}
		}
		if n < 0 {
			return 0, fmt.Errorf("--job-capabilities: %q is not a capability this build knows (known: %s; or none)", strings.TrimSpace(part), strings.Join(capNames[:], ","))
		}
		mask |= 1 << n
	}
	return mask, nil
}

// DefaultCapMask is DefaultJobCapabilities as a set.
func DefaultCapMask() uint64 {
	m, err := ParseCapabilities(strings.Join(DefaultJobCapabilities, ","))
	if err != nil {
		panic(err) // the list above is wrong
	}
	return m
}

// CapabilityNames are the names of the capabilities in mask, by number;
// an empty (non-nil) list for none.
func CapabilityNames(mask uint64) []string {
	out := make([]string, 0, bits.OnesCount64(mask))
	for n := 0; n < 64; n++ {
		if mask&(1<<n) == 0 {
			continue
		}
		if n < len(capNames) {
			out = append(out, capNames[n])
		} else {
			out = append(out, fmt.Sprintf("CAP_%d", n))
		}
	}
	return out
}
