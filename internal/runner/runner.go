package runner

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/proctree"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/statedir"
	"golang.org/x/sys/unix"
)

// Reasons recorded for terminal states.
const (
	ReasonExited      = "exited"
	ReasonSignal      = "signal"
	ReasonTerminate   = "terminate_request"
	ReasonDelete      = "delete_request" // a forced delete ended the job
	ReasonMaxRuntime  = "max_job_runtime"
	ReasonMaxOutput   = "max_output_bytes"
	ReasonOOM         = "oom_killed"
	ReasonStartFailed = "start_failed"
	ReasonSetupFailed = "setup_failed" // isolation or setup refused to run the job (exit 125)
	ReasonExecFailed  = "exec_failed"  // the program could not be executed (126, 127)
	ReasonRunnerLost  = "runner_lost"
	// ReasonOutputFailed: output could not be written (disk full, I/O
	// error); the job ran to its end, the rest of its output was dropped.
	ReasonOutputFailed = "output_write_failed"
	ReasonStartupLost  = "runner_never_started"
)

const (
	// exitAckTimeout bounds how long a finished runner waits for the server
	// to confirm it recorded the exit before recording it itself.
	exitAckTimeout = 3 * time.Second
	// ptyQuiet: once the job's process has exited, a terminal still held
	// open by a background process is read until it has been quiet this
	// long. Without a holder the terminal reports end of file at once, so
	// this costs nothing on the ordinary path.
	ptyQuiet = 100 * time.Millisecond
	// ptyDrainMax caps that drain for a holder that never stops writing.
	ptyDrainMax = 2 * time.Second
	// limitGrace is the grace a limit (runtime, output) gives before SIGKILL.
	limitGrace = 5 * time.Second
	// inputQueue bounds queued input writes to a terminal that is not read.
	inputQueue = 64
)

// Runner supervises one job.
type Runner struct {
	spec *Spec
	log  *logger

	ln *proto.Listener

	mu          sync.Mutex
	conns       map[*proto.Conn]struct{}
	sockConn    *proto.Conn // the one admitted through the socket file
	outErr      error       // why output stopped being written (disk full…)
	pid         int
	pgid        int    // the job's process group
	limits      string // JSON of the limits applied (AppliedLimits)
	startedAt   time.Time
	isolation   string
	exit        *proto.Msg // set once the job is done and drained
	terminating string     // reason of a requested or limit-driven end
	ladder      chan struct{}

	size      atomic.Int64
	errSize   atomic.Int64 // stderr.log's size (stdio jobs), announced with size
	rawSize   atomic.Int64 // the terminal's raw bytes, once attached (raw.go), announced with size
	rawAsked  atomic.Int64 // unix ns of the last raw request served (raw.go: inlining)
	sizeCh    chan struct{}
	pauseCh   chan struct{} // growth after a pause: no gap is waited for it (output.go)
	lastWrite atomic.Int64  // unix ns of the last output write
	// lastGrowth (unix ns): for sendSizes's pacing (growth after
	// sizeEventQuiet without any leaves a token on pauseCh).
	lastGrowth atomic.Int64
	// sizeGap: sizeEventGap when zero (a test's longer gap tells pacing
	// from the scheduler's wake-ups).
	sizeGap time.Duration
	done    chan struct{} // closed when exit is set
	// startDone is closed once the start is over: the job's process
	// exists, or it never will (a start failure). A terminate that comes
	// while the job starts runs its ladder only then (ladder.go).
	startDone chan struct{}
	exitAck   chan struct{}
	ackOnce   sync.Once

	tracker      proctree.Tracker // set under rmu (the reaper reads it)
	cgroupPath   string           // the job's cgroup directory, when it has one
	cgroupFD     int              // the job's cgroup directory, open for clone into it (-1: none)
	direct       bool             // the job starts as a child of ours, with no stage (launchDirect)
	stageLater   bool             // prestart failed only to start the stage: it is tried again for the job
	launchReason string           // why a job that never started ended
	stage        *isolation.Stage // the process that becomes the job (prestart)
	stageBin     string           // the stage's binary beside the runner's, for errors ("": the runner's own)
	cwdHandle    *os.File         // the job's cwd and HOME, opened by the server
	homeHandle   *os.File
	jobDir       *statedir.Dir // the job's directory: its files are made beneath it
	jobFDs       []int
	master       *os.File    // pty mode
	masterClosed atomic.Bool // the drain closed master (start.go)
	cols, rows   int         // pty mode: the terminal's size now (the spec's, then each resize's), under mu
	resizeMu     sync.Mutex
	ptyMaster    *os.File // the terminal made ahead (openTerminal)
	ptySlave     *os.File
	pumpDone     chan struct{} // closed when all output is on disk
	screen       *screenFeed   // pty: the job's screen (screen.go), set under mu
	screenStart  screenStarter // starts its screen process (nil: startScreenProc; tests set one)
	inputCh      chan termInput
	iw           inputWait // input-wait (inputwait.go)

	// stdio jobs with a stdin pipe (stdin.go): the runner's end (nil once
	// closed) and whether the job's main process ended, under mu; the
	// writer's queue.
	stdinW     *os.File
	stdinEnded bool
	stdinCh    chan stdinReq
	stdinReady chan struct{} // closed once the job runs with its pipe
	stdinBusy  sync.Mutex    // held while one input is written and acked

	// serverID is our server's identity (statedir.ServerIDFile): it
	// names the job's cgroup, and the sweep takes only its groups.
	serverID string

	// the cgroup limits asked of prestart, and what the tracker applied
	limitOpts proctree.Options
	limitInfo proctree.Info

	// reaper state
	rmu       sync.Mutex
	mainPID   int
	early     map[int]unix.WaitStatus
	mainState chan unix.WaitStatus
	// helpers are children the runner waits for itself (runHelper): the
	// reaper hands their status over instead of dropping it.
	helpers map[int]chan unix.WaitStatus
}

// Main runs the runner's command line and returns its exit status.
//
//	shellctl-runner --state-dir DIR --ctl-fd N [--job-id ID] [--memory-max BYTES] [--pids-max N] [--no-cgroup]
//
// The runner starts its job's process group (a cgroup where the machine has
// one) at once, then waits on the control channel
// for an assign message carrying the job's spec. The server keeps a few
// runners started this way ahead of need (a job's start then costs no
// process start-up), and starts one on demand when none is ready; both take
// the same path. --job-id only names the job in the runner's arguments (for
// ps): a warm runner is started with a placeholder that the id replaces.
func Main(args []string) int {
	tuneRuntime()
	var stateDir string
	ctlFD := -1
	var opts proctree.Options
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch a := args[i]; a {
		case "--state-dir":
			stateDir = next()
		case "--job-id":
			next()
		case "--ctl-fd", "--memory-max", "--pids-max":
			v := next()
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				fmt.Fprintf(os.Stderr, "shellctl-runner: %s %q is not a non-negative number\n", a, v)
				return 2
			}
			switch a {
			case "--ctl-fd":
				ctlFD = int(n)
			case "--memory-max":
				opts.MemoryMax = n
			case "--pids-max":
				opts.PidsMax = n
			}
		case "--no-cgroup":
			opts.DisableCgroup = true
		default:
			fmt.Fprintf(os.Stderr, "shellctl-runner: unknown argument %q\n", a)
			return 2
		}
	}
	if stateDir == "" || ctlFD < 0 {
		fmt.Fprintln(os.Stderr, "usage: shellctl-runner --state-dir DIR --ctl-fd N [--job-id ID] [--memory-max BYTES] [--pids-max N] [--no-cgroup]")
		return 2
	}
	// No job may read the runner's memory or descriptors through /proc or
	// ptrace, whatever its uid: not dumpable from here on.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	log := newLogger(os.Stderr)
	// Nothing the runner holds may reach the job it forks: the control
	// channel it inherited (fd 3, not close-on-exec) least of all.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		log.Error("mark descriptors close-on-exec", "err", err)
		return 1
	}
	ctl, err := proto.FileConn(ctlFD)
	if err != nil {
		log.Error("control channel", "err", err)
		return 1
	}
	sid, err := statedir.ReadServerID(stateDir)
	if err != nil {
		// A group named after no server is never swept by one: harmless
		// but for the empty group a killed runner would leave.
		log.Warn("no server id: the job's cgroup is named without it", "err", err)
		sid = noServerID
	}
	r := &Runner{
		log:       log,
		conns:     map[*proto.Conn]struct{}{},
		sizeCh:    make(chan struct{}, 1),
		pauseCh:   make(chan struct{}, 1),
		done:      make(chan struct{}),
		startDone: make(chan struct{}),
		exitAck:   make(chan struct{}),
		inputCh:   make(chan termInput, inputQueue),
		early:     map[int]unix.WaitStatus{},
		mainState: make(chan unix.WaitStatus, 1),
		cgroupFD:  -1,
		direct:    startsDirectly(),
		serverID:  sid,
	}
	// SIGCHLD must be watched before the first child exists.
	sigCh := make(chan os.Signal, 16)
	signal.Notify(sigCh, unix.SIGCHLD)
	// The runner lives in its own session; a hangup or a stray SIGPIPE
	// must not end it. Nor may any signal a terminal sends its foreground
	// group (^C, ^\, ^Z, a background read or write): a pty job shares
	// the runner's session and chooses its terminal's foreground, so it can
	// hand the foreground to the runner's group (tcsetpgrp) and then type
	// ^C at itself (TIOCSTI), or wait for the agent's C-c; the runner must
	// not die of that (the job would be lost) nor stop. Nothing the runner
	// does to the job's processes goes by that group either (SignalGroup).
	// They are caught and dropped rather than ignored: an ignored signal
	// stays ignored across exec, and the job must start with every signal
	// at its default.
	drop := make(chan os.Signal, 4)
	signal.Notify(drop, unix.SIGHUP, unix.SIGPIPE, unix.SIGINT, unix.SIGQUIT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	go func() {
		for range drop {
		}
	}()
	// Signals ignored by whoever started the server would stay ignored
	// in every job.
	isolation.ResetIgnoredSignals()
	go r.reap(sigCh)
	prepErr := r.prestart(opts)
	spec, err := r.awaitAssign(ctl)
	if err != nil {
		// The server went away before it needed us: leave quietly.
		// The stage made for a job that never came has nothing to do:
		// it goes at once, not after its runtime has started and read
		// the end of its channel.
		r.dropStage()
		r.closeTracker()
		return 0
	}
	r.spec = spec
	showJobID(spec.ID)
	r.log = log.With("job", spec.ID)
	r.prepareStdin() // stdin.go: before the first input can come
	r.addConn(ctl)
	if prepErr != nil && r.stageLater {
		// No stage could be started ahead (no pid was free then: a fork
		// storm beside it): one is started now, for the job.
		if err := r.startStage(); err != nil {
			prepErr = fmt.Errorf("%w (and again when the job came: %v)", prepErr, err)
		} else {
			r.log.Warn("the job's stage was started when the job came", "err_ahead", prepErr)
			prepErr = nil
		}
	}
	if prepErr != nil {
		r.finishFailed(prepErr)
		// What prestart made before it failed (the job's cgroup, a
		// stage) goes with it.
		r.dropStage()
		r.closeTracker()
		return 1
	}
	return r.run()
}

// tuneRuntime sets the Go runtime up for a runner: one P. A runner's work
// is a few goroutines that wait on descriptors; a second P makes the
// runtime spin up threads to look for work on it, run idle GC workers on
// it, and the TLB shootdowns of every unmapping and of the exit then reach
// each of those threads (with one P: about 2 ms less CPU per `echo hi`
// job, all processes counted). The server starts runners with
// GOMAXPROCS=1 in their environment, so they have one P from their first
// instruction; this covers a runner started without it. A job that floods
// its output gets the runtime's usual Ps back (busyOutput).
func tuneRuntime() {
	runtime.GOMAXPROCS(1)
}

// usualProcsOnce gives a runner whose job writes more than busyOutput the
// runtime's own choice of Ps (its default: the CPUs it may use, whatever
// GOMAXPROCS its environment says): its terminal's pump and screen, or its
// pipes' copies, then run side by side.
var usualProcsOnce sync.Once

// busyOutput is the output after which a runner gets the usual Ps.
const busyOutput = 1 << 20

// outputBusy gives the runner its usual Ps once its job's output passed
// busyOutput.
func outputBusy(size int64) {
	if size > busyOutput {
		usualProcsOnce.Do(runtime.SetDefaultGOMAXPROCS)
	}
}

// PoolPlaceholder stands for the job id in a warm runner's arguments until
// it gets its job; then the id is written over it, so `ps` and
// /proc/<pid>/cmdline name the job a runner serves.
const PoolPlaceholder = "________________"

// showJobID writes id over the placeholder argument. Go's os.Args strings
// share the process's argument memory, which /proc/<pid>/cmdline reads.
func showJobID(id string) {
	for _, a := range os.Args {
		if a == PoolPlaceholder && len(id) == len(a) {
			copy(unsafe.Slice(unsafe.StringData(a), len(a)), id)
			return
		}
	}
}

// prestart makes the job's process group — a cgroup where the machine has
// one — before the job is known, and keeps its directory open so the job is
// born inside it (clone into the cgroup): moving a running process into a
// cgroup waits for the kernel's RCU machinery, milliseconds that would
// otherwise sit on the path of every job.
func (r *Runner) prestart(opts proctree.Options) error {
	// Named after our server (so it sweeps only its own runners' groups,
	// never another server's), unique among its live runners by the pid,
	// and against a group left by a dead runner of the same pid by the time.
	opts.Name = groupName(r.serverID, os.Getpid(), time.Now())
	// NewTracker also makes the runner the child subreaper of everything
	// its job starts, so orphans of the tree stay visible to it (and are
	// reaped by it).
	tr, info, err := proctree.NewTracker(opts)
	if err != nil {
		return fmt.Errorf("track process tree: %w", err)
	}
	r.limitOpts, r.limitInfo = opts, info
	if (opts.MemoryMax > 0 && !info.MemoryLimitApplied) || (opts.PidsMax > 0 && !info.PidsLimitApplied) {
		r.log.Warn("job limits not applied", "kind", info.Kind, "memory_applied", info.MemoryLimitApplied,
			"pids_applied", info.PidsLimitApplied, "why", info.Why)
	}
	r.rmu.Lock()
	r.tracker = tr
	if info.Kind == proctree.KindCgroup2 {
		r.cgroupPath = info.Path
	}
	r.rmu.Unlock()
	if proctree.NeedSpareThreads(info.Kind, info.PidsLimitApplied) {
		// What the job forks counts against a pids limit of the runner's
		// too (a container's): a fork storm could leave it no thread to
		// make (proctree/reserve.go).
		proctree.ReserveThreads(proctree.RunnerThreads)
	}
	if fd, err := proctree.OpenCgroupFD(tr); err == nil {
		r.cgroupFD = fd
	}
	if err := r.openTerminal(); err != nil {
		return err
	}
	if r.direct {
		return nil // the job's process is made when the job comes (launchDirect)
	}
	if err := r.startStage(); err != nil {
		r.stageLater = true // all else is ready: the stage is tried again for the job
		return fmt.Errorf("start the job's stage: %w", err)
	}
	return nil
}

// JobStartEnv, in a runner's environment, says how it starts its job:
// JobStartStage through a stage process; anything else (unset) directly
// where the build can (isolation.DirectSupported), through a stage
// elsewhere. shellctl serve --job-start sets it.
const (
	JobStartEnv   = "SHELLCTL_JOB_START"
	JobStartStage = "stage"
)

// startsDirectly reports whether this runner starts its job directly.
func startsDirectly() bool {
	return isolation.DirectSupported && os.Getenv(JobStartEnv) != JobStartStage
}

// awaitAssign waits on the control channel for the job to run.
func (r *Runner) awaitAssign(ctl *proto.Conn) (*Spec, error) {
	type got struct {
		m   *proto.Msg
		err error
	}
	ch := make(chan got, 1)
	go func() {
		// The job's directory, cwd and HOME come first, as handles the
		// server opened and checked (proto.SendWithFDs).
		fds, err := ctl.RecvFDs(3)
		if err != nil {
			ch <- got{nil, err}
			return
		}
		r.jobFDs = fds
		m, err := ctl.Recv()
		ch <- got{m, err}
	}()
	g := <-ch
	if g.err != nil {
		return nil, g.err
	}
	if g.m.T != proto.TAssign {
		return nil, fmt.Errorf("expected %s, got %s", proto.TAssign, g.m.T)
	}
	spec, err := decodeSpec(g.m.Spec)
	if err != nil {
		return nil, fmt.Errorf("decode assigned spec: %w", err)
	}
	r.jobDir = statedir.FromFD(r.jobFDs[0], spec.Dir)
	r.cwdHandle = os.NewFile(uintptr(r.jobFDs[1]), spec.Cwd)
	r.homeHandle = os.NewFile(uintptr(r.jobFDs[2]), spec.Home)
	return spec, nil
}

func (r *Runner) run() int {
	s := r.spec
	go r.sendSizes()
	err := r.start()
	close(r.startDone)
	if err != nil {
		r.finishFailed(err)
		r.closeTracker()
		return 1
	}
	// The control socket is for a server that comes later (after a
	// restart); made once the job is on its way, as every file made on the
	// path of a job's start is felt by every job — and after what the
	// job's end waits for: the runner runs on one P, and this goroutine
	// lets the copy of the output and the reaper run first.
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		runtime.Gosched()
		ln, err := proto.Listen(s.Dir, SocketFile)
		if err != nil {
			r.log.Error("control socket: a restarted server will not find this job", "err", err)
			return
		}
		r.ln = ln
		go r.accept()
	}()
	r.waitAndFinish()
	<-listening
	if r.ln != nil {
		os.Remove(filepath.Join(s.Dir, SocketFile))
	}
	r.endScreen() // screen.go
	r.closeTracker()
	return 0
}

// reap collects every child: the job's process, and as child subreaper the
// orphans of its tree, so none of them lingers as a zombie.
func (r *Runner) reap(sigCh chan os.Signal) {
	for range sigCh {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			r.rmu.Lock()
			if ch, ok := r.helpers[pid]; ok {
				delete(r.helpers, pid)
				ch <- ws
			} else {
				switch {
				case r.mainPID == 0:
					r.early[pid] = ws
				case pid == r.mainPID:
					r.mainState <- ws
					// Delivered once: a later child given the same pid is
					// not the job's main process.
					r.mainPID = -1
				}
			}
			tr := r.tracker
			r.rmu.Unlock()
			if tr != nil {
				tr.Notify()
			}
			r.iw.event() // input-wait: a child's end may change the foreground
		}
	}
}

func (r *Runner) setMainPID(pid int) {
	r.rmu.Lock()
	r.mainPID = pid
	if ws, ok := r.early[pid]; ok {
		r.mainState <- ws
	}
	r.early = nil
	r.rmu.Unlock()
}
