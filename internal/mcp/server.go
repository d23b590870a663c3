package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/client"
)

// Defaults of Options.
const (
	DefaultOutputCap = 16384
	DefaultMaxWait   = 50 * time.Second
	// defaultWait is how long run and wait wait when the model gives no
	// timeout_seconds.
	defaultWait = 15 * time.Second
	// inputWait is shell_input's default wait for the job's reaction.
	inputWait = 5 * time.Second
	// idleFlush: an answer comes once new output has paused this long (or
	// at once when the job waits for input, where the server can tell).
	idleFlush = 1.0
	// interruptWait bounds the look at the job after a signal.
	interruptWait = 3.0
	// maxSessionJobs is how many jobs a session remembers (shell_list); the
	// oldest are forgotten first (they stay on the server).
	maxSessionJobs = 500
)

// protocolVersions are the MCP revisions offered: those with sessions. The
// tools keep each job's read cursor per session, and the 2026-07-28
// revision has none.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Options configure the MCP server.
type Options struct {
	// OutputCap is the most output bytes one answer carries (default
	// DefaultOutputCap); the rest stays for the next shell_wait.
	OutputCap int
	// MaxWait is the longest a call waits (default DefaultMaxWait): MCP
	// clients give up on a call after about a minute.
	MaxWait time.Duration
	Version string
	Logger  *slog.Logger
	// Files serves the file tools (read_file, write_file, edit_file,
	// list_dir) through the file routes; nil: no file tools.
	Files *client.Client
}

// Server is shellctl's MCP server: the tools, and each session's jobs and
// read cursors.
type Server struct {
	jobs Jobs
	opts Options
	srv  *sdk.Server

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*session
}

// session is what one MCP session knows: its jobs, newest last, and how far
// it has read each one's output.
type session struct {
	tag string // the session_id its runs carry

	mu    sync.Mutex
	jobs  map[string]*jobState
	order []string
}

type jobState struct {
	cursor int64
	script string // first line, shortened, for shell_list
	mode   string
}

// New makes the MCP server over jobs.
func New(jobs Jobs, opts Options) *Server {
	if opts.OutputCap <= 0 {
		opts.OutputCap = DefaultOutputCap
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{jobs: jobs, opts: opts, sessions: map[*sdk.ServerSession]*session{}}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "shellctl", Title: "shellctl: a shell for agents", Version: opts.Version}, &sdk.ServerOptions{
		Instructions: "Run shell commands as jobs with shell_run. Each answer carries the output since the previous answer about that job " +
			fmt.Sprintf("(at most %d bytes); read more with shell_wait, answer prompts with shell_input, stop a job with shell_interrupt. "+
				"For full-screen programs (vim, less, top, curses menus) read what the terminal shows with shell_screen and press keys with shell_keys.", opts.OutputCap),
		Logger:                    opts.Logger,
		SupportedProtocolVersions: protocolVersions,
	})
	s.addTools()
	return s
}

// SDK is the underlying SDK server (to Run it on a transport).
func (s *Server) SDK() *sdk.Server { return s.srv }

// RunStdio serves one session on stdin and stdout until it ends.
func (s *Server) RunStdio(ctx context.Context) error {
	return s.srv.Run(ctx, &sdk.StdioTransport{})
}

// HTTPHandler is the Streamable HTTP transport (POST/GET/DELETE /mcp).
// Sessions idle for sessionTimeout are closed. A call is answered with one
// JSON body rather than an event stream: no tool sends a notification before
// its answer, and a stream per call cost both ends its setup (in-process,
// client and server: 0.66 → 0.52 ms per shell_status).
func (s *Server) HTTPHandler(sessionTimeout time.Duration) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{
		SessionTimeout: sessionTimeout,
		Logger:         s.opts.Logger,
		JSONResponse:   true,
	})
}

// sessionOf returns the state of ss, made on its first tool call and
// dropped when the session ends.
func (s *Server) sessionOf(ss *sdk.ServerSession) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.sessions[ss]; ok {
		return st
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	st := &session{tag: "mcp-" + hex.EncodeToString(b[:]), jobs: map[string]*jobState{}}
	s.sessions[ss] = st
	if ss != nil {
		go func() {
			_ = ss.Wait()
			s.mu.Lock()
			delete(s.sessions, ss)
			s.mu.Unlock()
		}()
	}
	return st
}

// state returns the session's state of job id, made (cursor 0) for a job
// it has not seen: a job started elsewhere is read from its start.
func (st *session) state(id string) *jobState {
	st.mu.Lock()
	defer st.mu.Unlock()
	if js, ok := st.jobs[id]; ok {
		return js
	}
	js := &jobState{}
	st.jobs[id] = js
	return js
}

func (st *session) cursor(id string) int64 {
	js := st.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	return js.cursor
}

// advance moves job id's cursor to off (never back: two calls at once may
// answer out of order).
func (st *session) advance(id string, off int64) {
	js := st.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	js.cursor = max(js.cursor, off)
}

// started records a job run in this session.
func (st *session) started(id, script, mode string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.jobs[id] = &jobState{script: summary(script), mode: mode}
	st.order = append(st.order, id)
	if len(st.order) > maxSessionJobs {
		old := st.order[0]
		st.order = st.order[1:]
		delete(st.jobs, old)
	}
}

// summary is a script's first line, at most 80 characters.
func summary(script string) string {
	line, _, more := strings.Cut(strings.TrimSpace(script), "\n")
	r := []rune(line)
	if len(r) > 80 {
		return string(r[:79]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}

// Answer is what run, wait, input and interrupt answer.
type Answer struct {
	JobID    string `json:"job_id" jsonschema:"the job's id, for shell_wait, shell_input, shell_interrupt and shell_status"`
	Status   string `json:"status" jsonschema:"created, starting, running, exited, terminated (ended by a signal or request), failed (could not start) or lost"`
	Done     bool   `json:"done" jsonschema:"true once the job has ended"`
	ExitCode *int   `json:"exit_code" jsonschema:"the exit code once the job has exited, else null"`
	Output   string `json:"output" jsonschema:"the job's output since the previous answer about this job in this session (terminal control sequences removed)"`
	// MoreOutput: bytes past the cap are already written.
	MoreOutput bool `json:"more_output_pending" jsonschema:"true when this answer was cut at the output cap and more output is already waiting: call shell_wait to read it"`
	// InputWait is nil when the server cannot tell.
	InputWait *bool  `json:"input_wait" jsonschema:"true when the job is blocked reading its terminal (a prompt): answer with shell_input; null when the server cannot tell (stdio jobs)"`
	Note      string `json:"note,omitempty" jsonschema:"what to do next, when there is something to say"`
}

// answer turns a window into an Answer, moving the session's cursor.
func (s *Server) answer(st *session, w *Window) (*sdk.CallToolResult, Answer) {
	out, held := cleanOutput(w.Output)
	if !w.Truncated {
		// A sequence cut by the cap is finished by the next window, which
		// is already written: it waits for it. Otherwise nothing may come
		// soon (a progress line ending in "\r"), and holding it back would
		// make the next wait answer at once with nothing new: it is shown.
		out, held = out+w.Output[len(w.Output)-held:], 0
	}
	st.advance(w.JobID, w.Offset-int64(held))
	a := Answer{JobID: w.JobID, Status: w.Status, Done: w.Done, ExitCode: w.ExitCode, Output: out,
		MoreOutput: w.Truncated, InputWait: w.InputWait}
	var notes []string
	if w.Truncated {
		notes = append(notes, fmt.Sprintf("output cut at the cap of %d bytes per answer; more is waiting: call shell_wait for the rest", s.opts.OutputCap))
	}
	switch {
	case w.InputWait != nil && *w.InputWait:
		notes = append(notes, "the job waits for input: answer with shell_input")
	case !w.Done && !w.Truncated:
		notes = append(notes, "the job is still running: call shell_wait for more output, shell_interrupt to stop it")
	}
	a.Note = strings.Join(notes, "; ")
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: render(a)}}}, a
}

// render is the answer as a model reads it: the output, then one line on
// the job.
func render(a Answer) string {
	var b strings.Builder
	b.WriteString(a.Output)
	if a.Output != "" && !strings.HasSuffix(a.Output, "\n") {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "[job %s: %s", a.JobID, a.Status)
	if a.ExitCode != nil {
		fmt.Fprintf(&b, ", exit code %d", *a.ExitCode)
	}
	if a.Note != "" {
		b.WriteString("; " + a.Note)
	}
	b.WriteString("]")
	return b.String()
}

// toolError is the message of a failed call, for the model: the API's
// message and code, and what to do where that is known.
func toolError(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the call was cancelled: %w", err)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("cannot reach the shellctl server (is `shellctl serve` running at the address given to --server?): %w", err)
		}
		return fmt.Errorf("shellctl server: %w", err)
	}
	msg := fmt.Sprintf("%s (%s)", ce.Message, ce.Code)
	switch ce.Code {
	case "job_not_found":
		msg += ": check the job_id; shell_list shows this session's jobs"
	case "input_unsupported":
		msg += ": only jobs run with mode \"pty\" (the default) take input"
	case "job_not_running":
		msg += ": the job has ended; shell_wait reads the rest of its output"
	case "unauthorized":
		msg += ": shellctl mcp needs the server's token (--token-file or --auth-token)"
	}
	return errors.New(msg)
}

// seconds bounds a timeout the model gave (nil: def).
func (s *Server) seconds(v *float64, def time.Duration) float64 {
	d := def
	if v != nil {
		d = time.Duration(*v * float64(time.Second))
	}
	return min(max(d, 0), s.opts.MaxWait).Seconds()
}
