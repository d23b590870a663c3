package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/runner"
)

// warmRunnersOf counts the warm runners (no job yet) of the server on
// stateDir.
func warmRunnersOf(stateDir string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != "shellctl-runner" || len(args) > 1 && args[1] == "__stage" {
			continue
		}
		ours, warm := false, false
		for i := 0; i+1 < len(args); i++ {
			ours = ours || args[i] == "--state-dir" && args[i+1] == stateDir
			warm = warm || args[i] == "--job-id" && args[i+1] == runner.PoolPlaceholder
		}
		if ours && warm {
			n++
		}
	}
	return n
}

// --warm-runners N keeps N runners waiting, not one more, before and after
// jobs took some (N = 1 kept two before the pool's channel was sized N-1).
func TestParallelWarmPoolKeepsItsSize(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := startServer(t, serverOpts{args: []string{"--warm-runners", strconv.Itoa(n)}})
			for round := range 2 {
				fxEventually(t, 20*time.Second, "the warm runners", func() bool { return warmRunnersOf(s.StateDir) == n })
				// What is checked is an absence (no runner more), which no
				// event announces: the refill, had it room, starts its next
				// runner within milliseconds, so a while is watched.
				time.Sleep(300 * time.Millisecond)
				if got := warmRunnersOf(s.StateDir); got != n {
					t.Fatalf("round %d: %d warm runners wait, want %d (--warm-runners %d)", round, got, n, n)
				}
				for range 3 {
					if res, _ := s.runDone(t, client.RunRequest{Script: "true"}); res.Status != "exited" {
						t.Fatalf("job = %+v", res)
					}
				}
			}
		})
	}
}
