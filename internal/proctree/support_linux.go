package proctree

import (
	"strings"

	"golang.org/x/sys/unix"
)

// CgroupSupport is how jobs would be tracked here (GET /v1/info).
type CgroupSupport struct {
	// Mode is KindCgroup2 when a job group can be made beside this
	// process (under its own cgroup v2, as a runner does), else
	// KindSubreaper.
	Mode string `json:"mode"`
	// Dir is the cgroup directory job groups are made under.
	Dir string `json:"dir,omitempty"`
	// Controllers are those available there (cgroup.controllers).
	Controllers []string `json:"controllers"`
	// Why says why jobs are tracked as a subreaper's descendants.
	Why string `json:"why,omitempty"`
}

// ProbeCgroup finds the cgroup v2 directory of this process, as a runner
// started by it finds its own, and checks that a group can be made in it
// (write access). disabled (--no-cgroup) skips the probe.
func ProbeCgroup(disabled bool) CgroupSupport {
	out := CgroupSupport{Mode: KindSubreaper, Controllers: []string{}}
	if disabled {
		out.Why = "cgroup disabled (--no-cgroup)"
		return out
	}
	dir, err := parentDir("")
	if err != nil {
		out.Why = "no cgroup: " + err.Error()
		return out
	}
	out.Dir = dir
	if c, err := readFile(dir + "/cgroup.controllers"); err == nil {
		out.Controllers = append(out.Controllers, strings.Fields(string(c))...)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		out.Why = "no cgroup: cannot make a group in " + dir + ": " + err.Error()
		return out
	}
	out.Mode = KindCgroup2
	return out
}
