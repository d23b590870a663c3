//go:build !amd64

package api

import "unicode/utf8"

// plainRun is the length of the run of bytes at the start of p that need
// no escape: plainBlocksGo over the whole 16-byte blocks, then the last few
// bytes one by one.
func plainRun(p []byte) int {
	i := plainBlocksGo(p)
	if i < len(p)&^15 {
		return i
	}
	for ; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			break
		}
	}
	return i
}

// escapeRun takes nothing here: appendBytes's scan does it all.
func escapeRun(dst, src []byte) (nd, ns int) { return 0, 0 }
