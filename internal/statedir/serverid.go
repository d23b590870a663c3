package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ServerIDFile, in the state dir, holds the server's identity: a random
// id made on the first start and kept, so every runner of this server —
// those started before a restart included — names its job's cgroup after
// it, and a server sweeps only its own groups, never those of another
// server sharing the cgroup parent (another container, another PID
// namespace).
const ServerIDFile = "server-id"

// serverIDBytes: 8 random bytes (16 hex digits) tell servers on one
// machine apart with no practical chance of a clash, and keep cgroup names
// short.
const serverIDBytes = 8

// ServerID returns the id kept in dir, making it on first use.
func ServerID(dir string) (string, error) {
	if id, err := ReadServerID(dir); err == nil {
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	// getrandom(2), the kernel's generator, which crypto/rand reads on
	// Linux too: this package is the runner's, and crypto/rand would link
	// its whole tree (a third of a megabyte, resident in every runner).
	b := make([]byte, serverIDBytes)
	if n, err := unix.Getrandom(b, 0); err != nil || n != len(b) {
		return "", fmt.Errorf("make the server id: getrandom gave %d of %d bytes: %v", n, len(b), err)
	}
	id := fmt.Sprintf("%x", b)
	p := filepath.Join(dir, ServerIDFile)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		return ReadServerID(dir) // made meanwhile
	}
	if err != nil {
		return "", fmt.Errorf("make %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	_, werr := f.WriteString(id + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("write %s: %w", p, werr)
	}
	return id, nil
}

// ReadServerID reads the id kept in dir (an error wrapping
// os.ErrNotExist when there is none yet).
func ReadServerID(dir string) (string, error) {
	p := filepath.Join(dir, ServerIDFile)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	b := make([]byte, 2*serverIDBytes+2)
	n, _ := f.Read(b)
	id := strings.TrimSpace(string(b[:n]))
	if len(id) != 2*serverIDBytes || strings.Trim(id, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s holds %q, not a server id (%d hex digits): remove it and restart the server to make a new one", p, id, 2*serverIDBytes)
	}
	return id, nil
}
