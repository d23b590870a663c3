package main

// Pure logic of the client verbs' docker habits: flags that end at the
// script, -e NAME, ps --format, logs --tail, the token's precedence and
// the 404's note.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/shellctl/shellctl/internal/client"
)

func TestClientToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "envtok")
	if err := os.WriteFile(envFile, []byte("from-env-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envToken: "from-env", envTokenFile: envFile}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		flag, file string
		noEnvFile  bool
		want       string
	}{
		{flag: "from-flag", want: "from-flag"},
		{file: file, want: "from-file"},
		{want: "from-env-file"},
		{noEnvFile: true, want: "from-env"},
	} {
		if c.noEnvFile {
			delete(env, envTokenFile)
		}
		got, err := clientToken(c.flag, c.file, getenv)
		if err != nil || got != c.want {
			t.Errorf("clientToken(%q, %q) = %q, %v; want %q", c.flag, c.file, got, err, c.want)
		}
	}
	var ue *usageError
	if _, err := clientToken("a", file, getenv); !errors.As(err, &ue) {
		t.Errorf("both flags: %v, want a usage error", err)
	}
	if _, err := clientToken("", filepath.Join(dir, "missing"), getenv); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("a missing token file: %v, want an error naming --token-file", err)
	}
}

// Every client verb takes --token-file (a persistent flag of the root),
// and serve keeps its own --token-file, the server's token.
func TestTokenFileOnEveryClientVerb(t *testing.T) {
	root := rootCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "serve":
			f := c.Flags().Lookup("token-file")
			if f == nil || !strings.Contains(f.Usage, "one line") || f == theClientFlags.flagSet().Lookup("token-file") {
				t.Errorf("serve's --token-file is not its own: %+v", f)
			}
		case "completion", "help":
		default:
			if c.InheritedFlags().Lookup("token-file") == nil && c.Flags().Lookup("token-file") == nil {
				t.Errorf("shellctl %s has no --token-file", c.Name())
			}
		}
	}
}

func TestEnvOf(t *testing.T) {
	caller := map[string]string{"HAVE": "mine", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := caller[k]; return v, ok }
	got, err := envOf([]string{"HAVE", "EMPTY", "MISSING", "X=1", "Y=a=b", "Z="}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"HAVE": "mine", "EMPTY": "", "X": "1", "Y": "a=b", "Z": ""}
	if len(got) != len(want) {
		t.Errorf("envOf = %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("envOf[%s] = %q (%v), want %q", k, g, ok, v)
		}
	}
	if _, ok := got["MISSING"]; ok {
		t.Errorf("a name the caller has not set was passed: %v", got)
	}
	var ue *usageError
	if _, err := envOf([]string{"=x"}, lookup); !errors.As(err, &ue) {
		t.Errorf("-e =x: %v, want a usage error", err)
	}
	if got, err := envOf(nil, lookup); got != nil || err != nil {
		t.Errorf("no -e: %v %v", got, err)
	}
}

// run's flags end at the script's first word: what follows is the
// script's, dashes and all.
func TestRunFlagsEndAtTheScript(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		script     []string
		detach, it bool
	}{
		{[]string{"ls", "-la"}, []string{"ls", "-la"}, false, false},
		{[]string{"-d", "grep", "-r", "--include=*.go", "x"}, []string{"grep", "-r", "--include=*.go", "x"}, true, false},
		{[]string{"-it", "bash", "-l"}, []string{"bash", "-l"}, false, true},
		{[]string{"--", "-weird"}, []string{"-weird"}, false, false},
	} {
		c := runCmd(&clientFlags{})
		if err := c.ParseFlags(tc.args); err != nil {
			t.Errorf("run %q: %v", tc.args, err)
			continue
		}
		if got := c.Flags().Args(); strings.Join(got, "\x00") != strings.Join(tc.script, "\x00") {
			t.Errorf("run %q: script words %q, want %q", tc.args, got, tc.script)
		}
		d, _ := c.Flags().GetBool("detach")
		i, _ := c.Flags().GetBool("interactive")
		tt, _ := c.Flags().GetBool("tty")
		if d != tc.detach || (i && tt) != tc.it {
			t.Errorf("run %q: -d %v -i %v -t %v", tc.args, d, i, tt)
		}
	}
}

func TestPsFormat(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	code, cmd, started := 4, "make test; echo "+strings.Repeat("x", 60), "2026-12-01T11:59:01Z"
	rows := []psRow{
		{JobID: "00000000000000aa", Status: "exited", ExitCode: &code, Mode: "pty", CreatedAt: "2026-12-01T11:59:00Z", StartedAt: &started, Command: &cmd},
		{JobID: "00000000000000bb", Status: "running", Mode: "stdio", CreatedAt: "2026-12-01T11:00:00Z"},
	}
	for _, tc := range []struct {
		format string
		width  int
		want   string
	}{
		{"{{.JobID}} {{.Status}}", commandWidth, "00000000000000aa exited\n00000000000000bb running\n"},
		{"{{.ID}}|{{.ExitCode}}|{{.Mode}}|{{.Age}}|{{.StartedAt}}|{{.EndedAt}}\n", commandWidth,
			"00000000000000aa|4|pty|1m|2026-12-01T11:59:01Z|\n00000000000000bb|-|stdio|1h||\n"},
		{"{{.Command}}", commandWidth, clip(cmd, commandWidth) + "\n?\n"},
		{"{{.Command}}", 0, cmd + "\n?\n"},
		{`{{if eq .Status "running"}}{{.JobID}}{{end}}`, commandWidth, "\n00000000000000bb\n"},
	} {
		tmpl, err := parseRowFormat(tc.format)
		if err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		var b bytes.Buffer
		if err := printRows(&b, tmpl, rows, now, tc.width); err != nil || b.String() != tc.want {
			t.Errorf("--format %q: %q %v, want %q", tc.format, b.String(), err, tc.want)
		}
	}
	// {{json .}} is the row as --format json prints it.
	tmpl, _ := parseRowFormat("{{json .}}")
	var b bytes.Buffer
	if err := printRows(&b, tmpl, rows[:1], now, commandWidth); err != nil ||
		!strings.HasPrefix(b.String(), `{"job_id":"00000000000000aa","status":"exited","exit_code":4,"mode":"pty",`) {
		t.Errorf("{{json .}}: %q %v", b.String(), err)
	}
	var ue *usageError
	for _, bad := range []string{"{{.Nope}}", "{{.JobID", "{{.row}}"} {
		if _, err := parseRowFormat(bad); !errors.As(err, &ue) || !strings.Contains(err.Error(), bad) {
			t.Errorf("--format %q: %v, want a usage error naming it", bad, err)
		}
	}
	// The table clips COMMAND, --no-trunc (width 0) does not.
	var tb bytes.Buffer
	printPS(&tb, rows[:1], now, 0)
	if !strings.Contains(tb.String(), cmd+"\n") {
		t.Errorf("ps --no-trunc clipped the command:\n%s", tb.String())
	}
	tb.Reset()
	printPS(&tb, rows[:1], now, commandWidth)
	if strings.Contains(tb.String(), cmd) || !strings.Contains(tb.String(), "…") {
		t.Errorf("ps did not clip the command:\n%s", tb.String())
	}
}

func TestSortNewestFirst(t *testing.T) {
	list := []client.JobInfo{
		{JobID: "a", CreatedAt: "2026-12-01T11:00:00.5Z"},
		{JobID: "b", CreatedAt: "2026-12-01T12:00:00Z"},
		{JobID: "c", CreatedAt: "2026-12-01T11:00:00.25Z"},
		{JobID: "d", CreatedAt: "2026-12-01T12:00:00Z"},
	}
	sortNewestFirst(list)
	var got []string
	for _, j := range list {
		got = append(got, j.JobID)
	}
	if strings.Join(got, "") != "bdac" {
		t.Errorf("order %v, want b d a c", got)
	}
}

func TestLastLinesStart(t *testing.T) {
	for _, tc := range []struct {
		log  string
		n    int
		want string // what is printed from the offset
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"}, // a last line without its newline
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 10, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"a\n\n\nb\n", 2, "\nb\n"}, // blank lines are lines
		{"", 3, ""},
		{"\n", 1, "\n"},
		{"one line, no newline", 1, "one line, no newline"},
	} {
		for _, chunk := range []int64{1, 2, 3, 1 << 16} {
			reads := 0
			got, err := lastLinesStart(int64(len(tc.log)), tc.n, chunk, func(from, to int64) ([]byte, error) {
				reads++
				// As the stream does, more than asked may come.
				return []byte(tc.log[from:min(int64(len(tc.log)), to+1)]), nil
			})
			if err != nil || tc.log[got:] != tc.want {
				t.Errorf("last %d lines of %q by chunks of %d: from %d (%q) %v, want %q", tc.n, tc.log, chunk, got, tc.log[got:], err, tc.want)
			}
			if chunk >= 1<<16 && reads > 1 {
				t.Errorf("last %d lines of %q: %d reads of a log that fits one", tc.n, tc.log, reads)
			}
		}
	}
	// A long log is not read whole for a short tail.
	log := strings.Repeat("line of output\n", 100000)
	var read int64
	got, err := lastLinesStart(int64(len(log)), 10, tailChunk, func(from, to int64) ([]byte, error) {
		read += to - from
		return []byte(log[from:to]), nil
	})
	if err != nil || log[got:] != strings.Repeat("line of output\n", 10) || read > tailChunk {
		t.Errorf("--tail 10 of %d bytes: read %d bytes, got %q %v", len(log), read, log[got:], err)
	}
}

func TestTailLinesFlag(t *testing.T) {
	var tl tailLines
	for in, want := range map[string]int{"0": 0, "25": 25, "all": -1} {
		if err := tl.Set(in); err != nil || tl.n != want {
			t.Errorf("--tail %s: %d %v", in, tl.n, err)
		}
	}
	for _, bad := range []string{"-1", "x", "1.5", ""} {
		if err := tl.Set(bad); err == nil {
			t.Errorf("--tail %q accepted", bad)
		}
	}
}

// A job_not_found says why a job id that worked may be gone: once, whether
// the server says it (a newer server) or not.
func TestExplainJobNotFound(t *testing.T) {
	old := explain(&client.Error{Status: 404, Code: "job_not_found", Message: "job 0123456789abcdef not found"})
	if !strings.Contains(old, "--gc-retention") || !strings.Contains(old, "5m by default") {
		t.Errorf("explain of an old server's 404: %q", old)
	}
	newer := explain(&client.Error{Status: 404, Code: "job_not_found", Message: "job x not found (finished jobs are collected 5m after they end: the server's --gc-retention)"})
	if strings.Count(newer, "gc-retention") != 1 {
		t.Errorf("explain says it twice: %q", newer)
	}
	if other := explain(&client.Error{Status: 409, Code: "job_running", Message: "job x is still running"}); strings.Contains(other, "gc-retention") {
		t.Errorf("explain of a 409: %q", other)
	}
}

// No verb's help shows an empty "(default )" (a flag whose default is
// "unset" says so in its text).
func TestHelpShowsNoEmptyDefault(t *testing.T) {
	root := rootCmd()
	walk := func(c interface{ LocalFlags() *pflag.FlagSet }, name string) {
		if u := c.LocalFlags().FlagUsages(); strings.Contains(u, "(default )") {
			t.Errorf("shellctl %s --help:\n%s", name, u)
		}
	}
	for _, c := range root.Commands() {
		walk(c, c.Name())
		for _, sub := range c.Commands() {
			walk(sub, c.Name()+" "+sub.Name())
		}
	}
	if u := root.PersistentFlags().FlagUsages(); strings.Contains(u, "(default )") {
		t.Errorf("the client flags:\n%s", u)
	}
}
