package api

import "golang.org/x/sys/cpu"

// useAVX2: the CPU has AVX2 (and the OS keeps its registers); read by
// plainRun.
var useAVX2 = cpu.X86.HasAVX2

// plainRun is the length of the run of bytes at the start of p that need
// no escape (escape_amd64.s).
//
//go:noescape
func plainRun(p []byte) int

// escapeRun copies the start of src into dst as it goes into a JSON
// string while it is plain bytes and newlines, and says how much it took
// and wrote (escape_amd64.s; AVX2 only, else it takes nothing).
//
//go:noescape
func escapeRun(dst, src []byte) (nd, ns int)
