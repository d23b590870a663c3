package isolation

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// runProbe runs in a child test process (see TestMain).
func runProbe(args []string) int {
	if len(args) == 0 {
		return 2
	}
	switch args[0] {
	case "connect-abstract":
		// Runs as the job, inside its domain.
		c, err := net.Dial("unix", "@"+args[1])
		if err != nil {
			fmt.Printf("connect=denied %v\n", err)
			return 0
		}
		c.Close()
		fmt.Println("connect=ok")
		return 0
	case "connect-unix":
		c, err := net.Dial("unix", args[1])
		if err != nil {
			fmt.Printf("connect=denied %v\n", err)
			return 0
		}
		c.Close()
		fmt.Println("connect=ok")
		return 0
	case "attack-parent":
		return probeAttackParent()
	}
	return 2
}

// probeAttackParent runs as the job, from its first instructions: it
// tries everything Landlock allows inside one domain — ptrace attach and
// seize, reading memory, a signal — on every thread of its parent (the
// process that started its stage) and prints how many succeeded.
func probeAttackParent() int {
	ppid := os.Getppid()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
	if err != nil {
		fmt.Printf("error=%v\n", err)
		return 0
	}
	var attach, seize, readMem, signal int
	buf := make([]byte, 8)
	for _, e := range tasks {
		var tid int
		fmt.Sscan(e.Name(), &tid)
		if unix.PtraceAttach(tid) == nil {
			attach++
			unix.PtraceDetach(tid)
		}
		if unix.PtraceSeize(tid) == nil {
			seize++
			unix.PtraceDetach(tid)
		}
		local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
		remote := []unix.RemoteIovec{{Base: uintptr(0x400000), Len: len(buf)}}
		if _, err := unix.ProcessVMReadv(ppid, local, remote, 0); err == nil || err == unix.EFAULT {
			readMem++
		}
		if unix.Tgkill(ppid, tid, 0) == nil {
			signal++
		}
	}
	fmt.Printf("threads=%d\nattach=%d\nseize=%d\nread_mem=%d\nsignal=%d\n", len(tasks), attach, seize, readMem, signal)
	return 0
}
