package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The ceilings the attach rows' notes report: every byte sent must come
// back (the client reads until it has them all), through the echo and
// through each of the floors' cats and the log.
func TestWSCeilingsCarryEveryByte(t *testing.T) {
	if _, err := exec.LookPath("cat"); err != nil {
		t.Skip("no cat on PATH")
	}
	pump := func(mode string) func(context.Context, *websocket.Conn) error {
		return func(ctx context.Context, c *websocket.Conn) error { return pumpToCat(ctx, c, mode) }
	}
	for _, tc := range []struct {
		name  string
		serve func(context.Context, *websocket.Conn) error
	}{{"echo", wsEcho}, {"stdio", pump("stdio")}, {"pty", pump("pty")}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			v, err := wsCeiling(ctx, 3<<20+12345, tc.serve)
			if err != nil {
				t.Fatal(err)
			}
			if v <= 0 {
				t.Fatalf("%v MB/s", v)
			}
		})
	}
	ctx := context.Background()
	if note := wsPumpNote(ctx, "pty", 1<<20, &Stats{P50: 1}); !strings.HasPrefix(note, "the least any attach design does") || !strings.Contains(note, "raw pty") || !strings.HasSuffix(note, "× the floor") {
		t.Fatalf("pty note: %q", note)
	}
}
