package seccomp

import (
	"encoding/binary"
	"runtime"
	"testing"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Audit architectures of the foreign tables a job could call into.
const (
	auditArchI386 = 0x40000003
	auditArchARM  = 0x40000028
)

// call is one system call as a filter sees it.
type call struct {
	name string
	nr   uint32 // when name is ""
	arch uint32 // 0: the filter's own
	args [6]uint64
}

// seccompData lays out struct seccomp_data for x/net/bpf's VM, which loads
// 32-bit words big-endian: each word sits where a little-endian kernel
// puts it, so the filter's loads of an argument's low and high halves read
// what the kernel's would.
func seccompData(nr, archID uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], archID)
	for i, a := range args {
		off := 16 + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32))
	}
	return b
}

var (
	allow  = uint32(libseccomp.ActionAllow)
	eperm  = uint32(libseccomp.ActionErrno) | uint32(unix.EPERM)
	enosys = uint32(libseccomp.ActionErrno) | uint32(unix.ENOSYS)
	kill   = uint32(libseccomp.ActionKillProcess)
)

// The filter of each architecture, run on the calls a job makes: what is
// refused, what is allowed, what kills.
func TestFilterDecisions(t *testing.T) {
	const self, other = 0, 4242
	cases := []struct {
		c    call
		want uint32
	}{
		{call{name: "getpid"}, allow},
		{call{name: "openat"}, allow},
		{call{name: "execve"}, allow},
		{call{name: "keyctl"}, eperm},
		{call{name: "add_key"}, eperm},
		{call{name: "request_key"}, eperm},
		{call{name: "bpf"}, eperm},
		{call{name: "perf_event_open"}, eperm},
		{call{name: "userfaultfd"}, eperm},
		{call{name: "mount"}, eperm},
		{call{name: "umount2"}, eperm},
		{call{name: "pivot_root"}, eperm},
		{call{name: "setns"}, eperm},
		{call{name: "init_module"}, eperm},
		{call{name: "finit_module"}, eperm},
		{call{name: "delete_module"}, eperm},
		{call{name: "kexec_load"}, eperm},
		{call{name: "kexec_file_load"}, eperm},
		{call{name: "reboot"}, eperm},
		{call{name: "swapon"}, eperm},
		{call{name: "swapoff"}, eperm},
		{call{name: "acct"}, eperm},
		{call{name: "settimeofday"}, eperm},
		{call{name: "clock_settime"}, eperm},
		{call{name: "clock_adjtime"}, eperm},
		{call{name: "sethostname"}, eperm},
		{call{name: "open_by_handle_at"}, eperm},
		{call{name: "io_uring_setup"}, eperm},
		{call{name: "clone3"}, enosys},
		// clone: a thread or a process, yes; a new namespace, no.
		{call{name: "clone", args: [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND | unix.CLONE_FS | unix.CLONE_FILES}}, allow},
		{call{name: "clone", args: [6]uint64{uint64(unix.SIGCHLD)}}, allow},
		{call{name: "clone", args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}}, eperm},
		{call{name: "clone", args: [6]uint64{unix.CLONE_NEWNET}}, eperm},
		{call{name: "clone", args: [6]uint64{unix.CLONE_NEWNS}}, eperm},
		{call{name: "clone", args: [6]uint64{unix.CLONE_NEWPID}}, eperm},
		{call{name: "unshare", args: [6]uint64{unix.CLONE_NEWUSER}}, eperm},
		{call{name: "unshare", args: [6]uint64{unix.CLONE_NEWNET}}, eperm},
		{call{name: "unshare", args: [6]uint64{unix.CLONE_NEWTIME}}, eperm},
		{call{name: "unshare", args: [6]uint64{unix.CLONE_NEWUTS}}, eperm},
		{call{name: "unshare", args: [6]uint64{unix.CLONE_FILES}}, allow},
		// The resource calls: the caller (0) only.
		{call{name: "prlimit64", args: [6]uint64{self, unix.RLIMIT_CPU, 0x1000, 0}}, allow},
		{call{name: "prlimit64", args: [6]uint64{other, unix.RLIMIT_CPU, 0x1000, 0}}, eperm},
		{call{name: "prlimit64", args: [6]uint64{1 << 32, unix.RLIMIT_CPU, 0x1000, 0}}, eperm},
		{call{name: "prlimit64", args: [6]uint64{other, unix.RLIMIT_CPU, 0, 0x1000}}, allow}, // reads only
		{call{name: "setpriority", args: [6]uint64{prioProcess, self, 5}}, allow},
		{call{name: "setpriority", args: [6]uint64{prioProcess, other, 5}}, eperm},
		{call{name: "setpriority", args: [6]uint64{1 /* PRIO_PGRP */, self, 5}}, eperm},
		{call{name: "setpriority", args: [6]uint64{2 /* PRIO_USER */, self, 5}}, eperm},
		{call{name: "ioprio_set", args: [6]uint64{ioprioWhoProcess, self, 0}}, allow},
		{call{name: "ioprio_set", args: [6]uint64{ioprioWhoProcess, other, 0}}, eperm},
		{call{name: "ioprio_set", args: [6]uint64{3 /* IOPRIO_WHO_USER */, self, 0}}, eperm},
		{call{name: "sched_setaffinity", args: [6]uint64{self}}, allow},
		{call{name: "sched_setaffinity", args: [6]uint64{other}}, eperm},
		{call{name: "sched_setscheduler", args: [6]uint64{other}}, eperm},
		{call{name: "sched_setparam", args: [6]uint64{other}}, eperm},
		{call{name: "sched_setattr", args: [6]uint64{other}}, eperm},
		{call{name: "sched_setattr", args: [6]uint64{self}}, allow},
		{call{name: "migrate_pages", args: [6]uint64{other}}, eperm},
		{call{name: "move_pages", args: [6]uint64{other}}, eperm},
		{call{name: "move_pages", args: [6]uint64{self}}, allow},
		{call{name: "process_madvise"}, eperm},
		{call{name: "getpriority", args: [6]uint64{prioProcess, other}}, allow},
	}
	// The library numbers the calls for the architecture it runs on:
	// this runs the filter of amd64 on amd64, and of arm64 on arm64.
	for _, goarch := range []string{runtime.GOARCH} {
		t.Run(goarch, func(t *testing.T) {
			info, _ := arch.GetInfo(goarch)
			insts, err := Instructions()
			if err != nil {
				t.Fatal(err)
			}
			vm, err := bpf.NewVM(insts)
			if err != nil {
				t.Fatalf("the filter is not a valid program: %v", err)
			}
			run := func(c call) uint32 {
				t.Helper()
				nr := c.nr
				if c.name != "" {
					n, ok := info.SyscallNames[c.name]
					if !ok {
						t.Fatalf("%s has no %s", goarch, c.name)
					}
					nr = uint32(n)
				}
				a := c.arch
				if a == 0 {
					a = uint32(info.ID)
				}
				got, err := vm.Run(seccompData(nr, a, c.args))
				if err != nil {
					t.Fatal(err)
				}
				return uint32(got)
			}
			for _, tc := range cases {
				if got := run(tc.c); got != tc.want {
					t.Errorf("%s%x: %#x, want %#x", tc.c.name, tc.c.args[:3], got, tc.want)
				}
			}
			// Another architecture's table is killed, whatever the call.
			for _, foreign := range []uint32{auditArchI386, auditArchARM, uint32(arch.X86_64.ID), uint32(arch.AARCH64.ID)} {
				if foreign == uint32(info.ID) {
					continue
				}
				if got := run(call{nr: 20, arch: foreign}); got != kill {
					t.Errorf("a call of audit arch %#x: %#x, want kill %#x", foreign, got, kill)
				}
			}
			if goarch == "amd64" {
				// x32: the x86-64 audit arch with the x32 bit on the number.
				if got := run(call{nr: x32SyscallBit | 39}); got != kill {
					t.Errorf("an x32 getpid: %#x, want kill", got)
				}
			}
		})
	}
}

// Every name the filter exists for is a call both architectures have, or
// it is refused nowhere: the lists cannot shrink unseen on one of them.
func TestFilterNamesExistOnBothArches(t *testing.T) {
	must := []string{"setns", "mount", "umount2", "pivot_root", "bpf", "perf_event_open", "userfaultfd",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "add_key", "keyctl",
		"request_key", "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "open_by_handle_at"}
	for _, info := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		got := map[string]bool{}
		for _, n := range Names(info, Denied) {
			got[n] = true
		}
		for _, n := range must {
			if !got[n] {
				t.Errorf("%s: %s is not refused", info.Name, n)
			}
		}
		if len(Names(info, SelfOnly)) != len(SelfOnly) {
			t.Errorf("%s: resource calls missing: %v of %v", info.Name, Names(info, SelfOnly), SelfOnly)
		}
	}
}

func TestDefaultIsWholeInstructions(t *testing.T) {
	b, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	insts, _ := Instructions()
	if len(b) != 8*len(insts) || len(insts) > 4096 {
		t.Fatalf("Default: %d bytes for %d instructions", len(b), len(insts))
	}
}

// The search tree decides every call exactly as the library's own program
// of the same groups (one comparison after another) does: every number of
// the table and past it, with arguments that hold and that do not hold
// each condition.
func TestSearchTreeIsTheLibrarysPolicy(t *testing.T) {
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		t.Skip(err)
	}
	ref := libseccomp.Policy{DefaultAction: libseccomp.ActionAllow, Syscalls: policyGroups(info)}
	refInsts, err := ref.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := Instructions()
	if err != nil {
		t.Fatal(err)
	}
	refVM, err := bpf.NewVM(refInsts)
	if err != nil {
		t.Fatal(err)
	}
	ourVM, err := bpf.NewVM(ours)
	if err != nil {
		t.Fatal(err)
	}
	argSets := [][6]uint64{
		{}, {1}, {4242}, {0, 1}, {0, 4242}, {1, 0}, {1, 4242}, {2, 0}, {3, 0}, {0, 0, 1}, {4242, 0, 0x1000},
		{4242, 1, 0}, {1 << 32}, {0, 1 << 32}, {unix.CLONE_NEWUSER}, {unix.CLONE_NEWNET | uint64(unix.SIGCHLD)},
		{unix.CLONE_NEWTIME}, {uint64(unix.SIGCHLD)}, {unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND},
		{^uint64(0), ^uint64(0), ^uint64(0)}, {0x110}, {0x1b3},
	}
	n := 0
	for nr := uint32(0); nr < 1024; nr++ {
		for _, args := range argSets {
			d := seccompData(nr, uint32(info.ID), args)
			want, err1 := refVM.Run(d)
			got, err2 := ourVM.Run(d)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if info == arch.X86_64 && nr == 56 && args[0] == 0x1b3 && want == int(enosys) && got == int(allow) {
				// The library's program compares the next number with
				// what its conditions left in the accumulator: clone
				// with flags 0x1b3 (clone3's number) reads as clone3
				// there. The tree never compares a number again.
				continue
			}
			if got != want {
				t.Errorf("call %d (%s) with %x: %#x, the library's program says %#x", nr, info.SyscallNumbers[int(nr)], args[:3], got, want)
			}
			n++
		}
	}
	t.Logf("%d decisions compared; %d instructions, the library's %d", n, len(ours), len(refInsts))
}
