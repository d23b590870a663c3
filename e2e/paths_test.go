package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/client"
)

// pathsMarker is what a job the server should have refused writes into its
// cwd and HOME: finding it anywhere means the job ran there.
const pathsMarker = "shellctl-paths-pwned"

// pathsAttack is the script of the job that must not start: it reads
// whatever lies where it was put and writes the marker there and in HOME.
const pathsAttack = "cat ./secret 2>/dev/null; ls; echo x > ./" + pathsMarker + "; echo x > \"$HOME\"/" + pathsMarker + "; pwd -P"

// pathsWantRefused runs pathsAttack with body's cwd/env and wants 403
// cwd_not_allowed, whose message holds every one of names.
func pathsWantRefused(t *testing.T, s *server, what string, body map[string]any, names ...string) {
	t.Helper()
	body["script"] = pathsAttack
	body["timeout"] = 10
	if _, ok := body["mode"]; !ok {
		body["mode"] = "stdio"
	}
	st, raw, err := s.c.Do(ctx(t), "POST", "/v1/jobs/run", body)
	if err != nil {
		t.Fatal(err)
	}
	if st != 403 || !strings.Contains(string(raw), `"code":"cwd_not_allowed"`) {
		t.Errorf("%s: %d %s, want 403 cwd_not_allowed", what, st, raw)
		return
	}
	for _, n := range names {
		if !strings.Contains(string(raw), n) {
			t.Errorf("%s: the refusal %s does not name %s", what, raw, n)
		}
	}
}

// pathsNoMarker fails if the marker was written anywhere beneath dirs.
func pathsNoMarker(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.Name() == pathsMarker {
				t.Errorf("a refused job wrote %s", p)
			}
			return nil
		})
	}
}

// pathsPlant runs script as a job in cwd (its HOME the server's) and
// wants it to succeed: the job plants what the next request will name.
func pathsPlant(t *testing.T, s *server, cwd, script string) {
	t.Helper()
	res, out := s.runDone(t, client.RunRequest{Script: script, Mode: "stdio", Cwd: cwd})
	if code(res) != 0 {
		t.Fatalf("the planting job failed: %d %q", code(res), out)
	}
}

// A job replaces $HOME/project with a link to a directory outside every
// rule; the agent's next job, run with cwd $HOME/project (or HOME there),
// is refused with the link named, and nothing of it runs there. A link
// that stays within Home still works, absolute or relative, and the
// record shows where the job really ran. ".." does not climb out of Home.
func TestWallPlantedLinkInHomeIsNoCwd(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	outside := isoOutsideDir(t)
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(s.Home, "project")
	pathsPlant(t, s, "", "mkdir -p project real/sub && rm -rf project && ln -s "+isoShq(outside)+" project && "+
		"ln -s \"$HOME\"/real inner && ln -s real/sub relinner && ln -s ../.. real/up")

	for _, mode := range []string{"stdio", "pty"} {
		pathsWantRefused(t, s, mode+" cwd through the planted link", map[string]any{"cwd": project, "mode": mode}, project, outside)
		pathsWantRefused(t, s, mode+" cwd beneath the planted link", map[string]any{"cwd": project + "/.", "mode": mode}, project)
		pathsWantRefused(t, s, mode+" relative cwd through the planted link", map[string]any{"cwd": "project", "mode": mode}, project)
		pathsWantRefused(t, s, mode+" HOME through the planted link", map[string]any{"env": map[string]string{"HOME": project}, "mode": mode}, project)
		pathsWantRefused(t, s, mode+" HOME made through the planted link", map[string]any{"env": map[string]string{"HOME": project + "/newhome"}, "mode": mode}, project)
	}
	if _, err := os.Lstat(filepath.Join(outside, "newhome")); err == nil {
		t.Error("a HOME was made through the planted link")
	}
	// The MCP tool shell_run is refused the same way.
	pathsWantMCPRefused(t, s, map[string]any{"script": pathsAttack, "cwd": project}, project)
	pathsWantMCPRefused(t, s, map[string]any{"script": pathsAttack, "cwd": "project"}, project)
	pathsWantMCPRefused(t, s, map[string]any{"script": pathsAttack, "env": map[string]string{"HOME": project}}, project)

	// ".." out of Home, by an absolute or a relative cwd, and through a
	// link within Home that points above it.
	sibling := isoMkdir(t, filepath.Join(filepath.Dir(s.Home), "sibling-of-home"))
	t.Cleanup(func() { os.RemoveAll(sibling) })
	pathsWantRefused(t, s, "cwd $HOME/../sibling", map[string]any{"cwd": s.Home + "/../sibling-of-home"}, `\"..\"`)
	pathsWantRefused(t, s, "relative cwd ../sibling", map[string]any{"cwd": "../sibling-of-home"}, `\"..\"`)
	pathsWantRefused(t, s, "cwd through real/up", map[string]any{"cwd": s.Home + "/real/up"}, s.Home+"/real/up")
	pathsWantRefused(t, s, "HOME $HOME/../sibling", map[string]any{"env": map[string]string{"HOME": s.Home + "/../sibling-of-home"}}, "HOME")
	pathsNoMarker(t, outside, sibling, filepath.Dir(s.Home))

	// Links that stay within Home are followed.
	for cwd, want := range map[string]string{
		s.Home + "/inner": filepath.Join(s.Home, "real"),
		"relinner":        filepath.Join(s.Home, "real", "sub"),
	} {
		res, out := s.runDone(t, client.RunRequest{Script: "pwd -P; echo ok > made", Mode: "stdio", Cwd: cwd})
		real, _ := filepath.EvalSymlinks(want)
		if code(res) != 0 || strings.TrimSpace(out) != real {
			t.Errorf("cwd %q (a link within Home): %d %q, want to run in %s", cwd, code(res), out, real)
			continue
		}
		if _, err := os.Stat(filepath.Join(want, "made")); err != nil {
			t.Errorf("cwd %q: the job's write did not land in %s: %v", cwd, want, err)
		}
		rec, err := s.c.Record(ctx(t), res.JobID)
		if err != nil || rec.Cwd != real {
			t.Errorf("cwd %q: the record's cwd is %+v (%v), want %s", cwd, rec, err, real)
		}
	}
	res, out := s.runDone(t, client.RunRequest{Script: "pwd -P", Mode: "stdio", Cwd: s.Home + "/inner/.."})
	if real, _ := filepath.EvalSymlinks(s.Home); code(res) != 0 || strings.TrimSpace(out) != real {
		t.Errorf("cwd $HOME/inner/..: %d %q, want %s (\"..\" of where the link led)", code(res), out, real)
	}
	pathsNoMarker(t, outside)
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "OUTSIDE-SECRET\n" {
		t.Errorf("the outside secret changed: %q", b)
	}
}

// The same with --workspace-root: a link that stays inside the workspace
// but leads out of the Home (the server's or the one a request names) it
// was planted in is refused — one agent's job cannot hand the next job
// another agent's directory — as is one that leads out of the workspace.
func TestWallPlantedLinkUnderWorkspaceRoot(t *testing.T) {
	isoRequireLandlock(t)
	ws := filepath.Join(t.TempDir(), "ws")
	home := isoMkdir(t, filepath.Join(ws, "home"))
	agentA := isoMkdir(t, filepath.Join(ws, "agent-a"))
	agentB := isoMkdir(t, filepath.Join(ws, "agent-b"))
	outside := isoOutsideDir(t)
	s := startServer(t, serverOpts{home: home, args: []string{"--workspace-root", ws}})
	pathsPlant(t, s, "", "ln -s "+isoShq(agentB)+" project && ln -s "+isoShq(outside)+" away && ln -s "+isoShq(home+"/src")+" inner && mkdir src")
	pathsWantRefused(t, s, "cwd $HOME/project -> another agent's dir", map[string]any{"cwd": home + "/project"}, home+"/project", agentB)
	pathsWantRefused(t, s, "cwd $HOME/away -> outside", map[string]any{"cwd": home + "/away"}, home+"/away")
	pathsWantRefused(t, s, "cwd $HOME/../agent-b", map[string]any{"cwd": home + "/../agent-b"}, `\"..\"`)

	// A request's HOME is the root of a cwd beneath it.
	pathsPlant(t, s, agentA, "ln -s "+isoShq(agentB)+" project")
	envA := map[string]string{"HOME": agentA}
	pathsWantRefused(t, s, "cwd in agent A's HOME -> agent B", map[string]any{"cwd": agentA + "/project", "env": envA}, agentA+"/project")
	pathsWantRefused(t, s, "HOME $HOME/project -> another agent's dir", map[string]any{"cwd": agentA, "env": map[string]string{"HOME": home + "/project"}}, home+"/project")
	pathsNoMarker(t, agentB, outside, agentA)

	res, out := s.runDone(t, client.RunRequest{Script: "pwd -P", Mode: "stdio", Cwd: home + "/inner"})
	if real, _ := filepath.EvalSymlinks(home + "/src"); code(res) != 0 || strings.TrimSpace(out) != real {
		t.Errorf("cwd through a link within Home: %d %q, want %s", code(res), out, real)
	}
}

// A cwd or HOME that is the state dir, lies inside it or contains it is
// refused (403) before anything runs or is made, decided by device and
// inode: the state dir bind-mounted into Home is seen too. Default
// layout, and --workspace-root.
func TestWallCwdAndHomeNeverInTheStateDir(t *testing.T) {
	isoRequireLandlock(t)
	s := startServer(t, serverOpts{})
	state, _ := filepath.EvalSymlinks(s.StateDir)
	for _, p := range []string{state, state + "/jobs", filepath.Dir(state), state + "/jobs/../jobs"} {
		pathsWantRefused(t, s, "cwd "+p, map[string]any{"cwd": p}, "state dir")
		pathsWantRefused(t, s, "HOME "+p, map[string]any{"env": map[string]string{"HOME": p}}, "state dir")
	}
	pathsWantRefused(t, s, "HOME made in the state dir", map[string]any{"env": map[string]string{"HOME": state + "/jobs/newhome/deeper"}}, "state dir")
	if _, err := os.Lstat(state + "/jobs/newhome"); err == nil {
		t.Error("a refused HOME was made inside the state dir")
	}
	pathsNoMarker(t, filepath.Dir(state))

	// Another name for the state dir: a bind mount into Home.
	if mnt := pathsBindState(t, state, filepath.Join(s.Home, "mnt")); mnt != "" {
		pathsWantRefused(t, s, "cwd in the state dir bind-mounted into Home", map[string]any{"cwd": mnt + "/jobs"}, "state dir")
		pathsWantRefused(t, s, "HOME in the state dir bind-mounted into Home", map[string]any{"env": map[string]string{"HOME": mnt}}, "state dir")
		pathsNoMarker(t, filepath.Dir(state))
	}

	// --workspace-root: serve refuses a root that holds the state dir or
	// lies inside it; the state dir bind-mounted into the root is no way
	// in either.
	wsState := filepath.Join(t.TempDir(), "state")
	isoMkdir(t, wsState+"/jobs")
	for _, root := range []string{wsState + "/jobs", filepath.Dir(wsState)} {
		c, cancel := context.WithTimeout(ctx(t), 20*time.Second)
		cmd := exec.CommandContext(c, filepath.Join(binDir, "shellctl"), "serve", "--listen", "127.0.0.1:0", "--state-dir", wsState, "--workspace-root", root)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/local/bin:/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		timedOut := c.Err() != nil
		cancel()
		if err == nil || timedOut || !strings.Contains(string(out), "state dir") || !strings.Contains(string(out), "lies inside") {
			t.Errorf("serve with --workspace-root %s and --state-dir %s: %v %q; want it to refuse, naming the state dir", root, wsState, err, out)
		}
	}

	ws := isoMkdir(t, filepath.Join(t.TempDir(), "ws"))
	b := startServer(t, serverOpts{args: []string{"--workspace-root", ws}})
	bstate, _ := filepath.EvalSymlinks(b.StateDir)
	if mnt := pathsBindState(t, bstate, filepath.Join(ws, "mnt")); mnt != "" {
		pathsWantRefused(t, b, "cwd in the state dir bind-mounted into the workspace", map[string]any{"cwd": mnt + "/jobs"}, "state dir")
		pathsWantRefused(t, b, "cwd = the state dir bind-mounted into the workspace", map[string]any{"cwd": mnt}, "state dir")
		pathsWantRefused(t, b, "HOME in the state dir bind-mounted into the workspace", map[string]any{"cwd": ws, "env": map[string]string{"HOME": mnt + "/jobs"}}, "state dir")
		pathsNoMarker(t, filepath.Dir(bstate))
	}
}

// pathsBindState bind-mounts state at mnt (root only), unmounted at the
// end; "" when it cannot.
func pathsBindState(t *testing.T, state, mnt string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: no bind mount of the state dir")
		return ""
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", state, mnt).CombinedOutput(); err != nil {
		t.Logf("bind mount of the state dir: %v %s", err, out)
		return ""
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

// pathsWantMCPRefused calls the MCP tool shell_run with args and wants a
// tool error that says cwd_not_allowed and names every one of names.
func pathsWantMCPRefused(t *testing.T, s *server, args map[string]any, names ...string) {
	t.Helper()
	ct := &sdk.StreamableClientTransport{Endpoint: s.URL + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "paths-test", Version: "0"}, nil).Connect(ctx(t), ct, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: "shell_run", Arguments: args})
	if err != nil {
		t.Fatalf("shell_run %v: %v", args, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !res.IsError || !strings.Contains(text.String(), "cwd_not_allowed") {
		t.Errorf("MCP shell_run %v: error %v %q, want a cwd_not_allowed refusal", args, res.IsError, text.String())
		return
	}
	for _, n := range names {
		if !strings.Contains(text.String(), n) {
			t.Errorf("MCP shell_run %v: the refusal %q does not name %s", args, text.String(), n)
		}
	}
}

// A Home that is itself a link (an operator's /root -> /data/root) is the
// operator's choice and keeps working, named by either path; beneath it
// the rules hold: a link planted there still leads nowhere outside.
func TestWallHomeThatIsALinkStillWorks(t *testing.T) {
	isoRequireLandlock(t)
	base := t.TempDir()
	real := isoMkdir(t, filepath.Join(base, "data-home"))
	home := filepath.Join(base, "home")
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	outside := isoOutsideDir(t)
	s := startServer(t, serverOpts{home: home})
	pathsPlant(t, s, "", "mkdir sub && ln -s \"$HOME\"/sub inner && ln -s "+isoShq(outside)+" project")
	realResolved, _ := filepath.EvalSymlinks(real)
	for _, cwd := range []string{"", home + "/sub", real + "/sub", home + "/inner", real + "/inner"} {
		res, out := s.runDone(t, client.RunRequest{Script: "pwd -P", Mode: "stdio", Cwd: cwd})
		want := realResolved + "/sub"
		if cwd == "" {
			want = realResolved
		}
		if code(res) != 0 || strings.TrimSpace(out) != want {
			t.Errorf("cwd %q under a Home that is a link: %d %q, want %s", cwd, code(res), out, want)
		}
	}
	pathsWantRefused(t, s, "cwd through a planted link, Home a link", map[string]any{"cwd": home + "/project"}, home+"/project")
	pathsWantRefused(t, s, "cwd through a planted link named by Home's real path", map[string]any{"cwd": real + "/project"}, "project")
	pathsNoMarker(t, outside)
}
