package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RootDefault is the state dir of a server run as root without
// --state-dir: the FHS place for a daemon's state, outside every Home.
const RootDefault = "/var/lib/shellctl"

// Default is the state dir used without --state-dir. It is never inside
// a Home, which jobs may write (the original's $HOME/.local/share/shellctl
// was, and a job could read every other job's output and the runners'
// control keys there, and plant symlinks in it). Root gets RootDefault;
// any other user /var/tmp/shellctl-<uid>, which exists on every Linux
// system, survives reboots, needs nothing set up and lies outside the
// paths a job is granted; Prepare refuses it when someone else made it.
func Default(uid int) string {
	if uid == 0 {
		return RootDefault
	}
	return "/var/tmp/shellctl-" + strconv.Itoa(uid)
}

// Prepare makes dir (0700) when missing and checks that it is a real
// directory of this user that nobody else can enter: a state dir made
// ahead by another user (in /var/tmp, say), or reached through a symlink,
// is refused rather than used.
func Prepare(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("make the parent of state dir %s: %w", dir, err)
	}
	if err := unix.Mkdir(dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("make state dir %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("state dir %s is not a directory (a symlink?): give --state-dir a real directory", dir)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("state dir %s belongs to uid %d, not to this user (%d): remove it or give --state-dir another directory", dir, st.Uid, os.Geteuid())
	}
	if st.Mode&0o077 != 0 {
		if err := unix.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make state dir %s private (0700): %w", dir, err)
		}
	}
	return nil
}

// Real is dir with every symlink resolved, as the kernel names it.
func Real(dir string) (string, error) {
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("resolve state dir %s: %w", dir, err)
	}
	return filepath.Clean(r), nil
}

// Within reports whether path is root or lies beneath it (both clean and
// absolute).
func Within(path, root string) bool {
	return path == root || root == "/" || strings.HasPrefix(path, root+"/")
}

// CheckOutside refuses a state dir (resolved) that lies inside one of the
// paths jobs may write by the server's policy: a job there could read the
// database and every job's output, and plant links for the server to
// follow. It refuses as well one of those paths inside the state dir (a
// Home, a workspace root or an RW entry in <state>/jobs would hand the
// same to every job). what names each writable path for the message.
func CheckOutside(stateReal string, writable map[string]string) error {
	for p, what := range writable {
		if p == "" {
			continue
		}
		real := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			real = r
		}
		real = filepath.Clean(real)
		if Within(stateReal, real) {
			return fmt.Errorf("state dir %s lies inside %s %s, which jobs can write: give --state-dir a directory outside it (the default is %s for root, /var/tmp/shellctl-<uid> otherwise)", stateReal, what, p, RootDefault)
		}
		if Within(real, stateReal) {
			return fmt.Errorf("%s %s lies inside the state dir %s, which no job may reach: move it, or give --state-dir a directory elsewhere (the default is %s for root, /var/tmp/shellctl-<uid> otherwise)", what, p, stateReal, RootDefault)
		}
	}
	return nil
}
