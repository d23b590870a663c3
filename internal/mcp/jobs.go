// Package mcp makes shellctl a Model Context Protocol server: tools that run
// shell scripts as jobs, read their output in bounded pieces, answer their
// prompts and interrupt them, built on the official Go SDK.
//
// The tools reach the job service through Jobs. ClientJobs is its one
// implementation: the /v1 API through internal/client. `shellctl mcp`
// (stdio) gives it a client of a remote `shellctl serve`; `POST/GET /mcp` on
// serve gives it a client whose transport is InProcess: each call is handed
// to the API's own handler in the same process, with no socket. So both
// transports run exactly the validation, errors, logs and metrics of the
// /v1 routes, and the tools have one code path.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/shellctl/shellctl/internal/client"
)

// Window is one answer of run, wait or input: a window of the output, and
// whether the job waits for input (nil when the server does not say: stdio
// jobs, or a server without input-wait detection).
type Window struct {
	client.JobResult
	InputWait *bool
}

// WaitRequest bounds one wait.
type WaitRequest struct {
	Offset           int64   `json:"offset"`
	Timeout          float64 `json:"timeout"`
	OutputLimit      int     `json:"output_limit,omitempty"`
	IdleFlushSeconds float64 `json:"idle_flush_seconds,omitempty"`
	// ReturnOnInputWait asks for the answer as soon as the job waits for
	// input (extended-api.md §4); servers without it ignore the field.
	ReturnOnInputWait bool `json:"return_on_input_wait,omitempty"`
}

// RunRequest is the body of run.
type RunRequest struct {
	Script            string            `json:"script"`
	Mode              string            `json:"mode,omitempty"`
	Stdin             string            `json:"stdin,omitempty"`
	Cwd               string            `json:"cwd,omitempty"`
	Env               map[string]string `json:"env,omitempty"`
	SessionID         string            `json:"session_id,omitempty"`
	Timeout           float64           `json:"timeout,omitempty"`
	OutputLimit       int               `json:"output_limit,omitempty"`
	IdleFlushSeconds  float64           `json:"idle_flush_seconds,omitempty"`
	ReturnOnInputWait bool              `json:"return_on_input_wait,omitempty"`
}

// Jobs is the job service as the tools use it. Errors of the service are
// *client.Error (the API's code and message).
type Jobs interface {
	Run(ctx context.Context, r RunRequest) (*Window, error)
	Wait(ctx context.Context, id string, w WaitRequest) (*Window, error)
	// Input sends text to a job's terminal or stdin pipe, closing the
	// pipe after it when eof (Ctrl-D for a terminal), then waits.
	Input(ctx context.Context, id, text string, eof bool, w WaitRequest) (*Window, error)
	// Signal sends a signal (a name such as "INT", or a number) to the
	// job's foreground process group (pty) or process group (stdio).
	Signal(ctx context.Context, id, signal string) error
	// Terminate ends the job's whole process tree (SIGTERM, SIGKILL after
	// grace seconds) and returns once nothing of it is left.
	Terminate(ctx context.Context, id string, grace float64) error
	// Record is the job's full record (extended-api.md §2), the JSON
	// object as the API answers it.
	Record(ctx context.Context, id string) (json.RawMessage, error)
	// Screen is what a pty job's terminal shows, with up to scrollback
	// earlier rows (docs/api.md "Screen and keys").
	Screen(ctx context.Context, id string, scrollback int) (*client.Screen, error)
	// Keys types keys on a running pty job's terminal and returns its
	// screen once the program has settled.
	Keys(ctx context.Context, id string, r client.KeysRequest) (*client.Screen, error)
}

// InputWaitHeader is the extended API's header that tells whether a pty job
// waits for input at answer time.
const InputWaitHeader = "X-Shellctl-Input-Wait"

// ClientJobs is Jobs over the /v1 API.
type ClientJobs struct{ C *client.Client }

func jobPath(id, verb string) string {
	p := "/v1/jobs/" + url.PathEscape(id)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

func windowOf(h http.Header, r client.JobResult) *Window {
	w := &Window{JobResult: r}
	switch h.Get(InputWaitHeader) {
	case "1":
		t := true
		w.InputWait = &t
	case "0":
		f := false
		w.InputWait = &f
	}
	return w
}

// Run starts a job.
func (j ClientJobs) Run(ctx context.Context, r RunRequest) (*Window, error) {
	var out client.JobResult
	h, err := j.C.Call(ctx, http.MethodPost, "/v1/jobs/run", r, &out)
	if err != nil {
		return nil, err
	}
	return windowOf(h, out), nil
}

// Wait waits for a job's output or end.
func (j ClientJobs) Wait(ctx context.Context, id string, w WaitRequest) (*Window, error) {
	var out client.JobResult
	h, err := j.C.Call(ctx, http.MethodPost, jobPath(id, "wait"), w, &out)
	if err != nil {
		return nil, err
	}
	return windowOf(h, out), nil
}

// Input sends text to a job's terminal or stdin pipe, then waits.
func (j ClientJobs) Input(ctx context.Context, id, text string, eof bool, w WaitRequest) (*Window, error) {
	body := struct {
		Text string `json:"text"`
		EOF  bool   `json:"eof,omitempty"`
		WaitRequest
	}{text, eof, w}
	var out client.JobResult
	h, err := j.C.Call(ctx, http.MethodPost, jobPath(id, "input"), body, &out)
	if err != nil {
		return nil, err
	}
	return windowOf(h, out), nil
}

// Signal signals a job.
func (j ClientJobs) Signal(ctx context.Context, id, signal string) error {
	_, err := j.C.Call(ctx, http.MethodPost, jobPath(id, "signal"), map[string]string{"signal": signal}, nil)
	return err
}

// Terminate ends a job.
func (j ClientJobs) Terminate(ctx context.Context, id string, grace float64) error {
	_, err := j.C.Call(ctx, http.MethodPost, jobPath(id, "terminate"), map[string]float64{"grace_seconds": grace}, nil)
	return err
}

// Record returns a job's record.
func (j ClientJobs) Record(ctx context.Context, id string) (json.RawMessage, error) {
	var out json.RawMessage
	if _, err := j.C.Call(ctx, http.MethodGet, jobPath(id, "record"), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// InProcess is an http.RoundTripper that hands every request to h in this
// process: the request never touches a socket, and h answers it as it
// answers one from the network (auth, validation, logs, metrics).
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	sr := req.Clone(req.Context())
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "in-process"
	if sr.Host == "" {
		sr.Host = req.URL.Host
	}
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, sr)
	if req.Body != nil {
		req.Body.Close()
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status: http.StatusText(rec.status), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder holds one in-process answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
