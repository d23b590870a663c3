package proctree

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SharedPidsLimit reports the tightest pids limit (cgroup v2 pids.max) on
// this process's own cgroup or any above it up to the cgroup2 mount, where
// it finds one: what a job below it shares with the runtime, unless the
// job's own group has a tighter one.
func SharedPidsLimit() (limit int64, where string, ok bool) {
	mi, err := readFile("/proc/self/mountinfo")
	if err != nil {
		return 0, "", false
	}
	cg, err := readFile("/proc/self/cgroup")
	if err != nil {
		return 0, "", false
	}
	path, err := parseCgroupV2Path(cg)
	if err != nil {
		return 0, "", false
	}
	mounts := parseCgroup2Mounts(mi)
	dir, err := cgroupDir(mounts, path)
	if err != nil {
		return 0, "", false
	}
	top := ""
	for _, m := range mounts {
		if strings.HasPrefix(dir+"/", m.point+"/") && len(m.point) > len(top) {
			top = m.point
		}
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "pids.max")); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (!ok || n < limit) {
				limit, where, ok = n, dir, true
			}
		}
		if dir == top || top == "" || len(dir) <= len(top) {
			return limit, where, ok
		}
		dir = filepath.Dir(dir)
	}
}
