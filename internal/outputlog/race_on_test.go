//go:build race

package outputlog

// raceEnabled: this test binary has the race detector, whose sync.Pool
// drops a share of what is put back (to shake out races), so a pooled
// buffer is sometimes made anew.
const raceEnabled = true
