// Package buildinfo tells which shellctl this is: its version and commit,
// set at link time (-ldflags "-X
// github.com/shellctl/shellctl/internal/buildinfo.Version=v1.2.3 -X
// ….Commit=abc123", as make build does), else what the Go toolchain
// recorded in the binary (the module version, the vcs.revision setting).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X at link time; empty otherwise.
var (
	Version string
	Commit  string
)

// Info is the build of the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
}

// Get returns the build of the running binary: the link-time values first,
// then the toolchain's records, else "unknown".
func Get() Info {
	in := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && in.Commit == "" {
				in.Commit = s.Value
			}
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	return in
}
