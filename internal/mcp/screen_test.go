package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shellctl/shellctl/internal/client"
)

const stdioID = "00000000000000bb"

// The fake's screen: lines, and the keys requests it was sent.
func (f *fakeJobs) Screen(_ context.Context, id string, scrollback int) (*client.Screen, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch id {
	case fakeID:
	case stdioID:
		return nil, &client.Error{Status: 409, Code: "screen_unsupported", Message: "job " + id + " runs in stdio mode: it has no terminal"}
	default:
		return nil, &client.Error{Status: 404, Code: "job_not_found", Message: "job " + id + " not found"}
	}
	sc := client.Screen{Cols: 80, Rows: len(f.lines), AltScreen: true, Title: "less", Lines: append([]string(nil), f.lines...)}
	sc.Cursor.Row, sc.Cursor.Col, sc.Cursor.Visible = len(f.lines)-1, 1, true
	if scrollback > 0 {
		sb := f.scrollback[max(len(f.scrollback)-scrollback, 0):]
		sc.Scrollback = &sb
	}
	return &sc, nil
}

func (f *fakeJobs) Keys(ctx context.Context, id string, r client.KeysRequest) (*client.Screen, error) {
	f.mu.Lock()
	f.keys = append(f.keys, r)
	f.mu.Unlock()
	if id == stdioID {
		return nil, &client.Error{Status: 409, Code: "input_unsupported", Message: "job " + id + " runs in stdio mode"}
	}
	return f.Screen(ctx, id, r.Scrollback)
}

func TestScreenTool(t *testing.T) {
	f := &fakeJobs{lines: []string{"line 1", "line 2", "", "", ":"}}
	cs := connect(t, New(f, Options{}))
	if in := cs.InitializeResult().Instructions; !strings.Contains(in, "shell_screen") || !strings.Contains(in, "shell_keys") {
		t.Errorf("the server's instructions do not point at the screen tools: %q", in)
	}
	res, _ := callTool(t, cs, "shell_screen", map[string]any{"job_id": fakeID})
	var a ScreenAnswer
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if res.IsError || a.Rows != 5 || !a.AltScreen || a.Cursor.Row != 4 || a.Title != "less" || len(a.Lines) != 5 || a.Lines[4] != ":" || a.Scrollback != nil || strings.Contains(string(raw), "scrollback") {
		t.Fatalf("shell_screen: %s / %q", raw, text(res))
	}
	want := "[screen of job " + fakeID + ": 80x5 (cols x rows), cursor at row 4 col 1, alternate screen (a full-screen program), title \"less\"]\nline 1\nline 2\n\n\n:\n"
	if text(res) != want {
		t.Errorf("shell_screen text %q, want %q", text(res), want)
	}
	// Blank rows at the bottom are counted, not shown.
	f.lines = []string{"$ ", "", ""}
	res, _ = callTool(t, cs, "shell_screen", map[string]any{"job_id": fakeID})
	if got := text(res); !strings.HasSuffix(got, "]\n$ \n[rows 1..2 are blank]\n") {
		t.Errorf("blank rows: %q", got)
	}
}

// The answer is bounded by the output cap: the oldest scrollback rows go
// first, then the bottom rows of a screen larger than the cap.
func TestScreenBounded(t *testing.T) {
	f := &fakeJobs{lines: []string{"aaaaaaaaa", "bbbbbbbbb"}}
	for i := range 50 {
		f.scrollback = append(f.scrollback, fmt.Sprintf("old %05d", i)) // 9 bytes + newline
	}
	cs := connect(t, New(f, Options{OutputCap: 100}))
	res, _ := callTool(t, cs, "shell_screen", map[string]any{"job_id": fakeID, "scrollback": 30})
	var a ScreenAnswer
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &a)
	// 100 bytes: 20 for the screen, 80 for 8 scrollback rows, the newest.
	if a.Scrollback == nil || len(*a.Scrollback) != 8 || (*a.Scrollback)[7] != "old 00049" || (*a.Scrollback)[0] != "old 00042" || !strings.Contains(a.Note, "22 oldest scrollback rows are left out") {
		t.Fatalf("bounded scrollback: %s", raw)
	}
	if !strings.Contains(text(res), "--- scrollback: 8 rows, oldest first ---\nold 00042\n") || !strings.Contains(text(res), "--- screen ---\naaaaaaaaa\nbbbbbbbbb\n") {
		t.Errorf("text %q", text(res))
	}
	f.lines = nil
	for i := range 30 {
		f.lines = append(f.lines, fmt.Sprintf("row %05d", i))
	}
	res, _ = callTool(t, cs, "shell_screen", map[string]any{"job_id": fakeID, "scrollback": 5})
	raw, _ = json.Marshal(res.StructuredContent)
	a = ScreenAnswer{}
	json.Unmarshal(raw, &a)
	if len(a.Lines) != 10 || a.Scrollback == nil || len(*a.Scrollback) != 0 || !strings.Contains(string(raw), `"scrollback":[]`) || !strings.Contains(a.Note, "rows 10..29 are left out") {
		t.Errorf("a screen over the cap: %s", raw)
	}
}

func TestKeysTool(t *testing.T) {
	f := &fakeJobs{lines: []string{"menu", "> two"}}
	cs := connect(t, New(f, Options{}))
	res, _ := callTool(t, cs, "shell_keys", map[string]any{"job_id": fakeID, "keys": []string{"down", "ctrl-c", "^D", "Escape", ":wq", "enter", "Hyper", "q"},
		"timeout_seconds": 2.5, "scrollback": 3})
	if res.IsError || !strings.Contains(text(res), "> two") {
		t.Fatalf("shell_keys: %q", text(res))
	}
	got := f.keys[0]
	// Names in other spellings become the route's names; the rest is text.
	if strings.Join(got.Keys, "|") != "Down|C-c|C-D|Escape|:wq|Enter|Hyper|q" || got.TimeoutMS != 2500 || got.Scrollback != 3 {
		t.Errorf("keys request %+v", got)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"job_id": fakeID, "keys": []string{"C-1"}}, `keys[0] "C-1"`},
		{map[string]any{"job_id": fakeID, "keys": []string{"F13"}}, `"F13"`},
		{map[string]any{"job_id": fakeID, "keys": []string{}}, "keys"},
		{map[string]any{"job_id": stdioID, "keys": []string{"q"}}, "a stdio job has no terminal"},
		{map[string]any{"job_id": "ffffffffffffffff", "keys": []string{"q"}}, "shell_list"},
	} {
		res, _ := callTool(t, cs, "shell_keys", c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("shell_keys %v: isError %v, %q; want a tool error with %q", c.args, res.IsError, text(res), c.want)
		}
	}
	if len(f.keys) != 3 {
		t.Errorf("%d keys requests reached the server, want 3 (bad keys are refused before)", len(f.keys))
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"job_id": stdioID}, "a stdio job has no terminal"},
		{map[string]any{"job_id": "ffffffffffffffff"}, "job_not_found"},
		{map[string]any{"job_id": fakeID, "scrollback": 5000}, "scrollback"},
	} {
		res, _ := callTool(t, cs, "shell_screen", c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("shell_screen %v: isError %v, %q; want a tool error with %q", c.args, res.IsError, text(res), c.want)
		}
	}
}

// ClientJobs reaches the screen routes with the body and query they take.
func TestClientJobsScreen(t *testing.T) {
	var paths, bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		paths, bodies = append(paths, r.Method+" "+r.URL.RequestURI()), append(bodies, string(raw))
		io.WriteString(w, `{"cols":80,"rows":2,"cursor":{"row":1,"col":0,"visible":true},"alt_screen":true,"title":"t","lines":["a","b"],"scrollback":["z"]}`)
	}))
	defer srv.Close()
	j := ClientJobs{C: &client.Client{BaseURL: srv.URL}}
	sc, err := j.Screen(context.Background(), fakeID, 7)
	if err != nil || sc.Rows != 2 || !sc.AltScreen || sc.Scrollback == nil || (*sc.Scrollback)[0] != "z" {
		t.Fatalf("screen %+v, %v", sc, err)
	}
	if _, err := j.Keys(context.Background(), fakeID, client.KeysRequest{Keys: []string{"q"}, TimeoutMS: 100}); err != nil {
		t.Fatal(err)
	}
	if paths[0] != "GET /v1/jobs/"+fakeID+"/screen?scrollback=7" || paths[1] != "POST /v1/jobs/"+fakeID+"/keys" || bodies[1] != `{"keys":["q"],"timeout_ms":100}` {
		t.Errorf("requests %q %q", paths, bodies)
	}
}
