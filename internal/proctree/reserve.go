package proctree

import (
	"os"
	"runtime"
	"sync"
)

// Threads for a fork storm.
//
// A job whose processes count against a pids limit of the runtime's own
// (a container's --pids-limit: the job's group, or the runner's
// descendants in subreaper mode, are below it) can take every pid of it.
// The Go runtime cannot go on without a thread it asked for (fatal error:
// newosproc): a runner at 7 threads that needed an 8th died and lost its
// job, and a server at 8 died with every job. So where such a limit
// applies and the job's group has none of its own, the runner and the
// server make their spare threads first (ReserveThreads), and the runtime
// takes one of those whenever it needs another.

// RunnerThreads and ServerThreads are the threads ReserveThreads brings a
// runner and the server to: a runner ran at 7 and needed an 8th, the
// server at 8 a 9th. Each is a pid the jobs cannot have in a container of
// 128, so no more than that.
const (
	RunnerThreads = 12
	ServerThreads = 16
)

// ReserveThreads makes the Go runtime hold at least total OS threads,
// idle ones kept: for each missing thread a goroutine holds a thread of its
// own (LockOSThread) until all of them run at once, then lets it go. Idle
// threads the process already has serve some of them; if the count is
// still short, a second round holds total at once, more than there can be
// idle. The runtime never ends an idle thread.
func ReserveThreads(total int) {
	threads := func() int {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return total // cannot tell: make none
		}
		return len(ents)
	}
	if n := threads(); n < total {
		holdThreads(total - n)
	}
	if threads() < total {
		holdThreads(total)
	}
}

// holdThreads has n goroutines hold a thread each, all at once.
func holdThreads(n int) {
	var all, done sync.WaitGroup
	release := make(chan struct{})
	all.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			all.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	all.Wait()
	close(release)
	done.Wait()
}

// NeedSpareThreads reports whether the jobs below this process may take
// pids the runtime needs: they are not in a group of their own (kind
// KindSubreaper), or their group has no pids limit (jobPidsLimited false)
// while a group above this process has one (SharedPidsLimit).
func NeedSpareThreads(kind string, jobPidsLimited bool) bool {
	if kind == KindSubreaper {
		return true
	}
	if jobPidsLimited {
		return false
	}
	_, _, ok := SharedPidsLimit()
	return ok
}
