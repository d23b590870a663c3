package isolation

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ConfineNoFiles puts every thread of the calling process in a Landlock
// domain that grants no filesystem access at all (and, where the kernel
// can, no TCP bind or connect and no abstract unix sockets outside it),
// with no_new_privs: for a helper that only reads and writes the
// descriptors it was given (the screen process, which parses what a job
// writes). The domain is its own, never a job's. It returns what it left
// out, or an error when Landlock cannot be used (the caller goes on
// unconfined, and says so).
//
// Every thread, through syscall.AllThreadsSyscall (a build without cgo):
// Landlock and no_new_privs are per thread, and a Go program has several.
func ConfineNoFiles() (string, error) {
	abi, _, err := detectABI()
	if err != nil {
		return "", err
	}
	if abi < 1 {
		return "", fmt.Errorf("kernel reports Landlock ABI %d", abi)
	}
	attr := rulesetAttr{handledAccessFS: handledFSForABI(abi)}
	size := unsafe.Sizeof(attr.handledAccessFS)
	note := ""
	if abi >= 4 {
		attr.handledAccessNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size = unsafe.Offsetof(attr.scoped)
	} else {
		note = "TCP left open: kernel's Landlock ABI is below 4"
	}
	if abi >= 6 {
		// Not signal scoping: each thread gets a domain of its own here,
		// and the Go runtime signals its threads.
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Sizeof(attr)
	}
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return "", fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	fd := int(r)
	defer unix.Close(fd)
	if _, _, e := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return "", allThreadsErr("prctl(PR_SET_NO_NEW_PRIVS)", e)
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); e != 0 {
		return "", allThreadsErr("landlock_restrict_self", e)
	}
	return note, nil
}

func allThreadsErr(call string, e syscall.Errno) error {
	if errors.Is(e, unix.ENOTSUP) {
		return fmt.Errorf("%s on every thread: not possible in a build with cgo (build with CGO_ENABLED=0)", call)
	}
	return fmt.Errorf("%s on every thread: %w", call, e)
}
