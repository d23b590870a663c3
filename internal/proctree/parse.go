package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// procStat is what the tracker needs from /proc/<pid>/stat.
type procStat struct {
	pid   int
	state byte // R S D Z T t X ...
	ppid  int
	pgrp  int
	start uint64 // starttime in clock ticks since boot: with pid, names one process
}

// gone reports whether the process has exited: a zombie (Z) or dead (X/x)
// task only waits to be reaped and can do nothing any more.
func (s procStat) gone() bool { return s.state == 'Z' || s.state == 'X' || s.state == 'x' }

var errBadStat = errors.New("malformed /proc stat line")

// parseStat parses a /proc/<pid>/stat line. comm (field 2) may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	var s procStat
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return s, errBadStat
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, errBadStat
	}
	s.pid = pid
	// Fields after comm: index i is field i+3 of proc(5): state(3) ppid(4)
	// pgrp(5) ... starttime(22).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return s, errBadStat
	}
	s.state = f[0][0]
	if s.ppid, err = strconv.Atoi(f[1]); err != nil {
		return s, errBadStat
	}
	if s.pgrp, err = strconv.Atoi(f[2]); err != nil {
		return s, errBadStat
	}
	if s.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return s, errBadStat
	}
	return s, nil
}

// cgroup2Mount is one cgroup2 mount from /proc/self/mountinfo.
type cgroup2Mount struct {
	root  string // the cgroup path the mount shows at its top
	point string // where it is mounted
}

// parseCgroup2Mounts returns the cgroup2 mounts of a mountinfo file, in order.
// Line format (proc(5)): id parent major:minor root mountpoint options
// [optional fields...] - fstype source superoptions.
func parseCgroup2Mounts(data []byte) []cgroup2Mount {
	var out []cgroup2Mount
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		out = append(out, cgroup2Mount{root: unescapeMountinfo(f[3]), point: unescapeMountinfo(f[4])})
	}
	return out
}

// unescapeMountinfo undoes the octal escapes (\040 for space, \011, \012,
// \134) the kernel writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseCgroupV2Path returns the path of the "0::" line of a /proc/<pid>/cgroup
// file: the process's cgroup in the v2 hierarchy.
func parseCgroupV2Path(data []byte) (string, error) {
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 (0::) line in /proc/self/cgroup")
}

// cgroupDir maps a v2 cgroup path to a directory under one of the cgroup2
// mounts. The mount's root is the cgroup shown at its top (not "/" for a
// bind mount of a subtree); a path outside every mount cannot be reached.
func cgroupDir(mounts []cgroup2Mount, path string) (string, error) {
	if !strings.HasPrefix(path, "/") || strings.Contains(path+"/", "/../") {
		// A process outside its cgroup namespace's root sees "/../..".
		return "", fmt.Errorf("cgroup path %q is not below the visible hierarchy", path)
	}
	for _, m := range mounts {
		switch {
		case m.root == "/":
			return strings.TrimSuffix(m.point+path, "/"), nil
		case path == m.root:
			return m.point, nil
		case strings.HasPrefix(path, m.root+"/"):
			return m.point + path[len(m.root):], nil
		}
	}
	if len(mounts) == 0 {
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	}
	return "", fmt.Errorf("cgroup %q is under no cgroup2 mount", path)
}

// parseKeyed returns the value of key in a flat keyed cgroup file such as
// cgroup.events ("populated 1") or memory.events ("oom_kill 0").
func parseKeyed(data []byte, key string) (int64, bool) {
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// hasWord reports whether a space-separated list (cgroup.controllers,
// cgroup.subtree_control) holds w.
func hasWord(data []byte, w string) bool {
	for _, f := range strings.Fields(string(data)) {
		if f == w {
			return true
		}
	}
	return false
}

// validName checks that an Options.Name is a single path element.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00\n") {
		return fmt.Errorf("invalid tracker name %q: want one path element", name)
	}
	return nil
}
