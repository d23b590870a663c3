package isolation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"syscall"

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
	case "threads":
		return probeThreads(args[1], args[2])
	case "start-on-main":
		// TestMain runs on the main thread (init locks it there).
		devNull, _ := os.Open(os.DevNull)
		st := startOnThisThread(&JobConfig{Argv: []string{"/bin/true"}, Cwd: "/", Policy: Policy{}}, [3]*os.File{devNull, devNull, devNull})
		fmt.Printf("pid=%d code=%d err=%v\n", st.PID, st.Code, st.Err)
		return 0
	}
	return 2
}

type threadsReport struct {
	Threads    int    `json:"threads"`
	Distinct   int    `json:"distinct"`
	MainDenied bool   `json:"main_denied"`
	Denied     []bool `json:"denied"`
	Error      string `json:"error,omitempty"`
}

// probeThreads starts goroutines locked to their own OS threads, confines
// the main thread, then has every thread try to read a file outside the
// rules: only the main thread may be refused.
func probeThreads(deniedFile, allowedDir string) int {
	const n = 6
	runtime.LockOSThread()
	ready := make(chan int)
	start := make(chan struct{})
	type res struct{ denied bool }
	results := make(chan res)
	for range n {
		go func() {
			runtime.LockOSThread()
			ready <- unix.Gettid()
			<-start
			_, err := os.ReadFile(deniedFile)
			results <- res{denied: errors.Is(err, fs.ErrPermission)}
		}()
	}
	tids := map[int]bool{unix.Gettid(): true}
	for range n {
		tids[<-ready] = true
	}
	var rep threadsReport
	_, err := applyLandlock(&JobConfig{Cwd: allowedDir, Policy: DefaultPolicy()})
	if err != nil {
		rep.Error = err.Error()
	}
	rep.Threads = n + 1
	rep.Distinct = len(tids)
	_, err = os.ReadFile(deniedFile)
	rep.MainDenied = errors.Is(err, fs.ErrPermission)
	close(start)
	for range n {
		rep.Denied = append(rep.Denied, (<-results).denied)
	}
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// startOnThisThread runs start on the calling thread (probes only).
func startOnThisThread(cfg *JobConfig, stdio [3]*os.File) Started {
	return start(cfg, stdio, &syscall.SysProcAttr{})
}
