//go:build unix

package snapshot

import (
	"io/fs"
	"syscall"
)

// fileID identifies an inode, to store a second name of a hard-linked file
// as a link to the first.
type fileID struct {
	dev, ino uint64
}

// identity returns the inode of fi and its link count; ok is false when the
// platform does not say.
func identity(fi fs.FileInfo) (id fileID, nlink uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, 0, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, uint64(st.Nlink), true
}
