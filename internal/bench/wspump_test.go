package bench

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// The ceiling the attach rows' notes report: every byte sent must come
// back through cat and the log (the client reads until it has them all),
// for both of the floors' cats.
func TestWSPumpCeilingCarriesEveryByte(t *testing.T) {
	for _, mode := range []string{"stdio", "pty"} {
		t.Run(mode, func(t *testing.T) {
			if _, err := exec.LookPath("cat"); err != nil {
				t.Skip("no cat on PATH")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			v, err := wsPumpCeiling(ctx, mode, 3<<20+12345)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			if v <= 0 {
				t.Fatalf("%s: %v MB/s", mode, v)
			}
			note := wsPumpNote(ctx, mode, 1<<20, &Stats{P50: v})
			if want := "the least any attach design does"; len(note) < len(want) || note[:len(want)] != want {
				t.Fatalf("%s: note %q", mode, note)
			}
		})
	}
}
