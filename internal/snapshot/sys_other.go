//go:build !unix

package snapshot

import (
	"io/fs"
	"os"
	"time"
)

type fileID struct {
	dev, ino uint64
}

func identity(fs.FileInfo) (fileID, uint64, bool) { return fileID{}, 0, false }

func setFileTimes(f *os.File, mtime time.Time) error { return nil }

const nonBlock = 0

func processUmask() fs.FileMode { return fs.ModePerm }
