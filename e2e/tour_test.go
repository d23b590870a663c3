package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
	"github.com/shellctl/shellctl/internal/client"
)

// The README's tour, run as a newcomer pastes it: its curl block, its MCP
// client config and its dify-agent block (the command line block is
// TestCLIReadmeExamples'), each against a real server on loopback. A block
// is taken from the Markdown by the HTML comment before its fence
// (`<!-- tour-curl: …`, `tour-mcp`, `tour-dify`), which readers do not see;
// docs/mcp.md's client config is marked and run the same way.
//
// In a shell block a comment right under a command (no blank line between)
// is that command's output as the page shows it: `…` stands for any text,
// and the wrapped lines of one answer are joined. What a command prints must
// be what the page shows; a command whose output the page does not show must
// not answer an API error. Other comments are the page's prose.

// tourDefault is the address the pages document: make run's.
const tourDefault = "127.0.0.1:8765"

// tourTokenPath is the token file the pages name.
const tourTokenPath = "/run/secrets/shellctl-token"

type tourBlock struct {
	file string
	line int // of the opening fence, from 1
	lang string
	text string
}

func (b tourBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// tourBlocks returns the fenced blocks of file right under a line that
// starts with "<!-- "+marker+":". A marker with no fence under it fails.
func tourBlocks(t *testing.T, file, marker string) []tourBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out []tourBlock
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "<!-- "+marker+":") {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
			t.Fatalf("%s:%d: the marker %q is not right above a fenced block", file, i+1, marker)
		}
		fence := strings.TrimSpace(lines[i+1])
		b := tourBlock{file: file, line: i + 2, lang: strings.TrimPrefix(fence, "```")}
		indent := lines[i+1][:strings.Index(lines[i+1], "```")]
		var body []string
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			body = append(body, strings.TrimPrefix(lines[j], indent))
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: the block never ends", file, b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
		i = j
	}
	if len(out) == 0 {
		t.Fatalf("%s has no block marked <!-- %s: -->", file, marker)
	}
	return out
}

// tourStep is one command of a shell block and the output the page shows
// for it (shown: the lines as the page has them; nil: none shown).
type tourStep struct {
	cmd        string
	shown      []string
	transcript bool // shown lines are a transcript's, not comments
	line       int
}

// tourSteps splits a shell block into its commands (a line ending in `\`
// goes on) and the output shown under each. A block whose lines start
// with "$ " is a transcript: those are the commands, and the lines under
// one are its output, as a terminal shows them.
func tourSteps(text string) []tourStep {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	transcript := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "$ ") })
	var steps []tourStep
	prev := "" // "cmd", "shown", or "" after a blank line or prose
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		isCmd := !transcript || strings.HasPrefix(l, "$ ")
		switch {
		case trim == "":
			prev = ""
		case transcript && !isCmd, !transcript && strings.HasPrefix(trim, "#"):
			if prev == "cmd" || prev == "shown" {
				last := &steps[len(steps)-1]
				last.shown = append(last.shown, l)
				prev = "shown"
			}
		default:
			st := tourStep{cmd: strings.TrimPrefix(l, "$ "), line: i + 1, transcript: transcript}
			for strings.HasSuffix(st.cmd, `\`) && i+1 < len(lines) {
				i++
				st.cmd += "\n" + lines[i]
			}
			steps = append(steps, st)
			prev = "cmd"
		}
	}
	return steps
}

// tourScript is the commands of steps, each after a line that marks where
// its output starts.
func tourScript(steps []tourStep) string {
	var b strings.Builder
	for i, st := range steps {
		fmt.Fprintf(&b, "printf '\\n@@tour-step %d@@\\n'\n%s\n", i, st.cmd)
	}
	return b.String()
}

var tourMark = regexp.MustCompile(`(?m)^@@tour-step (\d+)@@\n`)

// tourOutputs splits what a tourScript printed by step.
func tourOutputs(t *testing.T, out string, n int) []string {
	t.Helper()
	outs := make([]string, n)
	idx := tourMark.FindAllStringSubmatchIndex(out, -1)
	for k, m := range idx {
		var i int
		fmt.Sscan(out[m[2]:m[3]], &i)
		end := len(out)
		if k+1 < len(idx) {
			end = idx[k+1][0]
		}
		if i < n {
			outs[i] = strings.TrimRight(out[m[1]:end], "\n")
		}
	}
	return outs
}

// tourShownPattern is the output a step's page shows as a pattern, `…` any
// text: a transcript's lines as they are; comment lines without their `#`
// and indent, joined (they wrap one answer).
func tourShownPattern(st tourStep) *regexp.Regexp {
	var text string
	if st.transcript {
		text = strings.Join(st.shown, "\n")
	} else {
		for _, l := range st.shown {
			text += strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		}
	}
	parts := strings.Split(text, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*") + `$`)
}

// tourCheckOutputs compares what each step printed with what the page shows.
func tourCheckOutputs(t *testing.T, b tourBlock, steps []tourStep, outs []string, all string) {
	t.Helper()
	bad := false
	for i, st := range steps {
		got := outs[i]
		if st.shown != nil {
			if re := tourShownPattern(st); !re.MatchString(got) {
				bad = true
				t.Errorf("%s, line %d: %s\nprinted:\n  %s\nthe page shows:\n  %s", b, st.line, st.cmd, got, strings.Join(st.shown, "\n  "))
			}
		} else if strings.Contains(got, `"error":{`) {
			bad = true
			t.Errorf("%s, line %d: %s\nanswered an error the page does not show: %s", b, st.line, st.cmd, got)
		}
	}
	if bad {
		t.Logf("everything the block printed:\n%s", all)
	}
}

// tourWithServer puts s's address where the page has the default one, and
// fails if the page has none or names another port of the default's.
func tourWithServer(t *testing.T, b tourBlock, s *server, text string) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, tourDefault) {
		t.Fatalf("%s does not name the server of make run (%s): the test would not know where to point it", b, tourDefault)
	}
	text = strings.ReplaceAll(text, tourDefault, u.Host)
	text = strings.ReplaceAll(text, "localhost:8765", u.Host)
	if strings.Contains(text, ":8765") {
		t.Fatalf("%s names port 8765 on another host than %s", b, tourDefault)
	}
	return text
}

// tourTokenFile writes s's token to a file, for where a page names
// tourTokenPath.
func tourTokenFile(t *testing.T, s *server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shellctl-token")
	if err := os.WriteFile(p, []byte(s.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tourReadme is README.md as one string.
func tourReadme(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestTourCurl runs the README's curl block with curl, first against a
// server without a token (make run's), then against one with a token with
// the header the README says to add to every call.
func TestTourCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not on PATH: the README's curl block needs it (install curl to run this test)")
	}
	blocks := tourBlocks(t, "README.md", "tour-curl")
	// The README: "add `-H "Authorization: Bearer $(cat …)"` to every call".
	m := regexp.MustCompile("add\\s+`(-H \"Authorization: Bearer [^`]+\")`\\s+to every call").FindStringSubmatch(tourReadme(t))
	if m == nil {
		t.Fatal("README.md no longer says which header to add with a token (add `-H \"Authorization: Bearer …\"` to every call)")
	}
	header := strings.ReplaceAll(m[1], "\n", " ")
	if !strings.Contains(header, tourTokenPath) {
		t.Fatalf("the README's token header %s does not read %s", header, tourTokenPath)
	}
	for _, withToken := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-token", true: "token"}[withToken], func(t *testing.T) {
			o := serverOpts{}
			if withToken {
				o.token = "tour-token"
			}
			s := startServer(t, o)
			for _, b := range blocks {
				steps := tourSteps(b.text)
				if withToken {
					h := strings.ReplaceAll(header, tourTokenPath, tourTokenFile(t, s))
					for i := range steps {
						steps[i].cmd = strings.ReplaceAll(steps[i].cmd, "curl ", "curl "+h+" ")
					}
				}
				script := tourWithServer(t, b, s, tourScript(steps))
				cmd := exec.CommandContext(ctx(t), "bash", "-e", "-o", "pipefail", "-c", script)
				cmd.Dir = t.TempDir()
				cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", b, err, out.String(), errb.String())
				}
				tourCheckOutputs(t, b, steps, tourOutputs(t, out.String(), len(steps)), out.String())
			}
		})
	}
}

// tourMCPConfig is an MCP client's config as the pages show it.
type tourMCPConfig struct {
	MCPServers map[string]struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	} `json:"mcpServers"`
}

// tourBackticked returns the `names` in text that match re.
func tourBackticked(text string, re *regexp.Regexp) []string {
	var names []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text, -1) {
		if re.MatchString(m[1]) && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// TestTourMCPConfig starts the MCP server each marked client config names,
// as a client would (its command, args and env; shellctl from the binaries
// under test where the config has it installed, the test server's address
// and token file where it has make run's and /run/secrets'), then
// initialize, tools/list and a shell_run call over it with the MCP SDK's
// client. The README's config runs as written against make run's server
// (no token) and with the two args it says to add for a token.
func TestTourMCPConfig(t *testing.T) {
	readme := tourReadme(t)
	sec := readme[strings.Index(readme, "## Use shellctl from an MCP client"):]
	sec = sec[:strings.Index(sec[3:], "\n## ")+3]
	m := regexp.MustCompile("add\\s+`(\"--token-file\",\\s*\"[^`]+\")`\\s+to\\s+`args`").FindStringSubmatch(sec)
	if m == nil {
		t.Fatal("README.md's MCP section no longer says what to add to args for a token")
	}
	var tokenArgs []string
	if err := json.Unmarshal([]byte("["+m[1]+"]"), &tokenArgs); err != nil {
		t.Fatalf("the README's args for a token, %s: %v", m[1], err)
	}
	// The tools the README and docs/mcp.md name are those the server offers.
	intro := sec[:strings.Index(sec, "```")]
	readmeTools := tourBackticked(intro, regexp.MustCompile(`^(shell_[a-z]+|[a-z]+_(file|dir))$`))
	mcpDoc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	var docTools []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(mcpDoc), -1) {
		docTools = append(docTools, m[1])
	}
	slices.Sort(docTools)

	type run struct {
		b     tourBlock
		token bool
		extra []string
	}
	var runs []run
	for _, b := range tourBlocks(t, "README.md", "tour-mcp") {
		runs = append(runs, run{b, false, nil}, run{b, true, tokenArgs})
	}
	for _, b := range tourBlocks(t, "docs/mcp.md", "tour-mcp") {
		runs = append(runs, run{b: b, token: strings.Contains(b.text, tourTokenPath)})
	}
	for i, r := range runs {
		t.Run(fmt.Sprintf("%s-%d", strings.ReplaceAll(r.b.file, "/", "_"), i), func(t *testing.T) {
			o := serverOpts{}
			if r.token {
				o.token = "tour-mcp-token"
			}
			s := startServer(t, o)
			var cfg tourMCPConfig
			if err := json.Unmarshal([]byte(r.b.text), &cfg); err != nil {
				t.Fatalf("%s is not the JSON of a client config: %v", r.b, err)
			}
			srv, ok := cfg.MCPServers["shellctl"]
			if !ok || srv.Command == "" {
				t.Fatalf("%s has no mcpServers.shellctl.command: %s", r.b, r.b.text)
			}
			if filepath.Base(srv.Command) != "shellctl" {
				t.Fatalf("%s starts %q, not shellctl", r.b, srv.Command)
			}
			args := append(slices.Clone(srv.Args), r.extra...)
			tok := ""
			if r.token {
				tok = tourTokenFile(t, s)
			}
			for k := range args {
				args[k] = tourServerArg(t, r.b, s, args[k])
				if args[k] == tourTokenPath {
					if tok == "" {
						t.Fatalf("%s names the token file %s for a server without a token", r.b, tourTokenPath)
					}
					args[k] = tok
				}
			}
			if !slices.Contains(args, strings.TrimPrefix(s.URL, "http://")) && !slices.Contains(args, s.URL) {
				t.Fatalf("%s does not name make run's server (%s) in its args %q", r.b, tourDefault, srv.Args)
			}
			c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.Command(filepath.Join(binDir, "shellctl"), args...)
			// A client starts its server with an environment of its
			// own, not the user's shell's: no SHELLCTL_* here.
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}
			for k, v := range srv.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cl := mcp.NewClient(&mcp.Implementation{Name: "shellctl-tour", Version: "0"}, nil)
			sess, err := cl.Connect(c, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("%s: initialize: %v\nstderr: %s", r.b, err, stderr.String())
			}
			defer sess.Close()
			tools, err := sess.ListTools(c, nil)
			if err != nil {
				t.Fatalf("tools/list: %v\nstderr: %s", err, stderr.String())
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, readmeTools) {
				t.Errorf("the server offers the tools %q; README.md's MCP section names %q", names, readmeTools)
			}
			if !slices.Equal(names, docTools) {
				t.Errorf("the server offers the tools %q; docs/mcp.md's table names %q", names, docTools)
			}
			help, _ := exec.Command(filepath.Join(binDir, "shellctl"), "mcp", "--help").Output()
			for _, n := range names {
				if !regexp.MustCompile(`\b` + n + `\b`).Match(help) {
					t.Errorf("shellctl mcp --help does not name the tool %s:\n%s", n, help)
				}
			}
			res, err := sess.CallTool(c, &mcp.CallToolParams{Name: "shell_run", Arguments: map[string]any{"script": "echo hello from the tour", "timeout_seconds": 20}})
			if err != nil {
				t.Fatalf("tools/call shell_run: %v\nstderr: %s", err, stderr.String())
			}
			raw, _ := json.Marshal(res.StructuredContent)
			var a mcpAnswer
			if err := json.Unmarshal(raw, &a); err != nil || res.IsError {
				t.Fatalf("shell_run answered %s (tool error %v): %v", raw, res.IsError, err)
			}
			if !a.Done || a.ExitCode == nil || *a.ExitCode != 0 || !strings.Contains(a.Output, "hello from the tour") {
				t.Errorf("shell_run answered %s", raw)
			}
			// The job ran on the test's server: the config reached it.
			j, err := s.c.Status(ctx(t), a.JobID)
			if err != nil || j.Status != "exited" {
				t.Errorf("job %s on the test server: %+v, %v", a.JobID, j, err)
			}
		})
	}
}

// tourServerArg is tourWithServer for one argument.
func tourServerArg(t *testing.T, b tourBlock, s *server, arg string) string {
	if !strings.Contains(arg, ":8765") {
		return arg
	}
	return tourWithServer(t, b, s, arg)
}

// TestTourDify runs the README's dify-agent block and docs/dify-agent.md's
// marked transcripts as an agent would, as shellctl jobs, against the fake
// Agent Stub, with an $EDITOR that changes the prompt. The README's shows
// no output: the prompt must come back from the stub as edited, with its
// CRLF, then be cleared.
func TestTourDify(t *testing.T) {
	bin := difyAgent(t)
	const jwe = "tour-jwe"
	stub := fakestub.New(jwe)
	hs := httptest.NewServer(stub)
	t.Cleanup(func() { stub.Close(); hs.Close() })
	const before = "You are a helper. Be brief.\r\nUse @[skill:search] for facts. \n"
	const after = "You are a helper. Be terse.\r\nUse @[skill:search] for facts. \n"

	// Jobs may execute only from the read + execute paths: add the
	// directory of the binaries under test to the default list.
	ro := "SHELLCTL_LANDLOCK_RO_PATHS=/usr,/bin,/sbin,/lib,/lib64,/etc,/proc," + binDir
	s := startServer(t, serverOpts{token: "tok", env: []string{ro}})
	blocks := tourBlocks(t, "README.md", "tour-dify")
	blocks = append(blocks, tourBlocks(t, "docs/dify-agent.md", "tour-dify")...)
	for _, b := range blocks {
		stub.SetPrompt(before)
		steps := tourSteps(b.text)
		res, out := s.runDone(t, client.RunRequest{
			Script: "set -e\n" + tourScript(steps),
			Mode:   "stdio",
			Env: map[string]string{
				"DIFY_AGENT_STUB_API_BASE_URL": hs.URL,
				"DIFY_AGENT_STUB_AUTH_JWE":     jwe,
				"PATH":                         filepath.Dir(bin) + ":/usr/bin:/bin",
				"EDITOR":                       "sed -i s/brief/terse/",
			},
		})
		if code(res) != 0 {
			t.Fatalf("%s: the job exited %d:\n%s", b, code(res), out)
		}
		outs := tourOutputs(t, out, len(steps))
		tourCheckOutputs(t, b, steps, outs, out)
		if b.file != "README.md" {
			continue // the page shows what its commands print
		}
		var pulled, pushed, cleared []string
		for i, st := range steps {
			switch {
			case strings.HasPrefix(st.cmd, "dify-agent config prompt pull"):
				pulled = append(pulled, outs[i])
			case strings.Contains(st.cmd, "| dify-agent config prompt push -"):
				cleared = append(cleared, outs[i])
			case strings.HasPrefix(st.cmd, "dify-agent config prompt push"):
				pushed = append(pushed, outs[i])
			}
		}
		if len(pulled) != 1 || len(pushed) != 1 || len(cleared) != 1 {
			t.Fatalf("%s: want a pull, a push and a push of an empty prompt; outputs %q", b, outs)
		}
		if want := filepath.Join(s.Home, ".dify_conf", "prompt.md"); pulled[0] != want {
			t.Errorf("pull printed %q, want the file's absolute path %s", pulled[0], want)
		}
		var p struct{ Prompt *string }
		if err := json.Unmarshal([]byte(pushed[0]), &p); err != nil || p.Prompt == nil || *p.Prompt != after {
			t.Errorf("push printed %q, want the edited prompt %q as JSON", pushed[0], after)
		}
		p.Prompt = nil
		if err := json.Unmarshal([]byte(cleared[0]), &p); err != nil || p.Prompt == nil || *p.Prompt != "" {
			t.Errorf("the push of an empty prompt printed %q, want the saved empty prompt as JSON", cleared[0])
		}
		if got := stub.Prompt(); got != "" {
			t.Errorf("the stub's prompt after the block: %q, want it cleared", got)
		}
	}
}

// tourHelp is what `--help` says of one command: its subcommands and flags.
type tourHelp struct {
	subs  map[string]bool
	flags map[string]bool // "--name" and "-x"
}

var (
	tourHelpFlagLine = regexp.MustCompile(`^\s+(?:-([A-Za-z0-9]), )?(--[a-z0-9][a-z0-9-]*)`)
	tourHelpSubLine  = regexp.MustCompile(`^\s+([a-z][a-z0-9-]*)\s`)
)

// tourHelpOf runs bin path... --help once and reads its sections.
func tourHelpOf(t *testing.T, cache map[string]tourHelp, bin string, path []string) tourHelp {
	t.Helper()
	key := bin + " " + strings.Join(path, " ")
	if h, ok := cache[key]; ok {
		return h
	}
	out, err := exec.Command(bin, append(slices.Clone(path), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", key, err, out)
	}
	h := tourHelp{subs: map[string]bool{}, flags: map[string]bool{"--help": true, "-h": true}}
	section := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case l == "":
			section = ""
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			section = l
		case section == "Available Commands:" || section == "Commands:":
			if m := tourHelpSubLine.FindStringSubmatch(l); m != nil {
				h.subs[m[1]] = true
			}
		case strings.HasSuffix(section, "Flags:"):
			if m := tourHelpFlagLine.FindStringSubmatch(l); m != nil {
				h.flags[m[2]] = true
				if m[1] != "" {
					h.flags["-"+m[1]] = true
				}
			}
		}
	}
	cache[key] = h
	return h
}

// tourSimpleCommands splits a command line as a shell would, roughly: into
// its simple commands (at unquoted | ; & ( ) and $( ), each a list of
// words, quotes and backslashes taken away; redirections and their
// targets are left out, and a comment ends the line.
func tourSimpleCommands(s string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	in, inWord, redirect := byte(0), false, false
	flush := func() {
		if inWord && !redirect {
			words = append(words, w.String())
		}
		if inWord {
			redirect = false
		}
		w.Reset()
		inWord = false
	}
	end := func() {
		flush()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in != 0:
			if c == in {
				in = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			in, inWord = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			end()
			i++
		case c == '|' || c == ';' || c == '&' || c == '(' || c == ')':
			end()
		case c == '<' || c == '>':
			flush()
			redirect = true
		case c == '#' && !inWord:
			end()
			return cmds
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	end()
	return cmds
}

// TestTourExamplesMatchHelp: every shellctl and dify-agent command in a
// code block of README.md and docs/ names a command its --help lists and
// only flags that command's --help lists. (Hidden commands, such as
// dify-agent's home-snapshot, are not in --help: their lines are left out.)
func TestTourExamplesMatchHelp(t *testing.T) {
	bins := map[string]string{"shellctl": filepath.Join(binDir, "shellctl"), "dify-agent": difyAgent(t)}
	files := []string{"README.md"}
	docs, _ := filepath.Glob("../docs/*.md")
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	assign := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	cache := map[string]tourHelp{}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		lines := strings.Split(string(raw), "\n")
		for n := 0; n < len(lines); n++ {
			l := lines[n]
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inFence = !inFence
				continue
			}
			if !inFence {
				continue
			}
			for strings.HasSuffix(l, `\`) && n+1 < len(lines) {
				n++
				l = strings.TrimSuffix(l, `\`) + " " + lines[n]
			}
			l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
			for _, words := range tourSimpleCommands(l) {
				for len(words) > 0 && (assign.MatchString(words[0]) || words[0] == "sudo" || words[0] == "exec" || words[0] == "env") {
					words = words[1:]
				}
				if len(words) == 0 || bins[filepath.Base(words[0])] == "" {
					continue
				}
				bin := filepath.Base(words[0])
				words = words[1:]
				where := fmt.Sprintf("%s:%d: %s %s", f, n+1, bin, strings.Join(words, " "))
				var path []string
				h := tourHelpOf(t, cache, bins[bin], nil)
				i := 0
				for ; i < len(words) && h.subs[words[i]]; i++ {
					path = append(path, words[i])
					h = tourHelpOf(t, cache, bins[bin], path)
				}
				if len(path) == 0 && i < len(words) && !strings.HasPrefix(words[i], "-") {
					if bin == "dify-agent" {
						continue // an unknown first word is connect's ARGV
					}
					t.Errorf("%s: %q is no command of %s --help", where, words[i], bin)
					continue
				}
				checked++
				for _, w := range words[i:] {
					if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
						if bin == "shellctl" && len(path) == 1 && path[0] == "run" {
							break // run's flags end at the script
						}
						if w == "--" {
							break
						}
						continue
					}
					name := w
					if k := strings.Index(name, "="); k > 0 {
						name = name[:k]
					}
					if !strings.HasPrefix(name, "--") && len(name) > 2 {
						// -it, -di: letters together.
						for _, c := range name[1:] {
							if !h.flags["-"+string(c)] {
								t.Errorf("%s: -%c is no flag of %s %s --help", where, c, bin, strings.Join(path, " "))
							}
						}
						continue
					}
					if !h.flags[name] {
						t.Errorf("%s: %s is no flag of %s %s --help", where, name, bin, strings.Join(path, " "))
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d commands found in the pages' code blocks: the test reads them wrong", checked)
	}
	t.Logf("%d commands checked against --help", checked)
}
