// Package jobs is the job service of shellctl serve: it starts runners,
// follows them over their control channels, answers waits from events,
// ends jobs, collects finished ones and finds running jobs again after a
// restart. It knows nothing of HTTP.
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/beneath"
	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/metrics"
	"github.com/shellctl/shellctl/internal/reaper"
	"github.com/shellctl/shellctl/internal/reqctx"
	"github.com/shellctl/shellctl/internal/runner"
	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/statedir"
	"github.com/shellctl/shellctl/internal/store"
)

// Config is the service's configuration, every default filled in by the
// caller (cmd/shellctl).
type Config struct {
	StateDir     string
	RunnerPath   string
	DefaultShell string
	Home         string   // the server's $HOME: default cwd and job HOME
	ServerEnv    []string // the server's environment, filtered per job by isolation.BuildEnv
	InheritNone  bool
	Policy       isolation.Policy
	// Walls are every job's capabilities, seccomp filter and IPC
	// namespace (--job-capabilities, --job-seccomp).
	Walls isolation.Walls
	// ForceIsolationFail is a test hook: every job's confinement fails
	// with this message.
	ForceIsolationFail string
	// BenchNoScreen: pty jobs run without their screen emulator (the
	// bench's floor for non-line output; SHELLCTL_BENCH_NO_SCREEN).
	BenchNoScreen bool
	// WorkspaceRoot is --workspace-root with its links resolved;
	// WorkspaceRootGiven is the same as the operator wrote it (absolute),
	// so a cwd named through either is found beneath the root.
	WorkspaceRoot      string
	WorkspaceRootGiven string

	MaxRunning     int
	MaxRuntime     time.Duration
	MaxOutputBytes int64
	MemoryMax      int64
	PidsMax        int64
	DisableCgroup  bool
	// JobStartStage makes runners start every job through a stage
	// process, even where they could start it directly
	// (runner.JobStartEnv).
	JobStartStage bool

	// WarmRunners is how many runners wait, started, for the next jobs
	// (0: every job starts its runner itself).
	WarmRunners int

	GCInterval  time.Duration
	GCRetention time.Duration

	// Egress is the credential proxy (egress.go; nil: off).
	Egress Egress

	Logger *slog.Logger
	// Metrics is fed the jobs' starts, ends and output (nil: none).
	Metrics *metrics.Metrics
}

// Service runs jobs.
type Service struct {
	cfg Config
	st  *store.Store
	log *slog.Logger
	// sd is the state dir's handle: every file made or opened there goes
	// through it (no link followed, new files made exclusively).
	sd *statedir.Dir
	// stateReal is the state dir as the kernel names it (for messages).
	stateReal string
	// stateChain is the state dir's identity and its ancestors' (device
	// and inode, from its handle): no job's cwd or HOME may be among them
	// or have the state dir among its own. Found once: serve refuses a
	// state dir inside any path a job may write, so no job can move the
	// state dir or a directory above it.
	stateChain []beneath.ID
	// homeNames and wsNames are the names of the server's Home and of the
	// workspace root as roots (beneath.Root.Names), found once; their
	// handles are opened at each request.
	homeNames, wsNames []string

	mu   sync.Mutex
	live map[string]*job // jobs whose end is not yet recorded

	// procMu guards runners and kept. It is held while a runner is
	// started (fork and exec), so a scan for a lost job's processes never
	// takes a runner just born for one of ours; s.mu is not, so runs and
	// reads go on meanwhile.
	procMu sync.Mutex
	// runners are the pids of the runners this server started and still
	// waits for (the reaper hands their exit to spawn's goroutine), each
	// with a channel closed once that runner is reaped.
	runners map[int]chan struct{}
	// kept are adopted processes that jobs left running when they ended
	// by themselves: ending a lost job never kills them.
	kept map[int]bool
	// leftovers asks leftoversLoop for a look at what runners that left
	// cleanly left us (keepLeftovers): exits that come while it looks
	// share the next look.
	leftovers chan struct{}
	// pool holds the warm runners waiting for a job but one: the one
	// started last waits in fillPool for room, so WarmRunners wait in
	// all, not one more (each is a runner and its stage: idle memory).
	// With one warm runner the channel holds none: takeIdle receives
	// from fillPool's waiting send.
	pool chan *idleRunner
	// warm counts the warm runners started and not yet taken.
	warm atomic.Int64
	// refillGates say "a job's start is over" to the pool's and the
	// ready directories' keepFilled (startOver).
	refillGates [2]chan struct{}
	// readyDirs are job directories made ahead (".ready-…"), each with its
	// empty script file made and open.
	readyDirs chan readyDir

	stop      chan struct{}
	closeOnce sync.Once // Close once: later calls do nothing
	wg        sync.WaitGroup

	// flights are the Idempotency-Keys being handled (idempotency.go).
	flights flights

	// runningDelay is runningRecordDelay (tests change it).
	runningDelay time.Duration
	// limitsJSON is askedLimits.
	limitsJSON string
}

// New opens the service over an open store and finds the jobs that were
// running when the previous server stopped.
func New(ctx context.Context, cfg Config, st *store.Store) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultShell == "" {
		cfg.DefaultShell = "/bin/sh"
	}
	sd, err := statedir.OpenDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := sd.Mkdir("jobs", 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		sd.Close()
		return nil, fmt.Errorf("make jobs dir: %w", err)
	}
	stateReal, err := statedir.Real(cfg.StateDir)
	if err != nil {
		sd.Close()
		return nil, err
	}
	stateChain, err := beneath.Chain(sd.FD())
	if err != nil {
		sd.Close()
		return nil, fmt.Errorf("find where the state dir %s lies: %w", cfg.StateDir, err)
	}
	var homeNames, wsNames []string
	if cfg.Home != "" {
		homeNames = beneath.RootNames(cfg.Home)
	}
	if cfg.WorkspaceRoot != "" {
		wsNames = beneath.RootNames(cfg.WorkspaceRoot)
		if g := filepath.Clean(cfg.WorkspaceRootGiven); cfg.WorkspaceRootGiven != "" && !slices.Contains(wsNames, g) {
			wsNames = append(wsNames, g)
		}
	}
	s := &Service{cfg: cfg, st: st, log: cfg.Logger, sd: sd, stateReal: stateReal, stateChain: stateChain, homeNames: homeNames, wsNames: wsNames, live: map[string]*job{}, runners: map[int]chan struct{}{}, stop: make(chan struct{}), pool: make(chan *idleRunner, max(cfg.WarmRunners-1, 0)),
		readyDirs: make(chan readyDir, readyDirCount), runningDelay: runningRecordDelay, limitsJSON: limitsJSON(cfg), leftovers: make(chan struct{}, 1),
		refillGates: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}
	// Directories made ahead by a previous server and never used.
	if old, err := filepath.Glob(filepath.Join(cfg.StateDir, "jobs", readyPrefix+"*")); err == nil {
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	// Scripts of requests a previous server was still receiving.
	if old, err := filepath.Glob(filepath.Join(cfg.StateDir, "jobs", spoolPrefix+"*")); err == nil {
		for _, f := range old {
			os.Remove(f)
		}
	}
	// Child subreaper: the processes of a runner that dies are
	// reparented to us, so a lost job's orphans can be found and ended.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		s.log.Warn("become child subreaper: a dead runner's orphans will not be found", "err", err)
	}
	// Every child that ends is reaped, adopted orphans among them (a
	// killed runner's job; as PID 1, any orphan of the namespace).
	reaper.Ensure()
	if err := s.reconcile(ctx); err != nil {
		return nil, err
	}
	if cfg.GCInterval > 0 {
		s.wg.Add(1)
		go s.gcLoop()
	}
	if cfg.WarmRunners > 0 {
		s.wg.Add(1)
		go s.fillPool()
	}
	s.wg.Add(2)
	go s.fillDirs()
	go s.leftoversLoop()
	return s, nil
}

// Close stops background work. Running jobs are left running: their
// runners outlive the server.
func (s *Service) Close() {
	first := false
	s.closeOnce.Do(func() { first = true })
	if !first {
		return // closed already
	}
	close(s.stop)
	s.wg.Wait()
	for {
		select {
		case d := <-s.readyDirs:
			s.discardDir(d)
			continue
		default:
		}
		break
	}
	// Warm runners leave when their channel closes.
	for {
		select {
		case ir := <-s.pool:
			s.warm.Add(-1)
			ir.conn.Close()
			continue
		default:
		}
		break
	}
	s.mu.Lock()
	for _, j := range s.live {
		j.closeConn()
	}
	s.mu.Unlock()
}

// RunRequest is a validated run request.
type RunRequest struct {
	Script string
	// ScriptPath, when set, is a file made by SpoolFile that holds the
	// script instead of Script (a large body is written there as it
	// arrives): it becomes the job's script file by a rename, and is
	// left for the caller to remove when the run fails before that.
	ScriptPath string
	Mode       string // "pty" or "stdio"
	// Stdin is StdinPipe for a stdio job whose stdin is a pipe for
	// input (pipes.go); "" for /dev/null (and for pty jobs).
	Stdin string
	// Cwd is absolute, or "" for the server's $HOME. ".." is kept as
	// given: it is resolved beneath the root the path names (dirs.go),
	// never folded away by name.
	Cwd       string
	Env       map[string]string
	Cols      int
	Rows      int
	SessionID string
	// ReceivedAt is when the run request arrived (zero: when Run was
	// called): the start of the time to the job's first instruction.
	ReceivedAt time.Time
	// IdempotencyKey and IdempotencyFP are the request's Idempotency-Key
	// and fingerprint (RunIdempotent), stored in the job's row.
	IdempotencyKey string
	IdempotencyFP  string
}

// NewID returns a fresh job id: 16 lowercase hex characters.
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id has the shape of a job id.
func ValidID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Run starts a job and waits for it like Wait from offset 0.
func (s *Service) Run(ctx context.Context, req RunRequest, wp WaitParams) (*Result, error) {
	return s.run(ctx, req, wp, func() {})
}

// run is Run; started is called once the job's row is made and its start
// is done (or the run failed), before the wait.
func (s *Service) run(ctx context.Context, req RunRequest, wp WaitParams, started func()) (*Result, error) {
	defer started()
	if req.Stdin != "" && (req.Stdin != StdinPipe || req.Mode != "stdio") {
		// The api package refuses these; a caller that did not is wrong.
		return nil, fmt.Errorf("run: stdin %q with mode %q: only a stdio job takes a stdin pipe (%q)", req.Stdin, req.Mode, StdinPipe)
	}
	dirs, err := s.openJobDirs(req)
	if err != nil {
		return nil, err
	}
	defer dirs.close()
	s.mu.Lock()
	if n := s.runningLocked(); s.cfg.MaxRunning > 0 && n >= s.cfg.MaxRunning {
		s.mu.Unlock()
		return nil, errorf(ErrTooManyJobs, "%d jobs are running, the limit (--max-running-jobs) is %d", n, s.cfg.MaxRunning)
	}
	id := NewID()
	j := newJob(id, runner.JobDir(s.cfg.StateDir, id), req.Mode)
	j.stdin = req.Stdin
	j.requested = req.ReceivedAt
	if j.requested.IsZero() {
		j.requested = time.Now()
	}
	// Reserve the slot now so concurrent runs count it.
	s.live[id] = j
	s.mu.Unlock()

	if err := s.start(ctx, j, req, dirs); err != nil {
		s.forget(j)
		return nil, err
	}
	started()
	return s.wait(ctx, j, wp)
}

// start makes the job's directory and row and starts its runner. A failure
// after the row exists is recorded as a failed job (still a 200 for the
// client); a failure before undoes what was made.
func (s *Service) start(ctx context.Context, j *job, req RunRequest, dirs *jobDirs) (err error) {
	cwd := dirs.cwdReal
	scriptFile, err := s.makeJobDir(j.id)
	if err != nil {
		return fmt.Errorf("make job dir %s: %w", j.dir, err)
	}
	rowMade := false
	defer func() {
		if err != nil && !rowMade {
			os.RemoveAll(j.dir)
		}
	}()
	script := filepath.Join(j.dir, runner.ScriptFile)
	argv := []string{s.cfg.DefaultShell, script}
	perm := os.FileMode(0o600)
	if err := s.writeScript(j.id, script, req, &argv, &perm, scriptFile); err != nil {
		return fmt.Errorf("write script of job %s: %w", j.id, err)
	}
	home := dirs.homeName
	j.key = NewID() + NewID()
	placeholders, proxyEnv, egressRec := s.egressEnv(req, j.id)
	spec := &runner.Spec{
		ID: j.id, StateDir: s.cfg.StateDir, Dir: j.dir, Mode: req.Mode, Argv: argv, ControlKey: j.key,
		Env: isolation.BuildEnv(isolation.EnvInput{
			ServerEnv: s.cfg.ServerEnv, InheritNone: s.cfg.InheritNone, Request: req.Env,
			Home: home, Cwd: cwd, PTY: req.Mode == "pty",
			Placeholders: placeholders, Proxy: proxyEnv,
		}),
		Cwd: cwd, Home: dirs.homeReal, Cols: req.Cols, Rows: req.Rows,
		Policy:             s.cfg.Policy,
		ForceIsolationFail: s.cfg.ForceIsolationFail,
		BenchNoScreen:      s.cfg.BenchNoScreen,
		Walls:              s.cfg.Walls,
		MaxRuntimeSeconds:  s.cfg.MaxRuntime.Seconds(),
		MaxOutputBytes:     s.cfg.MaxOutputBytes,
		Stdin:              req.Stdin,
	}
	// The spec travels in the assign message, and output.log is made by
	// the runner: on a slow disk every file made here is felt by every job.
	// A missing output.log reads as empty.
	now := time.Now()
	// With a warm runner at hand the row is born "starting" with its
	// runner: one write instead of two on the path of every job.
	ir := s.takeIdle()
	row := &store.Job{ID: j.id, Mode: req.Mode, Cwd: cwd, SessionID: req.SessionID, CreatedAt: now, ControlKey: j.key,
		Home: home, EnvNames: envNames(req.Env), Limits: s.askedLimits(),
		IdempotencyKey: req.IdempotencyKey, IdempotencyFP: req.IdempotencyFP, Stdin: req.Stdin,
		Egress: egressJSON(egressRec)}
	if req.Mode == "pty" {
		row.Cols, row.Rows = req.Cols, req.Rows
	}
	if ir != nil {
		row.RunnerPID = ir.pid
	}
	if err := s.st.Insert(ctx, row); err != nil {
		if ir != nil {
			s.putBack(ir)
		}
		return err
	}
	rowMade = true
	s.cfg.Metrics.JobStarted(req.Mode)
	j.mu.Lock()
	j.status = store.StatusCreated
	if ir != nil {
		j.status = store.StatusStarting
	}
	j.created = now
	j.mu.Unlock()

	pid, conn, err := s.assign(spec, ir, dirs)
	if err != nil {
		s.log.Error("start runner", "job", j.id, "err", err)
		s.finish(j, store.Exit{Status: store.StatusFailed, Reason: runner.ReasonStartFailed + ": " + err.Error(), EndedAt: time.Now()})
		return nil
	}
	if ir == nil || pid != ir.pid {
		// created → starting; or, when the row was born starting with a
		// warm runner that turned out gone, the runner that took over.
		rerr := s.st.MarkStarting(ctx, j.id, pid)
		if errors.Is(rerr, store.ErrNotChanged) {
			rerr = s.st.SetRunner(ctx, j.id, pid)
		}
		if rerr != nil && !errors.Is(rerr, store.ErrNotChanged) {
			s.log.Warn("record runner", "job", j.id, "err", rerr)
		}
	}
	j.mu.Lock()
	if j.status == store.StatusCreated {
		j.status = store.StatusStarting
	}
	j.mu.Unlock()
	s.attach(j, conn)
	s.log.Info("job started", "job", j.id, "mode", req.Mode, "runner_pid", pid, "request_id", reqctx.ID(ctx))
	return nil
}

// spoolPrefix names script files of run requests still being received
// (SpoolFile); they sit in jobs/ so that the rename into a job's directory
// stays on one file system.
const spoolPrefix = ".spool-"

// SpoolFile makes an empty file, readable only by this user, for a script
// that arrives in a large request body; RunRequest.ScriptPath hands it
// over.
func (s *Service) SpoolFile() (*os.File, error) {
	f, err := s.sd.Open("jobs/"+spoolPrefix+NewID(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("make a file for the script: %w", err)
	}
	return f, nil
}

// writeScript puts the request's script in job id's directory (path is
// where that is): a spooled file is moved there, a script held in memory
// is written to a file made exclusively: ready, the empty script file made
// ahead with the directory (makeJobDir), or else one made now. All go
// through the state dir's handle. A "#!" script is executed directly, so
// it is made executable and argv becomes just its path. ready is closed.
func (s *Service) writeScript(id, path string, req RunRequest, argv *[]string, perm *os.FileMode, ready *os.File) error {
	defer func() {
		if ready != nil { // not taken: a failure
			ready.Close()
		}
	}()
	shebang := strings.HasPrefix(req.Script, "#!")
	var spool *os.File
	if req.ScriptPath != "" {
		f, err := s.sd.Open("jobs/"+filepath.Base(req.ScriptPath), os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		spool = f
		defer f.Close()
		var head [2]byte
		n, _ := io.ReadFull(f, head[:])
		shebang = string(head[:n]) == "#!"
	}
	if shebang {
		*argv = []string{path}
		*perm = 0o700
	}
	if spool == nil {
		// No fork while the script is open for writing: a child forked
		// meanwhile (a runner being started) holds the descriptor until its
		// own execve, and the job's execve of the script would then fail
		// with ETXTBSY ("text file busy"). os/exec takes ForkLock to fork
		// and holds it until the child's execve, so once we hold it no
		// child holds the descriptor: a ready script, open since it was
		// made, is closed under it too.
		syscall.ForkLock.RLock()
		defer syscall.ForkLock.RUnlock()
		f := ready
		ready = nil
		if f == nil {
			var err error
			if f, err = s.sd.Open(jobRel(id)+"/"+runner.ScriptFile, os.O_WRONLY|os.O_CREATE, uint32(*perm)); err != nil {
				return err
			}
		} else if *perm != 0o600 {
			if err := f.Chmod(*perm); err != nil {
				f.Close()
				return err
			}
		}
		_, err := f.WriteString(req.Script)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if ready != nil {
		// The spooled file becomes the script: the empty one made ahead
		// goes (through the job directory's handle).
		syscall.ForkLock.RLock()
		ready.Close()
		syscall.ForkLock.RUnlock()
		ready = nil
		jd, err := s.sd.Sub(jobRel(id))
		if err != nil {
			return err
		}
		err = unix.Unlinkat(jd.Fd(), runner.ScriptFile, 0)
		jd.Close()
		if err != nil {
			return fmt.Errorf("remove the script file made ahead: %w", err)
		}
	}
	if err := spool.Chmod(*perm); err != nil {
		return err
	}
	return s.sd.Rename("jobs/"+filepath.Base(req.ScriptPath), jobRel(id)+"/"+runner.ScriptFile)
}

// finishRetryMin and finishRetryMax bound the back-off between attempts
// to record a job's end that the database refused.
const (
	finishRetryMin = 100 * time.Millisecond
	finishRetryMax = 2 * time.Second
)

// readyPrefix names job directories made ahead, before their job exists.
const readyPrefix = ".ready-"

// readyDirCount is how many empty job directories wait, made ahead: making
// a directory is among the dearer file system operations, and on a loaded
// disk it cost a job's start a third of a millisecond; renaming one is cheap.
const readyDirCount = 2

// readyDir is a job directory made ahead, with its empty script file
// (made exclusively and open for writing) and its empty output.log and
// screen.json: a job's start and end then make no file of their own (a
// new inode is among the dearer file system operations).
type readyDir struct {
	rel    string // relative to the state dir
	script *os.File
}

// fillDirs keeps readyDirCount directories made in jobs/, each with its
// script file.
func (s *Service) fillDirs() {
	keepFilled(s, s.readyDirs, s.refillGates[1], "make a job directory ahead", func() (readyDir, error) {
		d := readyDir{rel: "jobs/" + readyPrefix + NewID()}
		if err := s.sd.Mkdir(d.rel, 0o700); err != nil {
			return d, err
		}
		f, err := s.sd.Open(d.rel+"/"+runner.ScriptFile, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			os.Remove(filepath.Join(s.cfg.StateDir, d.rel))
			return d, err
		}
		d.script = f
		// The files the runner writes, made empty here, off the job's
		// path: it opens them as they are (statedir.OpenFresh) instead of
		// making them at the job's start (output.log) and end
		// (screen.json, pty jobs; a stdio job's stays empty).
		for _, name := range []string{runner.OutputFile, runner.ScreenFile} {
			g, err := s.sd.Open(d.rel+"/"+name, os.O_WRONLY|os.O_CREATE, 0o600)
			if err != nil {
				s.discardDir(d)
				return readyDir{}, err
			}
			g.Close()
		}
		return d, nil
	}, s.discardDir)
}

// discardDir removes a directory made ahead and never used.
func (s *Service) discardDir(d readyDir) {
	if d.script != nil {
		d.script.Close()
	}
	os.RemoveAll(filepath.Join(s.cfg.StateDir, d.rel))
}

// keepFilled makes items with produce and puts them in ch until the
// service stops, retrying a failure after a second; an item made when the
// stop came goes to discard.
//
// An item taken from a full ch is replaced only once a job's start is
// over (gate, from startOver), or after refillDelayMax: the replacement (a
// runner's fork, exec and Go start; a directory and three new inodes) is a
// few milliseconds of CPU, and made at once it ran beside the very start
// that took the item, on machines of one or two cores the job's own
// execve and the stage's threads' exit among them. While ch is not full
// (the first fill, several taken at once), items are made back to back.
func keepFilled[T any](s *Service, ch chan T, gate <-chan struct{}, what string, produce func() (T, error), discard func(T)) {
	defer s.wg.Done()
	taken := false
	for {
		if taken && gate != nil {
			t := time.NewTimer(refillDelayMax)
			select {
			case <-gate:
			case <-t.C:
			case <-s.stop:
				t.Stop()
				return
			}
			t.Stop()
		}
		v, err := produce()
		if err != nil {
			s.log.Warn(what, "err", err)
			select {
			case <-s.stop:
				return
			case <-time.After(time.Second):
				continue
			}
		}
		select {
		case ch <- v:
			taken = false // room was there: go on filling
			continue
		default:
		}
		select {
		case ch <- v: // blocked until a job took one
			taken = true
		case <-s.stop:
			discard(v)
			return
		}
	}
}

// refillDelayMax bounds how long a replacement waits for a job's start to
// be over (a start that never reports one: a runner killed while starting).
const refillDelayMax = 20 * time.Millisecond

// startOver tells the pool and the directories made ahead that a job's
// start is over (it runs, or it failed to start): what it took may be
// replaced now. Each gate holds one such word; more are not counted.
func (s *Service) startOver() {
	for _, g := range s.refillGates {
		select {
		case g <- struct{}{}:
		default:
		}
	}
}

// makeJobDir makes job id's directory, from a directory made ahead when
// one is ready (renamed without replacing anything, through the state
// dir's handle): then its script file, empty and open for writing, comes
// with it (nil: writeScript makes it).
func (s *Service) makeJobDir(id string) (*os.File, error) {
	select {
	case d := <-s.readyDirs:
		if err := s.sd.Rename(d.rel, jobRel(id)); err == nil {
			return d.script, nil
		}
		s.discardDir(d)
	default:
	}
	return nil, s.sd.Mkdir(jobRel(id), 0o700)
}

// takeIdle returns a warm runner, or nil when none is ready.
func (s *Service) takeIdle() *idleRunner {
	select {
	case ir := <-s.pool:
		s.warm.Add(-1)
		return ir
	default:
		return nil
	}
}

// putBack returns an unused warm runner to the pool (or lets it go when the
// pool is full).
func (s *Service) putBack(ir *idleRunner) {
	select {
	case s.pool <- ir:
		s.warm.Add(1)
	default:
		ir.conn.Close()
	}
}

// assign hands the job to ir (a warm runner taken from the pool, or nil),
// then to further warm runners should that one be gone, and starts a runner
// for it when none is ready.
func (s *Service) assign(spec *runner.Spec, ir *idleRunner, dirs *jobDirs) (int, *proto.Conn, error) {
	jobDir, err := s.sd.Sub(jobRel(spec.ID))
	if err != nil {
		return 0, nil, err
	}
	defer jobDir.Close()
	// The runner gets the job's directory and the cwd and HOME handles
	// checked in Run (SCM_RIGHTS, ahead of the assign message): it makes
	// the job's files beneath the first and confines the job with the
	// others, never by name.
	fds := []int{jobDir.Fd(), int(dirs.cwd.Fd()), int(dirs.home.Fd())}
	for {
		if ir == nil {
			ir = s.takeIdle()
		}
		if ir == nil {
			break
		}
		raw, err := json.Marshal(spec)
		if err != nil {
			return 0, nil, fmt.Errorf("encode spec of job %s: %w", spec.ID, err)
		}
		if err := ir.conn.SendWithFDs(&proto.Msg{T: proto.TAssign, Spec: raw, Frames: true}, fds); err != nil {
			// That runner is gone (killed while idle): try the next.
			ir.conn.Close()
			ir = nil
			continue
		}
		return ir.pid, ir.conn, nil
	}
	pid, conn, err := s.spawn(jobRel(spec.ID), spec.ID)
	if err != nil {
		return 0, nil, err
	}
	raw, err := json.Marshal(spec)
	if err == nil {
		err = conn.SendWithFDs(&proto.Msg{T: proto.TAssign, Spec: raw, Frames: true}, fds)
	}
	if err != nil {
		conn.Close()
		return 0, nil, fmt.Errorf("hand job %s to its runner: %w", spec.ID, err)
	}
	return pid, conn, nil
}

// idleRunner is a started runner waiting for its job.
type idleRunner struct {
	pid  int
	conn *proto.Conn
}

// fillPool keeps WarmRunners runners started and waiting, so a job's start
// costs no process start-up. A runner whose server goes away before it got
// a job sees its channel close and leaves.
func (s *Service) fillPool() {
	keepFilled(s, s.pool, s.refillGates[0], "start warm runner", func() (*idleRunner, error) {
		pid, conn, err := s.spawn(".", runner.PoolPlaceholder)
		if err == nil {
			s.warm.Add(1)
		}
		return &idleRunner{pid: pid, conn: conn}, err
	}, func(ir *idleRunner) { s.warm.Add(-1); ir.conn.Close() })
}

// spawn starts a runner in its own session, handing it one end of a
// socketpair as its control channel; its stderr goes to runner.log in dir
// (relative to the state dir).
// shownID is the job id its arguments show (a placeholder for a warm one).
func (s *Service) spawn(dir, shownID string) (int, *proto.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ctl-server")
	theirs := os.NewFile(uintptr(fds[1]), "ctl-runner")
	defer theirs.Close()
	logf, err := s.sd.OpenAppend(filepath.Join(dir, "runner.log"), 0o600)
	if err != nil {
		ours.Close()
		return 0, nil, fmt.Errorf("open runner log: %w", err)
	}
	defer logf.Close()
	args := []string{"--state-dir", s.cfg.StateDir, "--ctl-fd", "3", "--job-id", shownID}
	if s.cfg.MemoryMax > 0 {
		args = append(args, "--memory-max", strconv.FormatInt(s.cfg.MemoryMax, 10))
	}
	if s.cfg.PidsMax > 0 {
		args = append(args, "--pids-max", strconv.FormatInt(s.cfg.PidsMax, 10))
	}
	if s.cfg.DisableCgroup {
		args = append(args, "--no-cgroup")
	}
	cmd := exec.Command(s.cfg.RunnerPath, args...)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stdout, cmd.Stderr = logf, logf
	// One P from the runner's first instruction (see runner.tuneRuntime):
	// set only once main runs, the runtime has already started a thread
	// for a second P and sized itself for two, which cost each runner
	// about 40 page faults more (perf, 40 jobs: 12.6 -> 10.9 thousand).
	// The job never sees it: its environment is built from its spec.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GOMAXPROCS=1"}
	// The race detector's options (race-detector builds, tests only):
	// passed on so a runner built with it leaves as soon as it is done.
	if s.cfg.JobStartStage {
		cmd.Env = append(cmd.Env, runner.JobStartEnv+"="+runner.JobStartStage)
	}
	if v := os.Getenv("GORACE"); v != "" {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	// Its own session: the runner and the job survive the server's stop,
	// crash or upgrade, and signals to the server's group do not reach them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	s.procMu.Lock()
	// The process's one reaper collects the runner's exit (it also reaps
	// every orphan we adopt, so nothing else may wait for a child).
	exited, err := reaper.Start(cmd)
	if err != nil {
		s.procMu.Unlock()
		ours.Close()
		return 0, nil, fmt.Errorf("start %s: %w", s.cfg.RunnerPath, err)
	}
	pid := cmd.Process.Pid // Release below clears it
	reaped := make(chan struct{})
	s.runners[pid] = reaped
	s.procMu.Unlock()
	go func() {
		ex := <-exited
		cmd.Process.Release()
		s.procMu.Lock()
		delete(s.runners, ex.Pid)
		s.procMu.Unlock()
		close(reaped)
		if ex.Status.Exited() && ex.Status.ExitStatus() == 0 {
			// A runner that left cleanly: what it leaves us is kept.
			select {
			case s.leftovers <- struct{}{}:
			default: // a look is asked for already, and comes after this exit
			}
		}
	}()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return 0, nil, fmt.Errorf("control channel: %w", err)
	}
	return pid, proto.NewConn(c), nil
}

// runningLocked counts the live jobs whose end is not known: what
// --max-running-jobs bounds. A job whose end was answered stays live until
// its row says so (finish), but it runs no more: a run right after the
// answer to a terminate finds its slot free. s.mu is held.
func (s *Service) runningLocked() int {
	n := 0
	for _, j := range s.live {
		if !j.endKnown.Load() {
			n++
		}
	}
	return n
}

// forget removes j from the live jobs.
func (s *Service) forget(j *job) {
	s.mu.Lock()
	if s.live[j.id] == j {
		delete(s.live, j.id)
		close(j.let)
	}
	s.mu.Unlock()
}

// lookup returns the live job id, or nil.
func (s *Service) lookup(id string) *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// finish records j's end (compare-and-set) and wakes its waiters. When the
// record already held a terminal state (the runner recorded it itself), the
// recorded one wins.
//
// The waiters are woken before the write: the end is answered from memory
// at once, and the database's write is off the path of the answer. Nothing
// is lost by it: j stays among the live jobs until its row says it ended,
// so no read falls back to a row that does not yet; and its runner is told
// the exit is recorded (applyExit's ack) only after the write, so a server
// that dies meanwhile leaves the exit with the runner, which records it
// itself (or hands it to the next server).
//
// A write the database refuses (a full disk: SQLITE_FULL, an I/O error)
// is retried until it is taken, never dropped, the same way.
func (s *Service) finish(j *job, e store.Exit) (recorded bool) {
	j.mu.Lock()
	neverRan := j.started.IsZero()
	j.mu.Unlock()
	j.setEnd(e)
	if neverRan {
		s.startOver() // a start that failed is over too
	}
	// The waiters just woken answer first: each is runnable on this P,
	// behind this goroutine, which would otherwise hold it for the whole
	// write (about 0.5 ms of SQLite here) before the answer goes out.
	runtime.Gosched()
	ctx := context.Background()
	err := s.st.Finish(ctx, j.id, e)
	for wait := finishRetryMin; err != nil && !errors.Is(err, store.ErrNotChanged); wait = min(2*wait, finishRetryMax) {
		s.log.Error("record job end: will retry", "job", j.id, "err", err, "in", wait)
		select {
		case <-s.stop:
			return false // the runner still holds the exit and records it itself
		case <-time.After(wait):
		}
		err = s.st.Finish(ctx, j.id, e)
	}
	if errors.Is(err, store.ErrNotChanged) {
		if row, gerr := s.st.Get(ctx, j.id); gerr == nil && store.IsTerminal(row.Status) {
			e = store.Exit{Status: row.Status, ExitCode: row.ExitCode, Reason: row.Reason, Signal: row.Signal}
			if row.EndedAt != nil {
				e.EndedAt = *row.EndedAt
			}
			j.setRecordedEnd(e)
		}
	}
	s.forget(j)
	s.ended(j, e)
	return true
}

// ended logs and counts the end of j, recorded as e.
func (s *Service) ended(j *job, e store.Exit) {
	j.mu.Lock()
	from := j.started
	if from.IsZero() {
		from = j.created
	}
	var d time.Duration
	if !from.IsZero() && !j.ended.IsZero() {
		d = j.ended.Sub(from)
	}
	j.mu.Unlock()
	reason := ReasonLabel(e.Status, e.Reason)
	s.cfg.Metrics.JobEnded(e.Status, reason, d)
	// The code itself, not the pointer: the text handler would print the
	// pointer's address. nil (no code: killed before it started) stays null.
	var code any
	if e.ExitCode != nil {
		code = *e.ExitCode
	}
	s.log.Info("job ended", "job", j.id, "status", e.Status, "reason", reason, "exit_code", code, "signal", e.Signal, "duration_seconds", d.Seconds())
}
