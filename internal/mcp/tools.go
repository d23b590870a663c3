package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/api"
	"github.com/shellctl/shellctl/internal/client"
)

// The tools' inputs. Fields without omitempty are required.
type (
	runIn struct {
		Script         string            `json:"script" jsonschema:"the shell script to run: one command or many lines; run by /bin/sh unless it starts with #!"`
		Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory: absolute, or relative to the server's home (default: the home)"`
		TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"how long this call waits for the job to end before answering with the output so far; the job keeps running after"`
		Mode           string            `json:"mode,omitempty" jsonschema:"pty: a terminal, takes input (default); stdio: plain pipes, stderr kept apart, input only with stdin pipe"`
		Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for the job"`
		Stdin          string            `json:"stdin,omitempty" jsonschema:"stdio jobs only: pipe gives the job a stdin pipe that shell_input writes to byte for byte (a REPL, a JSON-RPC or language server); null (default) is /dev/null"`
	}
	waitIn struct {
		JobID          string   `json:"job_id" jsonschema:"the job's id, from shell_run or shell_list"`
		TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for new output or the job's end"`
	}
	inputIn struct {
		JobID          string   `json:"job_id" jsonschema:"the job's id (a pty job, or a stdio job run with stdin pipe)"`
		Text           string   `json:"text,omitempty" jsonschema:"text to type, sent as is: end it with a newline to submit a line (or add the key Enter)"`
		Keys           []string `json:"keys,omitempty" jsonschema:"named keys to press after the text, in order (terminal keys: for a pty job)"`
		EOF            bool     `json:"eof,omitempty" jsonschema:"after the text: close a stdio job's stdin pipe (the program reads end of file); for a pty job, Ctrl-D"`
		TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the job's reaction"`
	}
	interruptIn struct {
		JobID        string   `json:"job_id" jsonschema:"the job's id"`
		Signal       string   `json:"signal,omitempty" jsonschema:"signal to send (INT is Ctrl-C; also TERM, HUP, QUIT, KILL, USR1, or a number) to the job's foreground processes; ignored with terminate"`
		Terminate    bool     `json:"terminate,omitempty" jsonschema:"end the job's whole process tree instead: SIGTERM, then SIGKILL after grace_seconds; answers once nothing of it is left"`
		GraceSeconds *float64 `json:"grace_seconds,omitempty" jsonschema:"with terminate: seconds between SIGTERM and SIGKILL"`
	}
	statusIn struct {
		JobID string `json:"job_id" jsonschema:"the job's id"`
	}
	listIn struct{}
)

// listItem is one job of shell_list.
type listItem struct {
	JobID       string `json:"job_id"`
	Script      string `json:"script" jsonschema:"the script's first line"`
	Mode        string `json:"mode"`
	Status      string `json:"status" jsonschema:"running, exited, terminated, failed, lost; or gone when the server has removed the finished job"`
	ExitCode    *int   `json:"exit_code"`
	InputWait   *bool  `json:"input_wait" jsonschema:"the job waits for input (null: cannot tell)"`
	UnreadBytes int64  `json:"unread_bytes" jsonschema:"output bytes this session has not read yet (shell_wait reads them)"`
}

type listOut struct {
	Jobs []listItem `json:"jobs" jsonschema:"this session's jobs, oldest first"`
}

// schemaFor infers T's schema and lets adjust set what tags cannot say
// (defaults, bounds, enums).
func schemaFor[T any](adjust func(p map[string]*jsonschema.Schema)) *jsonschema.Schema {
	sc, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	// An optional field is left out, not null: its type says what to give.
	for _, p := range sc.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
	if adjust != nil {
		adjust(sc.Properties)
	}
	return sc
}

func num(f float64) *float64 { return &f }

// outputSchemaFor is the output schema the SDK infers for T.
// recordSchema is shell_status's answer: the OpenAPI document's Record
// (internal/api/openapi.json, which the integration tests hold every
// record to), with unread_bytes.
func recordSchema() *jsonschema.Schema {
	raw, err := api.Schema("Record")
	if err != nil {
		panic(err) // the embedded document: TestStatusSchemaIsTheRecords
	}
	var sc jsonschema.Schema
	if err := json.Unmarshal(raw, &sc); err != nil {
		panic(fmt.Errorf("the OpenAPI document's Record is not a JSON Schema: %w", err))
	}
	if sc.Properties == nil {
		sc.Properties = map[string]*jsonschema.Schema{}
	}
	sc.Properties["unread_bytes"] = &jsonschema.Schema{Type: "integer", Minimum: num(0),
		Description: "output bytes of the job this MCP session has not read yet"}
	return &sc
}

func outputSchemaFor[T any]() *jsonschema.Schema {
	sc, err := jsonschema.For[T](&jsonschema.ForOptions{})
	if err != nil {
		panic(err)
	}
	return sc
}

// addTool registers a tool as sdk.AddTool does, with its answer marshalled
// once. sdk.AddTool checks every answer against the tool's output schema:
// it marshals the answer, decodes that again into maps, validates them and
// marshals them once more — for shell_status's record, most of what a call
// cost the server. Our answers are our own types, the schema advertised is
// inferred from them as the SDK would (TestToolSchemasAreTheAnswers), so
// the answer goes out as it marshals, its keys in its fields' order.
func addTool[In, Out any](srv *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	if t.OutputSchema == nil {
		t.OutputSchema = outputSchemaFor[Out]()
	}
	sdk.AddTool(srv, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			return res, nil, err
		}
		if res == nil {
			res = &sdk.CallToolResult{}
		}
		var raw []byte
		if r, ok := any(out).(json.RawMessage); ok {
			raw = r // JSON already (the API's record): sent as it is
		} else if raw, err = json.Marshal(out); err != nil {
			return nil, nil, fmt.Errorf("marshal the answer of %s: %w", t.Name, err)
		}
		// An answer with no output (an error) is null: the SDK sent {}.
		if string(raw) == "null" {
			raw = []byte("{}")
		}
		res.StructuredContent = json.RawMessage(raw)
		if res.Content == nil {
			res.Content = []sdk.Content{&sdk.TextContent{Text: string(raw)}}
		}
		return res, nil, nil
	})
}

func (s *Server) timeoutSchema(p map[string]*jsonschema.Schema, def float64) {
	t := p["timeout_seconds"]
	t.Minimum, t.Maximum = num(0), num(s.opts.MaxWait.Seconds())
	t.Default = []byte(fmt.Sprint(def))
	t.Description += fmt.Sprintf(" (seconds, default %g, at most %g)", def, s.opts.MaxWait.Seconds())
}

func boolp(b bool) *bool { return &b }

func (s *Server) addTools() {
	capNote := fmt.Sprintf(" Output is capped at %d bytes per answer: when an answer is cut, more_output_pending is true and shell_wait returns the rest. "+
		"The server keeps this session's read position for each job, so every answer carries only output not yet seen.", s.opts.OutputCap)
	waitDef := defaultWait.Seconds()

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_run",
		Title: "Run a shell script",
		Description: "Run a shell script as a job and wait for it to end, at most timeout_seconds. Answers the output so far, the job_id, its status " +
			"and exit code, and whether it waits for input (a prompt: answer with shell_input). A job still running when the call answers goes on " +
			"in the background: follow it with shell_wait, stop it with shell_interrupt. The answer comes early when new output pauses for a second " +
			"or the job waits for input." + capNote,
		InputSchema: schemaFor[runIn](func(p map[string]*jsonschema.Schema) {
			s.timeoutSchema(p, waitDef)
			p["mode"].Enum = []any{"pty", "stdio"}
			p["stdin"].Enum = []any{"null", "pipe"}
			p["mode"].Default = []byte(`"pty"`)
		}),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(true)},
	}, s.run)

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_wait",
		Title: "Read more output of a job",
		Description: "Wait for more output of a job, or its end, at most timeout_seconds; returns early when new output pauses for a second, " +
			"when the job ends, or when it waits for input. Also reads the rest of an answer that was cut at the output cap (at once)." + capNote,
		InputSchema: schemaFor[waitIn](func(p map[string]*jsonschema.Schema) { s.timeoutSchema(p, waitDef) }),
		// Not read-only: it moves this session's read position, so a
		// second call answers other output.
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: boolp(false), IdempotentHint: false, OpenWorldHint: boolp(false)},
	}, s.wait)

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_input",
		Title: "Type into a job's terminal or stdin",
		Description: "Send text and/or named keys to a job's terminal (jobs run with mode pty, the default), or text to the stdin pipe of a " +
			"stdio job run with stdin pipe, then wait for its reaction like shell_wait. Text is sent as is: end a line with \"\\n\" to submit it; " +
			"eof closes a stdin pipe after the text. A program that does not read its stdin pipe makes the call fail with input_backpressure " +
			"after timeout_seconds, saying how many bytes it took. Keys: " + keyNames() + "." + capNote,
		InputSchema: schemaFor[inputIn](func(p map[string]*jsonschema.Schema) { s.timeoutSchema(p, inputWait.Seconds()) }),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(true)},
	}, s.input)

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_interrupt",
		Title: "Interrupt or end a job",
		Description: "Interrupt a job: send it a signal (default INT, as Ctrl-C does), or with terminate=true end its whole process tree " +
			"(SIGTERM, then SIGKILL after grace_seconds). Answers like shell_wait, with the output that followed.",
		InputSchema: schemaFor[interruptIn](func(p map[string]*jsonschema.Schema) {
			p["signal"].Default = []byte(`"INT"`)
			p["grace_seconds"].Minimum, p["grace_seconds"].Maximum = num(0), num(300)
			p["grace_seconds"].Default = []byte("2")
		}),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(false)},
	}, s.interrupt)

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_status",
		Title: "Everything known about a job",
		// The answer is the record as the API gives it (raw JSON), plus
		// unread_bytes: its schema is the OpenAPI document's Record.
		OutputSchema: recordSchema(),
		Description: "The full record of a job: status, exit code, the signal or reason it ended, cwd, mode, times, output size, " +
			"whether it waits for input, pid, isolation and limits applied, resource usage; plus unread_bytes, the output this session has not read.",
		InputSchema: schemaFor[statusIn](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
	}, s.status)

	addTool(s.srv, &sdk.Tool{
		Name:        "shell_list",
		Title:       "This session's jobs",
		Description: "List the jobs run in this MCP session, oldest first, with status, exit code, whether each waits for input and how much output is unread.",
		InputSchema: schemaFor[listIn](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
	}, s.list)

	s.addScreenTools() // screen.go
	s.addFileTools()   // files.go
}

func (s *Server) waitReq(st *session, id string, timeout float64) WaitRequest {
	return WaitRequest{Offset: st.cursor(id), Timeout: timeout, OutputLimit: s.opts.OutputCap, IdleFlushSeconds: idleFlush, ReturnOnInputWait: true}
}

func (s *Server) run(ctx context.Context, req *sdk.CallToolRequest, in runIn) (*sdk.CallToolResult, Answer, error) {
	if strings.TrimSpace(in.Script) == "" {
		return nil, Answer{}, errors.New("script is empty: give the shell commands to run")
	}
	st := s.sessionOf(req.Session)
	t := s.seconds(in.TimeoutSeconds, defaultWait)
	if t <= 0 {
		t = 0.001 // run takes 0 for its default: answer at once instead
	}
	w, err := s.jobs.Run(ctx, RunRequest{Script: in.Script, Mode: in.Mode, Stdin: in.Stdin, Cwd: in.Cwd, Env: in.Env, SessionID: st.tag,
		Timeout: t, OutputLimit: s.opts.OutputCap, IdleFlushSeconds: idleFlush, ReturnOnInputWait: true})
	if err != nil {
		return nil, Answer{}, toolError(err)
	}
	mode := in.Mode
	if mode == "" {
		mode = "pty"
	}
	st.started(w.JobID, in.Script, mode)
	res, a := s.answer(st, w)
	return res, a, nil
}

func (s *Server) wait(ctx context.Context, req *sdk.CallToolRequest, in waitIn) (*sdk.CallToolResult, Answer, error) {
	st := s.sessionOf(req.Session)
	w, err := s.jobs.Wait(ctx, in.JobID, s.waitReq(st, in.JobID, s.seconds(in.TimeoutSeconds, defaultWait)))
	if err != nil {
		return nil, Answer{}, toolError(err)
	}
	res, a := s.answer(st, w)
	return res, a, nil
}

func (s *Server) input(ctx context.Context, req *sdk.CallToolRequest, in inputIn) (*sdk.CallToolResult, Answer, error) {
	if in.Text == "" && len(in.Keys) == 0 && !in.EOF {
		return nil, Answer{}, errors.New("nothing to send: give text, keys, or both (or eof)")
	}
	k, err := keysText(in.Keys)
	if err != nil {
		return nil, Answer{}, err
	}
	st := s.sessionOf(req.Session)
	w, err := s.jobs.Input(ctx, in.JobID, in.Text+k, in.EOF, s.waitReq(st, in.JobID, s.seconds(in.TimeoutSeconds, inputWait)))
	if err != nil {
		return nil, Answer{}, toolError(err)
	}
	res, a := s.answer(st, w)
	return res, a, nil
}

func (s *Server) interrupt(ctx context.Context, req *sdk.CallToolRequest, in interruptIn) (*sdk.CallToolResult, Answer, error) {
	st := s.sessionOf(req.Session)
	look := interruptWait
	if in.Terminate {
		grace := 2.0
		if in.GraceSeconds != nil {
			grace = min(max(*in.GraceSeconds, 0), 300)
		}
		if err := s.jobs.Terminate(ctx, in.JobID, grace); err != nil {
			return nil, Answer{}, toolError(err)
		}
		look = 0 // it has ended: read what it wrote
	} else {
		sig := in.Signal
		if sig == "" {
			sig = "INT"
		}
		if err := s.jobs.Signal(ctx, in.JobID, sig); err != nil {
			return nil, Answer{}, toolError(err)
		}
	}
	w, err := s.jobs.Wait(ctx, in.JobID, s.waitReq(st, in.JobID, look))
	if err != nil {
		return nil, Answer{}, toolError(err)
	}
	res, a := s.answer(st, w)
	return res, a, nil
}

func (s *Server) status(ctx context.Context, req *sdk.CallToolRequest, in statusIn) (*sdk.CallToolResult, json.RawMessage, error) {
	st := s.sessionOf(req.Session)
	rec, err := s.jobs.Record(ctx, in.JobID)
	if err != nil {
		return nil, nil, toolError(err)
	}
	// The record goes out as the API wrote it, with unread_bytes added
	// at its end: not decoded into maps and encoded again.
	var head struct {
		OutputBytes *int64 `json:"output_bytes"`
	}
	if err := json.Unmarshal(rec, &head); err != nil {
		return nil, nil, fmt.Errorf("record of job %s is not a JSON object: %w", in.JobID, err)
	}
	body := bytes.TrimRight(rec, " \t\r\n")
	if head.OutputBytes == nil || len(body) < 2 || body[len(body)-1] != '}' {
		return nil, body, nil
	}
	out := make([]byte, 0, len(body)+32)
	out = append(out, body[:len(body)-1]...)
	if len(bytes.TrimSpace(body[1:len(body)-1])) > 0 { // not {}
		out = append(out, ',')
	}
	out = append(out, `"unread_bytes":`...)
	out = strconv.AppendInt(out, max(*head.OutputBytes-st.cursor(in.JobID), 0), 10)
	return nil, append(out, '}'), nil
}

func (s *Server) list(ctx context.Context, req *sdk.CallToolRequest, _ listIn) (*sdk.CallToolResult, listOut, error) {
	st := s.sessionOf(req.Session)
	st.mu.Lock()
	ids := append([]string(nil), st.order...)
	items := make([]listItem, len(ids))
	for i, id := range ids {
		js := st.jobs[id]
		items[i] = listItem{JobID: id, Script: js.script, Mode: js.mode}
	}
	st.mu.Unlock()
	for i := range items {
		it := &items[i]
		raw, err := s.jobs.Record(ctx, it.JobID)
		if err != nil {
			var ce *client.Error
			if errors.As(err, &ce) && ce.Code == "job_not_found" {
				it.Status = "gone"
				continue
			}
			return nil, listOut{}, toolError(err)
		}
		var rec struct {
			Status      string `json:"status"`
			ExitCode    *int   `json:"exit_code"`
			InputWait   *bool  `json:"input_wait"`
			OutputBytes *int64 `json:"output_bytes"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, listOut{}, fmt.Errorf("record of job %s: %w", it.JobID, err)
		}
		it.Status, it.ExitCode, it.InputWait = rec.Status, rec.ExitCode, rec.InputWait
		if rec.OutputBytes != nil {
			it.UnreadBytes = max(*rec.OutputBytes-st.cursor(it.JobID), 0)
		}
	}
	return nil, listOut{Jobs: items}, nil
}
