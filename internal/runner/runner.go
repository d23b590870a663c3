package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/jobstate"
	"github.com/shellctl/shellctl/internal/proctree"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/statedir"
)

// Reasons recorded for terminal states.
const (
	ReasonExited      = "exited"
	ReasonSignal      = "signal"
	ReasonTerminate   = "terminate_request"
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
	log  *slog.Logger

	ln *proto.Listener

	mu          sync.Mutex
	conns       map[*proto.Conn]struct{}
	sockConn    *proto.Conn // the one admitted through the socket file
	outErr      error       // why output stopped being written (disk full…)
	pid         int
	startedAt   time.Time
	isolation   string
	exit        *proto.Msg // set once the job is done and drained
	terminating string     // reason of a requested or limit-driven end
	ladder      chan struct{}

	size      atomic.Int64
	sizeCh    chan struct{}
	lastWrite atomic.Int64  // unix ns of the last output write
	done      chan struct{} // closed when exit is set
	exitAck   chan struct{}
	ackOnce   sync.Once

	tracker      proctree.Tracker // set under rmu (the reaper reads it)
	cgroupPath   string           // the job's cgroup directory, when it has one
	cgroupFD     int              // the job's cgroup directory, open for clone into it (-1: none)
	launchReason string           // why a job that never started ended
	stage        *isolation.Stage // the process that becomes the job (prestart)
	cwdHandle    *os.File         // the job's cwd and HOME, opened by the server
	homeHandle   *os.File
	jobDir       *statedir.Dir // the job's directory: its files are made beneath it
	jobFDs       []int
	master       *os.File // pty mode
	ptyMaster    *os.File // the terminal made ahead (openTerminal)
	ptySlave     *os.File
	pumpDone     chan struct{} // closed when all output is on disk
	inputCh      chan []byte

	// reaper state
	rmu       sync.Mutex
	mainPID   int
	early     map[int]unix.WaitStatus
	mainState chan unix.WaitStatus
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
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
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
	r := &Runner{
		log:       log,
		conns:     map[*proto.Conn]struct{}{},
		sizeCh:    make(chan struct{}, 1),
		done:      make(chan struct{}),
		exitAck:   make(chan struct{}),
		inputCh:   make(chan []byte, inputQueue),
		early:     map[int]unix.WaitStatus{},
		mainState: make(chan unix.WaitStatus, 1),
		cgroupFD:  -1,
	}
	// SIGCHLD must be watched before the first child exists.
	sigCh := make(chan os.Signal, 16)
	signal.Notify(sigCh, unix.SIGCHLD)
	// The runner lives in its own session; a hangup or a stray SIGPIPE
	// must not end it. They are caught and dropped rather than ignored:
	// an ignored signal stays ignored across exec, and the job must start
	// with every signal at its default.
	drop := make(chan os.Signal, 4)
	signal.Notify(drop, unix.SIGHUP, unix.SIGPIPE)
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
		if r.stage != nil {
			r.stage.Close()
		}
		r.closeTracker()
		return 0
	}
	r.spec = spec
	showJobID(spec.ID)
	r.log = log.With("job", spec.ID)
	r.addConn(ctl)
	if prepErr != nil {
		r.finishFailed(prepErr)
		return 1
	}
	return r.run()
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
	// Unique among live runners by the pid, and against a group left by a
	// dead runner of the same pid by the time.
	opts.Name = fmt.Sprintf("shellctl-%d-%x", os.Getpid(), time.Now().UnixNano()&0xffffffff)
	// NewTracker also makes the runner the child subreaper of everything
	// its job starts, so orphans of the tree stay visible to it (and are
	// reaped by it).
	tr, info, err := proctree.NewTracker(opts)
	if err != nil {
		return fmt.Errorf("track process tree: %w", err)
	}
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
	if fd, err := proctree.OpenCgroupFD(tr); err == nil {
		r.cgroupFD = fd
	}
	if err := r.openTerminal(); err != nil {
		return err
	}
	if err := r.startStage(); err != nil {
		return fmt.Errorf("start the job's stage: %w", err)
	}
	return nil
}

// leftoverWait bounds how long a finished runner waits for the last
// processes of its job's group to be gone before it looks at what is left.
const leftoverWait = 200 * time.Millisecond

// closeTracker removes the job's cgroup once the job is over. What a job
// that ended by itself left running (a `nohup cmd &` server) is no longer
// the job's: it is moved up to the parent group, so the job's group can go
// and no empty groups pile up over a sandbox's life.
func (r *Runner) closeTracker() {
	r.rmu.Lock()
	tr := r.tracker
	path := r.cgroupPath
	r.rmu.Unlock()
	if tr == nil {
		return
	}
	r.mu.Lock()
	ended := r.terminating != ""
	r.mu.Unlock()
	if ended {
		// Ended on request or at a limit: nothing of the job may outlive
		// it, and nothing is moved out of its group. The ladder emptied
		// the tree; whatever appeared since is killed too, for as long as
		// it takes.
		r.killToEmpty(tr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), leftoverWait)
	err := tr.WaitEmpty(ctx)
	cancel()
	if err != nil && path != "" && !ended {
		if pids, perr := tr.Pids(); perr == nil {
			parent := filepath.Join(filepath.Dir(path), "cgroup.procs")
			for _, pid := range pids {
				_ = os.WriteFile(parent, []byte(strconv.Itoa(pid)), 0)
			}
		}
	}
	if err := tr.Close(); err != nil {
		r.log.Warn("remove the job's cgroup", "err", err)
	}
	if path != "" {
		sweepCgroups(filepath.Dir(path))
	}
}

// killToEmpty kills every process of the job until none is left.
func (r *Runner) killToEmpty(tr proctree.Tracker) {
	for {
		_ = tr.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := tr.WaitEmpty(ctx)
		cancel()
		if err == nil {
			return
		}
		pids, _ := tr.Pids()
		r.log.Warn("processes of an ended job survive SIGKILL: killing again", "pids", pids)
	}
}

// sweepCgroups removes empty job cgroups beside ours whose runner is gone
// (one that was killed never removed its own); a group still in use is not
// empty, and rmdir refuses it.
func sweepCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "shellctl-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || unix.Kill(pid, 0) == nil {
			continue
		}
		_ = unix.Rmdir(filepath.Join(parent, e.Name()))
	}
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
	spec := new(Spec)
	if err := json.Unmarshal(g.m.Spec, spec); err != nil {
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
	if err := r.start(); err != nil {
		r.finishFailed(err)
		return 1
	}
	// The control socket is for a server that comes later (after a
	// restart); made once the job is on its way, as every file made on the
	// path of a job's start is felt by every job.
	ln, err := proto.Listen(s.Dir, SocketFile)
	if err != nil {
		r.log.Error("control socket: a restarted server will not find this job", "err", err)
	} else {
		r.ln = ln
		defer os.Remove(filepath.Join(s.Dir, SocketFile))
		go r.accept()
	}
	r.waitAndFinish()
	r.closeTracker()
	return 0
}

// finishFailed publishes a job that could not be started.
func (r *Runner) finishFailed(err error) {
	r.log.Error("start failed", "err", err)
	m := &proto.Msg{T: proto.TExit, Status: jobstate.StatusFailed, Reason: ReasonStartFailed + ": " + err.Error(), EndedAt: time.Now().UnixNano(), Done: true}
	r.publishExit(m)
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
			switch {
			case r.mainPID == 0:
				r.early[pid] = ws
			case pid == r.mainPID:
				r.mainState <- ws
			}
			tr := r.tracker
			r.rmu.Unlock()
			if tr != nil {
				tr.Notify()
			}
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

// exitOf turns a wait status into the exit code of the API: the status, or
// 128 + signal for a signal death.
func exitOf(ws unix.WaitStatus) (code, sig int) {
	switch {
	case ws.Exited():
		return ws.ExitStatus(), 0
	case ws.Signaled():
		return 128 + int(ws.Signal()), int(ws.Signal())
	}
	return 128, 0
}

func (r *Runner) running() {
	r.mu.Lock()
	m := &proto.Msg{T: proto.TRunning, Status: jobstate.StatusRunning, PID: r.pid, StartedAt: r.startedAt.UnixNano(), Isolation: r.isolation, Cgroup: r.cgroupPath}
	r.mu.Unlock()
	r.broadcast(m)
}

// waitAndFinish waits for the process to end and its output to drain, then
// publishes the exit. The order matters: the exit is recorded only after the
// last byte is on disk, so a client that sees "done" reads all output.
func (r *Runner) waitAndFinish() {
	ws := <-r.mainState
	code, sig := exitOf(ws)
	r.releaseForeground()
	r.drain()
	// A job being ended (terminate, forced delete, a limit) is over only
	// when the ladder has emptied its tree: its end is not published, and
	// the runner does not leave, while any process of it lives.
	r.mu.Lock()
	ladder := r.ladder
	r.mu.Unlock()
	if ladder != nil {
		<-ladder
	}
	m := &proto.Msg{T: proto.TExit, Status: jobstate.StatusExited, ExitCode: &code, Signal: sig, EndedAt: time.Now().UnixNano(), Done: true}
	m.Reason = ReasonExited
	if sig != 0 {
		m.Reason = ReasonSignal
	}
	r.mu.Lock()
	if r.launchReason != "" {
		m.Reason = r.launchReason
	}
	if r.terminating != "" {
		m.Status = jobstate.StatusTerminated
		m.Reason = r.terminating
	}
	// The facts of the start travel with the exit, so its record is whole
	// even when the running event was never recorded.
	m.PID, m.StartedAt, m.Isolation = r.pid, unixNano(r.startedAt), r.isolation
	r.mu.Unlock()
	if r.tracker.OOMKilled() {
		m.Reason = ReasonOOM
	}
	m.Size = r.size.Load()
	if err := r.outputFailed(); err != nil && r.terminating == "" {
		m.Reason = fmt.Sprintf("%s: %v (%d bytes of output on disk, the rest dropped)", ReasonOutputFailed, err, m.Size)
	}
	r.publishExit(m)
}

// publishExit tells the connected server(s) and waits for one to confirm
// it recorded the exit; with no server there (stopped, crashed, upgrading),
// the runner records it itself. Both use compare-and-set, so whichever comes
// second changes nothing.
func (r *Runner) publishExit(m *proto.Msg) {
	r.mu.Lock()
	r.exit = m
	n := len(r.conns)
	r.mu.Unlock()
	close(r.done)
	if n > 0 {
		r.broadcast(m)
		select {
		case <-r.exitAck:
			return
		case <-time.After(exitAckTimeout):
		}
	}
	// Held and retried until the database takes it (a full disk, a
	// locked database): an exit is never lost, and a server that comes
	// back meanwhile may take it first (then the compare-and-set here
	// changes nothing and succeeds).
	wait := exitRetryMin
	for {
		err := recordExit(r.spec.StateDir, r.spec.ID, m)
		if err == nil {
			return
		}
		r.log.Error("record exit: will retry", "err", err, "in", wait)
		select {
		case <-r.exitAck:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, exitRetryMax)
	}
}

// exitRetryMin and exitRetryMax bound the back-off between attempts to
// record an exit no server heard.
const (
	exitRetryMin = 200 * time.Millisecond
	exitRetryMax = 5 * time.Second
)

// recordExit records m through shellctl-runner-exit, beside this binary. It
// is only on the path when no server heard the exit, so the runner itself
// carries no database code and starts fast.
func recordExit(stateDir, id string, m *proto.Msg) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin := filepath.Join(filepath.Dir(self), "shellctl-runner-exit")
	args := []string{"--state-dir", stateDir, "--job-id", id, "--status", m.Status,
		"--ended-at", time.Unix(0, m.EndedAt).UTC().Format(time.RFC3339Nano), "--reason", m.Reason}
	if m.ExitCode != nil {
		args = append(args, "--exit-code", strconv.Itoa(*m.ExitCode), "--signal", strconv.Itoa(m.Signal))
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", bin, err, out)
	}
	return nil
}

// terminate runs the ladder once; later calls wait for the same end.
func (r *Runner) terminate(reason string, grace time.Duration) {
	r.mu.Lock()
	if r.exit != nil {
		r.mu.Unlock()
		return
	}
	if r.ladder != nil {
		ch := r.ladder
		r.mu.Unlock()
		<-ch
		return
	}
	r.terminating = reason
	ch := make(chan struct{})
	r.ladder = ch
	r.mu.Unlock()
	defer close(ch)
	fg := r.foregroundGroup()
	if err := proctree.Ladder(context.Background(), r.tracker, fg, grace); err != nil {
		r.log.Error("terminate", "err", err)
	}
}

// accept admits connections through the socket file one at a time: a
// flood of connections costs the runner one small read buffer and one
// admitTimeout at a time, never memory that grows with their number.
func (r *Runner) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.admit(c)
	}
}

// sameKey compares two keys in time that depends only on their length.
func sameKey(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := 0; i < len(a); i++ {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// admitTimeout bounds how long an accepted connection may take to say
// hello (a server's hello is one write away when it connects).
const admitTimeout = 2 * time.Second

// admit lets a connection through the socket file in once its first message
// is a hello with the job's control key; anything else is closed unanswered.
//
// At most proto.MaxHello bytes are read before the key is proven. One
// admitted connection through the socket file is kept at a time (a
// restarted server's): a newer one replaces it.
func (r *Runner) admit(c *proto.Conn) {
	c.SetMaxLine(proto.MaxHello)
	c.SetDeadline(time.Now().Add(admitTimeout))
	m, err := c.Recv()
	c.SetDeadline(time.Time{})
	if err != nil || m.T != proto.THello || r.spec.ControlKey == "" ||
		!sameKey(m.Key, r.spec.ControlKey) {
		c.Close()
		return
	}
	c.SetMaxLine(1 << 62)
	if err := c.Send(r.state()); err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	old := r.sockConn
	r.sockConn = c
	r.mu.Unlock()
	if old != nil {
		r.dropConn(old)
	}
	r.addConn(c)
}

func (r *Runner) addConn(c *proto.Conn) {
	r.mu.Lock()
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	go r.serve(c)
}

func (r *Runner) dropConn(c *proto.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	if r.sockConn == c {
		r.sockConn = nil
	}
	r.mu.Unlock()
	c.Close()
}

func (r *Runner) broadcast(m *proto.Msg) {
	r.mu.Lock()
	conns := make([]*proto.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		if err := c.Send(m); err != nil {
			r.dropConn(c)
		}
	}
}

func (r *Runner) state() *proto.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exit != nil {
		m := *r.exit
		m.T = proto.TState
		m.PID = r.pid
		m.StartedAt = unixNano(r.startedAt)
		m.Isolation = r.isolation
		m.Size = r.size.Load()
		return &m
	}
	st := jobstate.StatusStarting
	if r.pid != 0 {
		st = jobstate.StatusRunning
	}
	return &proto.Msg{T: proto.TState, Status: st, PID: r.pid, StartedAt: unixNano(r.startedAt), Isolation: r.isolation, Size: r.size.Load(), Cgroup: r.cgroupPath}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// serve answers one server connection.
func (r *Runner) serve(c *proto.Conn) {
	defer r.dropConn(c)
	for {
		m, err := c.Recv()
		if err != nil {
			return
		}
		switch m.T {
		case proto.THello:
			if err := c.Send(r.state()); err != nil {
				return
			}
		case proto.TInput:
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: r.input(m.Data)})
		case proto.TResize:
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: r.resize(m.Cols, m.Rows)})
		case proto.TTerminate:
			id := m.ID
			grace := time.Duration(m.Grace * float64(time.Second))
			go func() {
				r.terminate(ReasonTerminate, grace)
				<-r.done
				c.Send(&proto.Msg{T: proto.TAck, ID: id})
			}()
		case proto.TExitAck:
			r.ackOnce.Do(func() { close(r.exitAck) })
		default:
			c.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Err: "unknown message " + strconv.Quote(m.T)})
		}
	}
}

// input queues text for the terminal. Writing happens on its own goroutine
// so a job that does not read its terminal cannot block the control channel.
func (r *Runner) input(b []byte) string {
	if r.spec.Mode != "pty" {
		return "input_unsupported"
	}
	r.mu.Lock()
	done := r.exit != nil
	r.mu.Unlock()
	if done {
		return "job_not_running"
	}
	select {
	case r.inputCh <- b:
		return ""
	default:
		return "input queue full: the job is not reading its terminal"
	}
}

// sizeEventGap is the least time between two "output grew" events while
// output streams: the first byte after a quiet spell is announced at once,
// a flood costs at most one event per gap instead of one per write (which
// for a job printing hundreds of MB/s would make the events, not the
// output, the work). A millisecond is far below anything a waiter can tell.
const sizeEventGap = time.Millisecond

// sendSizes publishes output growth, coalesced: never a queue that grows
// with the output.
func (r *Runner) sendSizes() {
	var last int64 = -1
	var lastSent time.Time
	for {
		select {
		case <-r.sizeCh:
		case <-r.done:
			return
		}
		if wait := sizeEventGap - time.Since(lastSent); wait > 0 {
			select {
			case <-time.After(wait):
			case <-r.done:
				return
			}
		}
		n := r.size.Load()
		if n == last {
			continue
		}
		last = n
		lastSent = time.Now()
		r.broadcast(&proto.Msg{T: proto.TOutput, Size: n})
	}
}

// outWriter writes output.log, counts it and enforces --max-output-bytes.
// Only one goroutine writes at a time (the pump of the job's output).
type outWriter struct {
	r   *Runner
	f   *os.File
	max int64
	hit bool
}

func (w *outWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.max > 0 {
		room := w.max - w.r.size.Load()
		if int64(len(p)) > room {
			if room < 0 {
				room = 0
			}
			p = p[:room]
			if !w.hit {
				w.hit = true
				go w.r.terminate(ReasonMaxOutput, limitGrace)
			}
		}
	}
	if len(p) > 0 && w.r.outputFailed() == nil {
		// The runner is output.log's only writer and size is where it
		// ends: positioned writes let splice (which refuses append-mode
		// files) share the file with Write.
		m, err := w.f.WriteAt(p, w.r.size.Load())
		if m > 0 {
			w.r.grew(int64(m))
		}
		if err != nil {
			// A full disk or an I/O error: what made it to disk stays,
			// the rest is read and dropped so the job is not blocked on
			// its terminal or pipe, and its end records why.
			w.r.failOutput(err)
		}
	}
	// Bytes past the limit are consumed and dropped, so the job's writes do
	// not block while the ladder ends it.
	return n, nil
}

// failOutput records the first error writing the job's output.
func (r *Runner) failOutput(err error) {
	r.mu.Lock()
	if r.outErr == nil {
		r.outErr = err
		r.log.Error("output cannot be written: the rest is dropped", "err", err, "on_disk", r.size.Load())
	}
	r.mu.Unlock()
}

// outputFailed is the error that stopped output being written, if any.
func (r *Runner) outputFailed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outErr
}

func (r *Runner) grew(n int64) {
	r.size.Add(n)
	r.lastWrite.Store(time.Now().UnixNano())
	select {
	case r.sizeCh <- struct{}{}:
	default:
	}
}

// watchRuntime ends the job at --max-job-runtime.
func (r *Runner) watchRuntime() {
	if r.spec.MaxRuntimeSeconds <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(r.spec.MaxRuntimeSeconds * float64(time.Second)))
	go func() {
		defer t.Stop()
		select {
		case <-t.C:
			r.terminate(ReasonMaxRuntime, limitGrace)
		case <-r.done:
		}
	}()
}

func marshalApplied(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
