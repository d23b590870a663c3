//go:build !linux

package snapshot

import "errors"

// walk needs the Linux walker (internal/treewalk: getdents and openat
// beneath each directory's descriptor); elsewhere a save refuses rather
// than walk Home by names.
func (s *saver) walk() error {
	return errors.New("snapshot save is supported on Linux only")
}
