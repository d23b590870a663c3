// Package nsprocs lists the processes of one PID namespace from /proc, for
// tests that run shellctl in a namespace of its own (PID 1 tests, the
// container image tests). It only reads: it never signals anything.
package nsprocs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Proc is one process of the namespace.
type Proc struct {
	Host  int    // its pid as the caller's namespace numbers it
	NS    int    // its pid inside the namespace (the last NSpid)
	State byte   // the state letter of /proc/<pid>/status (Z: a zombie)
	Name  string // its command name
}

// Of lists the processes that share pid's PID namespace.
func Of(pid int) ([]Proc, error) {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return nil, fmt.Errorf("pid namespace of %d: %w", pid, err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range ents {
		host, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || ns != want {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone meanwhile
		}
		p := Proc{Host: host}
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "State:":
				p.State = f[1][0]
			case "NSpid:":
				p.NS, _ = strconv.Atoi(f[len(f)-1])
			case "Name:":
				p.Name = f[1]
			}
		}
		out = append(out, p)
	}
	return out, nil
}
