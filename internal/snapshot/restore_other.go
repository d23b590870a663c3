//go:build !linux

package snapshot

import (
	"context"
	"errors"
)

// Restore opens every path component with Linux's openat flags (O_PATH,
// O_NOFOLLOW) and sets times through utimensat on a descriptor; elsewhere
// it refuses rather than extract with weaker guarantees.
type extractor struct {
	stats RestoreStats
}

func newExtractor(context.Context, string, string) (*extractor, error) {
	return nil, errors.New("snapshot restore is supported on Linux only")
}

func (x *extractor) apply(*batch) error { return errors.ErrUnsupported }
func (x *extractor) finish() error      { return nil }
func (x *extractor) close()             {}
