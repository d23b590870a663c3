// Package seccomp builds the seccomp filter every job runs under: the
// second wall after Landlock. It refuses, with EPERM, what Docker's default
// profile refuses a container without CAP_SYS_ADMIN (namespaces, mounts,
// keyrings, BPF, perf events, userfaultfd, module loading, kexec, reboot,
// clock changes, swap, handles to files by number, io_uring), lets the
// calls that change a process's resources (limits, priority, CPU and
// memory placement) name only the caller, and kills a process that makes a
// system call of another architecture's table.
//
// The server builds the program once, at its start (Default), with
// github.com/elastic/go-seccomp-bpf (the policy's groups, the jumps, the
// argument comparisons of 64-bit values with 32-bit BPF); the runner and
// the stage only hand the finished instructions to the kernel, so neither
// links this package nor its tables.
package seccomp

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Denied are refused with EPERM whatever their arguments: they reconfigure
// the machine (or need CAP_SYS_ADMIN, which no job keeps), open a way
// around the walls (namespaces, handles by number, io_uring's requests,
// which no filter sees), or reach into the kernel (BPF, perf events,
// userfaultfd, keyrings). A name this architecture does not have is left
// out (Names).
var Denied = []string{
	// namespaces and mounts
	"setns", "mount", "umount", "umount2", "pivot_root", "mount_setattr",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
	// the kernel itself
	"bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module", "create_module",
	"get_kernel_syms", "query_module", "reboot", "swapon", "swapoff", "acct",
	"syslog", "iopl", "ioperm", "lookup_dcookie", "nfsservctl", "_sysctl",
	"sysfs", "ustat", "uselib", "quotactl", "quotactl_fd", "vhangup",
	"fanotify_init",
	// keyrings
	"add_key", "keyctl", "request_key",
	// the machine's clock and names
	"settimeofday", "clock_settime", "clock_adjtime", "stime",
	"sethostname", "setdomainname",
	// files by handle, past every path rule (name_to_handle_at, which only
	// makes a handle and tells a mount's id, stays: util-linux and systemd
	// tools use it)
	"open_by_handle_at",
	// io_uring: its requests are not system calls a filter sees
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// another process's memory advice by pidfd (the filter cannot tell a
	// pidfd of the caller from another's)
	"process_madvise",
}

// Namespace flags of clone and unshare (CLONE_NEWNS, CLONE_NEWCGROUP,
// CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET;
// and CLONE_NEWTIME, which only unshare takes: for clone that bit is part
// of the exit signal).
const (
	cloneNamespaces   = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	unshareNamespaces = cloneNamespaces | unix.CLONE_NEWTIME
)

// SelfOnly are the resource calls allowed only on the caller: the first
// argument is a pid, and 0 (the caller) is the only one allowed. So a job
// cannot set RLIMIT_CPU 0 on the server (the kernel then kills it) or
// renice another job's runner, while `ulimit`, `nice cmd`, `taskset cmd`
// and `prlimit --cpu=10 cmd` (which all name pid 0) still work. (A job's
// own pid, given as a number, is refused too: the filter cannot know it.)
// prlimit64 that only reads (no new limit) may name any process.
var SelfOnly = []string{
	"prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
	"sched_setattr", "migrate_pages", "move_pages",
}

// Values of the "which" argument of setpriority and ioprio_set that name
// one process (then "who" 0 is the caller).
const (
	prioProcess      = 0 // PRIO_PROCESS
	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS
)

// x32SyscallBit marks a system call of the x32 ABI on x86-64: the same
// audit architecture as x86-64, another table (__X32_SYSCALL_BIT).
const x32SyscallBit = 0x40000000

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
)

// Default is the job's filter for this machine's architecture (amd64 or
// arm64), as raw struct sock_filter instructions in the machine's byte
// order: what the runner hands to seccomp(SECCOMP_SET_MODE_FILTER).
func Default() ([]byte, error) {
	insts, err := Instructions()
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("assemble the job's seccomp filter: %w", err)
	}
	b := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		b = binary.NativeEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.NativeEndian.AppendUint32(b, r.K)
	}
	return b, nil
}

// policyGroups are the filter's calls, conditions and actions for info's
// table, in the library's terms.
func policyGroups(info *arch.Info) []libseccomp.SyscallGroup {
	names := Names(info, Denied)
	pid0 := func(name string) libseccomp.NameWithConditions {
		c := libseccomp.ArgumentConditions{{Argument: 0, Operation: libseccomp.NotEqual, Value: 0}}
		if name == "prlimit64" {
			// prlimit64(pid, resource, new, old): only a new limit counts.
			c = append(c, libseccomp.Condition{Argument: 2, Operation: libseccomp.NotEqual, Value: 0})
		}
		return libseccomp.NameWithConditions{Name: name, Conditions: c}
	}
	var selfOnly []libseccomp.NameWithConditions
	for _, n := range Names(info, SelfOnly) {
		selfOnly = append(selfOnly, pid0(n))
	}
	// setpriority(which, who, prio) and ioprio_set(which, who, ioprio):
	// refused unless which names a process and who is 0 (two condition
	// sets of one name: either refuses).
	for _, c := range []struct {
		name  string
		which uint64
	}{{"setpriority", prioProcess}, {"ioprio_set", ioprioWhoProcess}} {
		selfOnly = append(selfOnly,
			libseccomp.NameWithConditions{Name: c.name, Conditions: libseccomp.ArgumentConditions{
				{Argument: 0, Operation: libseccomp.NotEqual, Value: c.which},
			}},
			libseccomp.NameWithConditions{Name: c.name, Conditions: libseccomp.ArgumentConditions{
				{Argument: 1, Operation: libseccomp.NotEqual, Value: 0},
			}})
	}
	// clone's flags are its first argument on both architectures.
	namespaces := []libseccomp.NameWithConditions{
		{Name: "clone", Conditions: libseccomp.ArgumentConditions{{Argument: 0, Operation: libseccomp.BitsSet, Value: cloneNamespaces}}},
		{Name: "unshare", Conditions: libseccomp.ArgumentConditions{{Argument: 0, Operation: libseccomp.BitsSet, Value: unshareNamespaces}}},
	}
	return []libseccomp.SyscallGroup{
		{Action: libseccomp.ActionErrno, Names: names},
		{Action: libseccomp.ActionErrno, NamesWithCondtions: selfOnly},
		{Action: libseccomp.ActionErrno, NamesWithCondtions: namespaces},
		{Action: libseccomp.ActionErrno | libseccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
	}
}

// Instructions is the filter for the architecture this program was built
// for (amd64 or arm64: the library numbers the calls from its table for
// runtime.GOARCH): a system call of another architecture (i386 through
// int 0x80, x32, arm32) kills the process; clone3 answers ENOSYS (its
// flags are in memory, which a filter cannot read: the C library then
// falls back to clone, whose flags are checked); the rest as the package
// says. Anything else is allowed.
func Instructions() ([]bpf.Instruction, error) {
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil || (info != arch.X86_64 && info != arch.AARCH64) {
		return nil, fmt.Errorf("the job's seccomp filter is built for amd64 and arm64, not %s: start the server with --job-seccomp=off", runtime.GOARCH)
	}
	body, err := searchTree(info, policyGroups(info))
	if err != nil {
		return nil, fmt.Errorf("build the job's seccomp filter: %w", err)
	}
	// The head: another architecture's table, or x32, is a way around
	// every name above: the process is killed.
	kill := bpf.RetConstant{Val: uint32(libseccomp.ActionKillProcess)}
	head := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		kill,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if info == arch.X86_64 {
		head = append(head,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			kill,
		)
	}
	insts := append(head, body...)
	if len(insts) > maxShortProgram {
		return nil, fmt.Errorf("build the job's seccomp filter: %d instructions, more than the %d every jump can span", len(insts), maxShortProgram)
	}
	return insts, nil
}

// maxShortProgram bounds the filter so that every conditional jump in it is
// short (a BPF conditional jump skips at most 255 instructions): the
// library's rewriting of long jumps is then never needed.
const maxShortProgram = 256

// leafSize is how many calls a leaf of the search tree compares one by one.
const leafSize = 4

// searchTree assembles groups (their actions, their calls and argument
// conditions) as a binary search on the call's number, with the library's
// label assembler, rather than the library's one comparison after another
// (Policy.Assemble). The kernel runs the filter over every call number when
// it installs it, to cache the calls it always allows: that costs each job
// in proportion to the comparisons an allowed call passes through, about
// 80 one by one, 10 here. The program expects the call's number in the
// accumulator.
func searchTree(info *arch.Info, groups []libseccomp.SyscallGroup) ([]bpf.Instruction, error) {
	p := libseccomp.NewProgram()
	allow := p.NewLabel()
	type entry struct {
		call   libseccomp.SyscallWithConditions
		action libseccomp.Label
	}
	var entries []entry
	labels := map[libseccomp.Action]libseccomp.Label{}
	var actions []libseccomp.Action
	seen := map[uint32]bool{}
	for _, g := range groups {
		l, ok := labels[g.Action]
		if !ok {
			l = p.NewLabel()
			labels[g.Action] = l
			actions = append(actions, g.Action)
		}
		add := func(name string, c libseccomp.ArgumentConditions) error {
			n, ok := info.SyscallNames[name]
			if !ok {
				return fmt.Errorf("%s has no system call %s", info.Name, name)
			}
			nr := uint32(n)
			for i := range entries {
				if entries[i].call.Num == nr && c != nil && entries[i].call.Conditions != nil && entries[i].action == l {
					entries[i].call.Conditions = append(entries[i].call.Conditions, c)
					return nil
				}
			}
			if seen[nr] {
				return fmt.Errorf("%s is in the filter twice", name)
			}
			seen[nr] = true
			e := entry{call: libseccomp.SyscallWithConditions{Num: nr}, action: l}
			if c != nil {
				e.call.Conditions = []libseccomp.ArgumentConditions{c}
			}
			entries = append(entries, e)
			return nil
		}
		for _, n := range g.Names {
			if err := add(n, nil); err != nil {
				return nil, err
			}
		}
		for _, nc := range g.NamesWithCondtions {
			if err := add(nc.Name, nc.Conditions); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.call.Num, b.call.Num) })
	var tree func(es []entry)
	tree = func(es []entry) {
		if len(es) > leafSize {
			mid := len(es) / 2
			right := p.NewLabel()
			p.JmpIfTrue(bpf.JumpGreaterOrEqual, es[mid].call.Num, right)
			tree(es[:mid])
			p.SetLabel(right)
			tree(es[mid:])
			return
		}
		// Every path of a leaf ends in a jump: to an action, or to allow.
		for i, e := range es {
			last := i == len(es)-1
			next := allow
			if !last {
				next = p.NewLabel()
			}
			if len(e.call.Conditions) == 0 {
				p.JmpIf(bpf.JumpEqual, e.call.Num, e.action, next)
			} else {
				// The number matched: no other call of the tree can, so
				// conditions that do not hold allow the call (the
				// accumulator then holds an argument, never compared
				// with a number again). The library's own check of the
				// number comes first, always true here.
				cond := p.NewLabel()
				p.JmpIf(bpf.JumpEqual, e.call.Num, cond, next)
				p.SetLabel(cond)
				e.call.Assemble(&p, false, e.action, allow)
			}
			if !last {
				p.SetLabel(next)
			}
		}
	}
	tree(entries)
	for _, a := range actions {
		p.SetLabel(labels[a])
		p.Ret(a)
	}
	p.SetLabel(allow)
	p.Ret(libseccomp.ActionAllow)
	return p.Assemble()
}

// Names are those of list that info's table has (x86-64 has umount2 and
// not umount on arm64, and so on); the calls that exist nowhere on it
// cannot be made there.
func Names(info *arch.Info, list []string) []string {
	var out []string
	for _, n := range list {
		if _, ok := info.SyscallNames[n]; ok {
			out = append(out, n)
		}
	}
	return out
}
