package seccomp

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary the child of TestFilterOnTheKernel.
const childEnv = "SHELLCTL_SECCOMP_TEST_CHILD"

// filterChild installs the filter on its own thread (no TSYNC: the rest
// of the runtime's threads stay as they are) and makes, on that thread,
// the calls the parent judges: one "name=errno" line each.
func filterChild() {
	runtime.LockOSThread()
	prog, err := Default()
	if err != nil {
		fmt.Println("error=", err)
		return
	}
	insts := make([]unix.SockFilter, len(prog)/8)
	for i := range insts {
		b := prog[i*8:]
		insts[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(len(insts)), Filter: &insts[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("nnp=", err)
		return
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fmt.Println("install=", e)
		return
	}
	show := func(name string, e unix.Errno) { fmt.Printf("%s=%d\n", name, int(e)) }
	var lim unix.Rlimit
	_, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&lim)), 0, 0)
	show("prlimit_self_read", e)
	_, _, e = unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	show("prlimit_self_set", e)
	// The parent's own limit, set to what it is: refused before the kernel
	// would look at it.
	_, _, e = unix.RawSyscall6(unix.SYS_PRLIMIT64, uintptr(os.Getppid()), unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	show("prlimit_parent_set", e)
	_, _, e = unix.RawSyscall6(unix.SYS_PRLIMIT64, uintptr(os.Getppid()), unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&lim)), 0, 0)
	show("prlimit_parent_read", e)
	prio, _, _ := unix.RawSyscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, uintptr(os.Getppid()), 0)
	_, _, e = unix.RawSyscall(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, uintptr(os.Getppid()), 20-prio)
	show("setpriority_parent", e)
	_, _, e = unix.RawSyscall(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, 20-prio)
	show("setpriority_self", e)
	_, _, e = unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	show("unshare_user", e)
	_, _, e = unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd), 0)
	show("keyctl", e)
	_, _, e = unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
	show("clone3", e)
	_, _, e = unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
	show("getpid", e)
}

// The built filter, installed for real on a thread of a child process:
// the calls a job must not make fail with EPERM (clone3 with ENOSYS), the
// ones it needs work.
func TestFilterOnTheKernel(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		filterChild()
		return
	}
	if _, err := Default(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFilterOnTheKernel$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	eperm, enosys := fmt.Sprint(int(unix.EPERM)), fmt.Sprint(int(unix.ENOSYS))
	want := map[string]string{
		"prlimit_self_read": "0", "prlimit_self_set": "0", "prlimit_parent_set": eperm, "prlimit_parent_read": "0",
		"setpriority_parent": eperm, "setpriority_self": "0", "unshare_user": eperm, "keyctl": eperm,
		"clone3": enosys, "getpid": "0",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: errno %q, want %s", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("child:\n%s", out)
	}
}
