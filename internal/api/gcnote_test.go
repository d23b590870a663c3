package api

import (
	"testing"
	"time"
)

// A job_not_found names the retention after which finished jobs go, in
// the words --gc-retention takes.
func TestGCNote(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute:            " (finished jobs are collected 5m after they end: the server's --gc-retention)",
		90 * time.Second:           " (finished jobs are collected 1m30s after they end: the server's --gc-retention)",
		2 * time.Hour:              " (finished jobs are collected 2h after they end: the server's --gc-retention)",
		time.Hour + 30*time.Minute: " (finished jobs are collected 1h30m after they end: the server's --gc-retention)",
		500 * time.Millisecond:     " (finished jobs are collected 500ms after they end: the server's --gc-retention)",
		0:                          "",
	} {
		if got := gcNote(d); got != want {
			t.Errorf("gcNote(%v) = %q, want %q", d, got, want)
		}
	}
}
