package buildinfo

import (
	"runtime"
	"testing"
)

func TestLinkTimeValuesWin(t *testing.T) {
	Version, Commit = "v9.8.7", "abc123"
	t.Cleanup(func() { Version, Commit = "", "" })
	if got := Get(); got.Version != "v9.8.7" || got.Commit != "abc123" || got.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v", got)
	}
}

func TestFallbacks(t *testing.T) {
	got := Get()
	if got.Version == "" || got.Commit == "" {
		t.Fatalf("Get() without link-time values = %+v: want the toolchain's records or devel/unknown", got)
	}
}
