package api

import "testing"

// Both amd64 scanners: AVX2 where the CPU has it, and SSE2.
func TestPlainRunEveryAMD64Scanner(t *testing.T) {
	has := useAVX2
	defer func() { useAVX2 = has }()
	for _, avx := range []bool{false, true} {
		if avx && !has {
			t.Log("no AVX2 on this CPU: its scanner is not checked")
			continue
		}
		useAVX2 = avx
		forEachScanInput(func(p []byte) {
			if got, want := plainRun(p), plainRunModel(p); got != want {
				t.Fatalf("plainRun(%q) with AVX2 %v = %d, want %d", p, avx, got, want)
			}
		})
	}
}
