package mcp

// The screen tools: shell_screen reads what a pty job's terminal shows,
// shell_keys types keys on it and answers the screen once the program has
// settled (docs/api.md "Screen and keys"; the routes /v1/jobs/{id}/screen and
// /v1/jobs/{id}/keys).

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/screen"
)

// maxScrollback is the most scrollback rows a tool asks for (the runner
// keeps no more).
const maxScrollback = screen.ScrollbackLines

type (
	screenIn struct {
		JobID      string `json:"job_id" jsonschema:"the job's id (a pty job)"`
		Scrollback int    `json:"scrollback,omitempty" jsonschema:"also return up to this many rows that scrolled off the top of the screen, oldest first"`
	}
	keysIn struct {
		JobID          string   `json:"job_id" jsonschema:"the job's id (a pty job that is running)"`
		Keys           []string `json:"keys" jsonschema:"what to type, in order: each entry a key name or literal text such as \":wq\". Key names, in any case: Enter, Tab, BTab, Escape, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1…F12, C-x or ctrl-x or ^X for Ctrl+x, M-x or alt-x for Alt+x. To type a key name as text, split it: [\"e\", \"nd\"]. Cursor keys follow the program's cursor key mode."`
		Scrollback     int      `json:"scrollback,omitempty" jsonschema:"also return up to this many scrolled-off rows with the screen"`
		TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"the longest to wait for the program to settle after the keys before answering the screen as it is"`
	}
)

// ScreenAnswer is the answer of shell_screen and shell_keys.
type ScreenAnswer struct {
	JobID  string `json:"job_id"`
	Cols   int    `json:"cols"`
	Rows   int    `json:"rows"`
	Cursor struct {
		Row     int  `json:"row" jsonschema:"the cursor's row, from 0: an index into lines"`
		Col     int  `json:"col" jsonschema:"the cursor's column, from 0"`
		Visible bool `json:"visible"`
	} `json:"cursor"`
	AltScreen  bool      `json:"alt_screen" jsonschema:"true while the program uses the alternate screen (less, vim, top, curses programs); false once it has left it"`
	Title      string    `json:"title" jsonschema:"the terminal title the program set, if any"`
	Lines      []string  `json:"lines" jsonschema:"the text of each row of the screen, top to bottom, trailing blanks trimmed"`
	Scrollback *[]string `json:"scrollback,omitempty" jsonschema:"rows that scrolled off the top, oldest first (when asked for)"`
	Note       string    `json:"note,omitempty" jsonschema:"what was left out of this answer, when something was"`
}

// Jobs' screen methods over the /v1 API.

// Screen returns a pty job's screen.
func (j ClientJobs) Screen(ctx context.Context, id string, scrollback int) (*client.Screen, error) {
	return j.C.Screen(ctx, id, scrollback)
}

// Keys types keys on a pty job's terminal and returns the settled screen.
func (j ClientJobs) Keys(ctx context.Context, id string, r client.KeysRequest) (*client.Screen, error) {
	return j.C.Keys(ctx, id, r)
}

func (s *Server) addScreenTools() {
	when := "Use it for full-screen and redrawing programs (vim, less, top, htop, man, curses menus, REPLs that redraw, progress bars): " +
		"there the output that shell_wait returns is a stream of cursor moves, and what matters is what the screen shows now. " +
		"For plain commands that print lines (builds, tests, scripts) shell_run and shell_wait are the right view. "
	bound := fmt.Sprintf("An answer carries at most about %d bytes of rows: when more was asked, the oldest scrollback rows are left out first (note says so). ", s.opts.OutputCap)

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_screen",
		Title: "What a job's terminal shows",
		Description: "Read the screen of a job's terminal (jobs run with mode pty, the default), as a terminal emulator renders what the program wrote: " +
			"lines (one per row, top to bottom), the cursor (row and column from 0), alt_screen (true while a full-screen program such as less or vim " +
			"uses the alternate screen) and the title. " + when + "Type into such a program with shell_keys, which answers the screen too. " +
			"Optionally scrollback: earlier rows that scrolled off the top. Works after the job has ended too (its last screen). " + bound +
			"Errors: a stdio job has no screen.",
		InputSchema: schemaFor[screenIn](func(p map[string]*jsonschema.Schema) {
			p["scrollback"].Minimum, p["scrollback"].Maximum = num(0), num(maxScrollback)
			p["scrollback"].Default = []byte("0")
		}),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
	}, s.screen)

	addTool(s.srv, &sdk.Tool{
		Name:  "shell_keys",
		Title: "Press keys in a full-screen program",
		// Short: a model reads it on every turn. The key names and the
		// bound on rows are in the schema of keys and in shell_screen's.
		Description: "Press keys in a running pty job's full-screen program (vim, less, top, menus), in order, then answer its screen " +
			"(as shell_screen) once the program settles. Each entry is a key name or literal text: [\"Escape\", \":wq\", \"Enter\"] in vim, " +
			"[\"Down\", \"Enter\"] in a menu, [\"q\"] in less. For a line prompt (read, a password, a shell) use shell_input.",
		InputSchema: schemaFor[keysIn](func(p map[string]*jsonschema.Schema) {
			p["scrollback"].Minimum, p["scrollback"].Maximum = num(0), num(maxScrollback)
			p["scrollback"].Default = []byte("0")
			p["keys"].MinItems = intp(1)
			p["keys"].MaxItems = intp(1000)
			t := p["timeout_seconds"]
			hi := min(s.opts.MaxWait.Seconds(), 60)
			t.Minimum, t.Maximum = num(0.001), num(hi)
			t.Default = []byte("3")
			t.Description += fmt.Sprintf(" (seconds, default 3, at most %g)", hi)
		}),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(true)},
	}, s.keys)
}

func intp(n int) *int { return &n }

func checkScrollback(n int) error {
	if n < 0 || n > maxScrollback {
		return fmt.Errorf("scrollback %d is not within 0..%d: give how many earlier rows to add (0 for none)", n, maxScrollback)
	}
	return nil
}

func (s *Server) screen(ctx context.Context, _ *sdk.CallToolRequest, in screenIn) (*sdk.CallToolResult, ScreenAnswer, error) {
	if err := checkScrollback(in.Scrollback); err != nil {
		return nil, ScreenAnswer{}, err
	}
	sc, err := s.jobs.Screen(ctx, in.JobID, in.Scrollback)
	if err != nil {
		return nil, ScreenAnswer{}, screenError(err)
	}
	res, a := s.screenAnswer(in.JobID, sc)
	return res, a, nil
}

func (s *Server) keys(ctx context.Context, _ *sdk.CallToolRequest, in keysIn) (*sdk.CallToolResult, ScreenAnswer, error) {
	if len(in.Keys) == 0 {
		return nil, ScreenAnswer{}, errors.New("keys is empty: give the keys to press, such as [\"Down\", \"Enter\"] or [\"Escape\", \":wq\", \"Enter\"]")
	}
	if err := checkScrollback(in.Scrollback); err != nil {
		return nil, ScreenAnswer{}, err
	}
	keys := make([]string, len(in.Keys))
	for i, k := range in.Keys {
		keys[i] = keyName(k)
	}
	if _, err := screen.Keys(keys, false); err != nil {
		return nil, ScreenAnswer{}, fmt.Errorf("%w; key names: %s", err, keyNames())
	}
	r := client.KeysRequest{Keys: keys, Scrollback: in.Scrollback}
	if in.TimeoutSeconds != nil {
		r.TimeoutMS = int(min(max(*in.TimeoutSeconds, 0.001), min(s.opts.MaxWait.Seconds(), 60)) * 1000)
		r.TimeoutMS = max(r.TimeoutMS, 1)
	}
	sc, err := s.jobs.Keys(ctx, in.JobID, r)
	if err != nil {
		return nil, ScreenAnswer{}, screenError(err)
	}
	res, a := s.screenAnswer(in.JobID, sc)
	return res, a, nil
}

// keyName spells an entry of shell_keys as the screen package does when it
// names a key in another case or spelling (enter, ctrl-c, ^C, alt-b);
// anything else is literal text, as the route takes it.
func keyName(k string) string {
	n := normalize(k)
	if n == k {
		return k
	}
	b, err := screen.Keys([]string{n}, false)
	if err != nil || string(b) == n {
		return k // not a name after all: the text as given
	}
	return n
}

// screenError is toolError with what to do about the screen's own errors.
func screenError(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case "screen_unsupported", "input_unsupported":
			return fmt.Errorf("%s (%s): a stdio job has no terminal; read its output with shell_wait, or run the program with mode \"pty\" (the default)", ce.Message, ce.Code)
		case "job_not_running":
			return fmt.Errorf("%s (%s): the job has ended, keys cannot reach it; shell_screen shows its last screen", ce.Message, ce.Code)
		}
	}
	return toolError(err)
}

// screenAnswer bounds a screen to the output cap (leaving out the oldest
// scrollback rows first, then the bottom rows) and renders it.
func (s *Server) screenAnswer(id string, sc *client.Screen) (*sdk.CallToolResult, ScreenAnswer) {
	a := ScreenAnswer{JobID: id, Cols: sc.Cols, Rows: sc.Rows, AltScreen: sc.AltScreen, Title: sc.Title, Lines: sc.Lines}
	a.Cursor.Row, a.Cursor.Col, a.Cursor.Visible = sc.Cursor.Row, sc.Cursor.Col, sc.Cursor.Visible
	if a.Lines == nil {
		a.Lines = []string{}
	}
	var sb []string
	if sc.Scrollback != nil {
		sb = *sc.Scrollback
	}
	size := func(rows []string) int {
		n := 0
		for _, r := range rows {
			n += len(r) + 1
		}
		return n
	}
	budget := s.opts.OutputCap
	var notes []string
	if over := size(a.Lines) - budget; over > 0 {
		keep := 0
		for n := 0; keep < len(a.Lines) && n+len(a.Lines[keep])+1 <= budget; keep++ {
			n += len(a.Lines[keep]) + 1
		}
		notes = append(notes, fmt.Sprintf("the screen is larger than the answer's cap of %d bytes: rows %d..%d are left out", budget, keep, len(a.Lines)-1))
		a.Lines = a.Lines[:keep]
		sb = nil
	} else {
		left := budget - size(a.Lines)
		first := len(sb)
		for n := 0; first > 0 && n+len(sb[first-1])+1 <= left; first-- {
			n += len(sb[first-1]) + 1
		}
		if first > 0 {
			notes = append(notes, fmt.Sprintf("the %d oldest scrollback rows are left out (the answer's cap is %d bytes)", first, budget))
		}
		sb = sb[first:]
	}
	if sc.Scrollback != nil {
		if sb == nil {
			sb = []string{}
		}
		a.Scrollback = &sb
	}
	a.Note = strings.Join(notes, "; ")
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: renderScreen(a, sc.Scrollback != nil)}}}, a
}

// renderScreen is a screen as a model reads it: a header line, the
// scrollback when asked for, then the rows (trailing blank rows counted,
// not shown).
func renderScreen(a ScreenAnswer, withScrollback bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[screen of job %s: %dx%d (cols x rows), cursor at row %d col %d", a.JobID, a.Cols, a.Rows, a.Cursor.Row, a.Cursor.Col)
	if !a.Cursor.Visible {
		b.WriteString(" (hidden)")
	}
	if a.AltScreen {
		b.WriteString(", alternate screen (a full-screen program)")
	} else {
		b.WriteString(", main screen")
	}
	if a.Title != "" {
		fmt.Fprintf(&b, ", title %q", a.Title)
	}
	if a.Note != "" {
		b.WriteString("; " + a.Note)
	}
	b.WriteString("]\n")
	if withScrollback {
		fmt.Fprintf(&b, "--- scrollback: %d rows, oldest first ---\n", len(*a.Scrollback))
		for _, l := range *a.Scrollback {
			b.WriteString(l + "\n")
		}
		b.WriteString("--- screen ---\n")
	}
	drawn := screen.Drawn(a.Lines)
	for _, l := range drawn {
		b.WriteString(l + "\n")
	}
	if last := len(drawn); last < len(a.Lines) {
		fmt.Fprintf(&b, "[rows %d..%d are blank]\n", last, len(a.Lines)-1)
	}
	return b.String()
}
