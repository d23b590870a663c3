package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// Env is one running `shellctl serve` on loopback with its own temporary
// state dir and Home.
type Env struct {
	Bin   string // directory of the shellctl binaries
	Dir   string // temporary root: home/, state/, scratch/
	Home  string
	State string
	Tmp   string // scratch space of the floors, same filesystem
	URL   string // http://ADDR
	Token string
	PID   int

	HTTP   *http.Client
	Client *client.Client

	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	stderr []string // last lines of the server's stderr
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// StartEnv starts the server from bin and waits until it serves.
func StartEnv(ctx context.Context, bin string) (*Env, error) {
	return StartEnvWith(ctx, bin, nil)
}

// StartEnvWith starts a server as StartEnv does, with extra environment
// variables (NAME=VALUE) for it: the bench's own knobs, such as the
// floor of a row measured on a second server.
func StartEnvWith(ctx context.Context, bin string, extraEnv []string) (*Env, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	exe := filepath.Join(bin, "shellctl")
	for _, b := range []string{exe, filepath.Join(bin, "shellctl-runner")} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%w (build with `make build` or pass --bin)", err)
		}
	}
	dir, err := os.MkdirTemp(benchTempDir(), "shellctl-bench-")
	if err != nil {
		return nil, err
	}
	e := &Env{Bin: bin, Dir: dir, Home: filepath.Join(dir, "home"), State: filepath.Join(dir, "state"),
		Tmp: filepath.Join(dir, "scratch"), done: make(chan struct{})}
	for _, d := range []string{e.Home, e.State, e.Tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	tok := make([]byte, 16)
	rand.Read(tok)
	e.Token = hex.EncodeToString(tok)

	args := []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", e.State}
	// Extra serve flags, to compare settings (e.g. --warm-runners 4).
	args = append(args, strings.Fields(os.Getenv("SHELLCTL_BENCH_SERVE_FLAGS"))...)
	e.cmd = exec.Command(exe, args...)
	env := append([]string{"HOME=" + e.Home, "SHELLCTL_AUTH_TOKEN=" + e.Token}, extraEnv...)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "SHELLCTL_AUTH_TOKEN" && k != "XDG_DATA_HOME" {
			env = append(env, kv)
		}
	}
	e.cmd.Env = env
	e.cmd.Dir = e.Home
	errPipe, err := e.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e.PID = e.cmd.Process.Pid
	go func() { e.cmd.Wait(); close(e.done) }()

	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			e.mu.Lock()
			e.stderr = append(e.stderr, line)
			if len(e.stderr) > 50 {
				e.stderr = e.stderr[len(e.stderr)-50:]
			}
			e.mu.Unlock()
			if m := servingRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, errPipe)
	}()
	select {
	case e.URL = <-addr:
	case <-e.done:
		err := fmt.Errorf("shellctl serve exited before serving:\n%s", e.StderrTail())
		e.Close()
		return nil, err
	case <-time.After(15 * time.Second):
		e.Close()
		return nil, fmt.Errorf("shellctl serve printed no `serving on` line in 15 s:\n%s", e.StderrTail())
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	e.HTTP = &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	e.Client = &client.Client{BaseURL: e.URL, Token: e.Token, HTTP: e.HTTP}
	return e, nil
}

// StderrTail returns the last lines the server printed.
func (e *Env) StderrTail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.stderr, "\n")
}

// Alive reports whether the server still runs.
func (e *Env) Alive() bool {
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// Close terminates what still runs of the jobs, stops the server, ends
// leftover runner processes of this state dir, and removes the temporary
// directory.
func (e *Env) Close() {
	if e.Client != nil && e.Alive() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		e.TerminateRunning(ctx)
		cancel()
	}
	if e.cmd != nil && e.cmd.Process != nil && e.Alive() {
		e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			e.cmd.Process.Kill()
			<-e.done
		}
	}
	// Runners live in their own sessions and survive the server: end the
	// ones of our state dir (and their process groups) by pid.
	for _, pid := range ProcsWithArgs("--state-dir", e.State) {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if e.HTTP != nil {
		e.HTTP.CloseIdleConnections()
	}
	if e.Dir != "" {
		os.RemoveAll(e.Dir)
	}
}

// TerminateRunning terminates every job that is not done.
func (e *Env) TerminateRunning(ctx context.Context) {
	for _, st := range []string{"running", "starting", "created"} {
		jobs, err := e.Client.List(ctx, st, 200)
		if err != nil {
			return
		}
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.JobID
		}
		e.Terminate(ctx, ids)
	}
}

// Terminate ends jobs, 8 at a time.
func (e *Env) Terminate(ctx context.Context, ids []string) {
	parallel(8, len(ids), func(i int) {
		e.Client.Terminate(ctx, ids[i], 1)
	})
}

// parallel calls f(0..n-1) on w goroutines.
func parallel(w, n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// ProcsWithArgs returns the pids whose command line contains flag
// immediately followed by value.
func ProcsWithArgs(flag, value string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", de.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == flag && args[i+1] == value {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// Descendants returns the pids of every process below root.
func Descendants(root int) []int {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if pp, err := ppid(pid); err == nil {
			children[pp] = append(children[pp], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func ppid(pid int) (int, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, errors.New("bad stat")
	}
	return strconv.Atoi(f[1])
}

// ExeBase returns the base name of a process's executable ("" if gone).
func ExeBase(pid int) string {
	p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSuffix(p, " (deleted)"))
}

// procKB reads a "Key:   N kB" line of a /proc file, in bytes.
func procKB(path, key string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return n << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

// RSS is a process's resident set size in bytes.
func RSS(pid int) (int64, error) {
	return procKB("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS")
}

// PSS is a process's proportional set size in bytes.
func PSS(pid int) (int64, error) {
	return procKB("/proc/"+strconv.Itoa(pid)+"/smaps_rollup", "Pss")
}

// CPUModel returns the model name of the first CPU in /proc/cpuinfo.
func CPUModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func readFileString(path string) (string, error) {
	raw, err := os.ReadFile(path)
	return string(raw), err
}
