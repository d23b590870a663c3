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
