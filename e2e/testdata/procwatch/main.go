// Command procwatch is the attacker of e2e/secrets_test.go: run as a job, it
// reads /proc/*/cmdline and /proc/*/environ of every process in a tight loop
// and reports each needle it finds. Its needles come from a file, so none
// of them is in its own arguments or environment.
//
//	procwatch NEEDLES STOPFILE
//
// NEEDLES holds "label<TAB>value" lines. The needle labelled "control" is
// reported as "CONTROL <pid>" the first time it is seen in a process (the
// test uses it to know the watch covers each server); every other sighting
// is reported as "SEEN <label> <pid> <file>". When STOPFILE exists it
// prints "passes=N" and "DONE" and exits.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

type needle struct {
	label string
	value []byte
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: procwatch NEEDLES STOPFILE")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "procwatch:", err)
		os.Exit(1)
	}
	var needles []needle
	for _, l := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(l, "\t"); ok && v != "" {
			needles = append(needles, needle{k, []byte(v)})
		}
	}
	stop := os.Args[2]
	out := bufio.NewWriter(os.Stdout)
	self := os.Getpid()
	seen := map[string]bool{}
	buf := make([]byte, 1<<20)
	passes := 0
	for {
		d, err := os.Open("/proc")
		if err != nil {
			fmt.Fprintln(os.Stderr, "procwatch:", err)
			os.Exit(1)
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid == self {
				continue
			}
			for _, file := range []string{"cmdline", "environ"} {
				b := readInto(buf, "/proc/"+n+"/"+file)
				for _, nd := range needles {
					if len(b) == 0 || !bytes.Contains(b, nd.value) {
						continue
					}
					var line string
					if nd.label == "control" {
						line = fmt.Sprintf("CONTROL %d", pid)
					} else {
						line = fmt.Sprintf("SEEN %s %d %s", nd.label, pid, file)
					}
					if !seen[line] {
						seen[line] = true
						out.WriteString(line + "\n")
						out.Flush()
					}
				}
			}
		}
		passes++
		if passes == 1 {
			out.WriteString("READY\n")
			out.Flush()
		}
		if _, err := os.Stat(stop); err == nil {
			fmt.Fprintf(out, "passes=%d\nDONE\n", passes)
			out.Flush()
			return
		}
	}
}

// readInto reads a /proc file into buf with plain system calls (no
// allocation per file: the loop must be fast to catch a process's first
// milliseconds).
func readInto(buf []byte, path string) []byte {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if m <= 0 || err != nil {
			break
		}
		n += m
	}
	return buf[:n]
}
