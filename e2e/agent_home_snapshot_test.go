package e2e

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
	"github.com/shellctl/shellctl/internal/client"
)

var (
	difyAgentOnce sync.Once
	difyAgentPath string
	difyAgentErr  error
)

// difyAgent builds the dify-agent binary once, beside the others.
func difyAgent(t *testing.T) string {
	t.Helper()
	difyAgentOnce.Do(func() {
		difyAgentPath = filepath.Join(binDir, "dify-agent")
		cmd := exec.Command("go", "build", "-o", difyAgentPath, "../cmd/dify-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			difyAgentErr = err
			difyAgentPath = string(out)
		}
	})
	if difyAgentErr != nil {
		t.Fatalf("build dify-agent: %v\n%s", difyAgentErr, difyAgentPath)
	}
	return difyAgentPath
}

// The E2B+S3 flow of agent-cli-backend.md: a shellctl job runs
// `dify-agent home-snapshot upload --exclude workspace` against the (fake)
// Agent Stub, a second server with an empty Home runs `download` as a job,
// and the two Homes compare equal but for the excluded directory.
func TestAgentHomeSnapshotFlow(t *testing.T) {
	parallel(t)
	bin := difyAgent(t)
	stub := fakestub.New("run-token")
	hs := httptest.NewServer(stub)
	t.Cleanup(func() { stub.Close(); hs.Close() })

	// Jobs may execute only from the read + execute paths: add the
	// directory of the binaries under test to the default list.
	ro := "SHELLCTL_LANDLOCK_RO_PATHS=/usr,/bin,/sbin,/lib,/lib64,/etc,/proc," + binDir
	src := startServer(t, serverOpts{token: "tok", env: []string{ro}})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src.Home, "proj", "sub"), 0o750))
	must(os.WriteFile(filepath.Join(src.Home, "proj", "a.txt"), []byte("alpha\n"), 0o640))
	must(os.WriteFile(filepath.Join(src.Home, "proj", "sub", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Symlink("a.txt", filepath.Join(src.Home, "proj", "link")))
	must(os.MkdirAll(filepath.Join(src.Home, "workspace", "tmp"), 0o755))
	must(os.WriteFile(filepath.Join(src.Home, "workspace", "tmp", "scratch"), []byte("scratch"), 0o644))

	env := func(token string) map[string]string {
		return map[string]string{"DIFY_AGENT_STUB_API_BASE_URL": hs.URL, "DIFY_AGENT_STUB_AUTH_JWE": token}
	}
	res, out := src.runDone(t, client.RunRequest{Script: bin + " home-snapshot upload --exclude workspace", Env: env(fakestub.TokenHomeWrite)})
	if code(res) != 0 {
		t.Fatalf("upload job: exit %d: %s", code(res), out)
	}
	if _, ok := stub.HomeArchive(fakestub.DefaultSnapshotRef); !ok {
		t.Fatal("no archive stored")
	}

	dst := startServer(t, serverOpts{token: "tok", env: []string{ro}})
	res, out = dst.runDone(t, client.RunRequest{Script: bin + " home-snapshot download", Env: env(fakestub.TokenHomeRead)})
	if code(res) != 0 {
		t.Fatalf("download job: exit %d: %s", code(res), out)
	}
	want := homeTree(t, src.Home)
	for k := range want {
		if k == "workspace" || strings.HasPrefix(k, "workspace/") {
			delete(want, k)
		}
	}
	got := homeTree(t, dst.Home)
	if len(got) != len(want) {
		t.Fatalf("restored Home has %d entries, want %d:\n%v\n%v", len(got), len(want), got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// homeTree maps each entry under dir to its type, mode and content.
func homeTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch m := fi.Mode(); {
		case m.IsDir():
			out[rel] = "dir " + m.Perm().String()
		case m&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		default:
			b, _ := os.ReadFile(p)
			out[rel] = m.String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
