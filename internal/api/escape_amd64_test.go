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

// escapeRunModel is escapeRun byte by byte, with its limits: whole steps
// of 32 bytes of src while 64 bytes of dst are left.
func escapeRunModel(dst, src []byte) (nd, ns int) {
	for len(src)-ns >= 32 && len(dst)-nd >= 64 {
		k := 0
		for ; k < 32; k++ {
			c := src[ns+k]
			if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				break
			}
			dst[nd+k] = c
		}
		nd += k
		ns += k
		if k == 32 {
			continue
		}
		if src[ns] != '\n' {
			return nd, ns
		}
		dst[nd], dst[nd+1] = '\\', 'n'
		nd += 2
		ns++
	}
	return nd, ns
}

// escapeRun takes what its model takes and writes the same bytes: every
// byte value at every place, newlines everywhere, dst of every size near
// its limit; with AVX2 only (without it, it takes nothing).
func TestEscapeRunIsItsModel(t *testing.T) {
	if !useAVX2 {
		if nd, ns := escapeRun(make([]byte, 256), make([]byte, 256)); nd != 0 || ns != 0 {
			t.Fatalf("escapeRun without AVX2 took %d bytes and wrote %d, want nothing", ns, nd)
		}
		t.Skip("no AVX2 on this CPU: escapeRun takes nothing, appendBytes's scan does it all")
	}
	check := func(src []byte, room int) {
		got, want := make([]byte, room), make([]byte, room)
		gd, gs := escapeRun(got, src)
		wd, ws := escapeRunModel(want, src)
		if gd != wd || gs != ws || string(got[:gd]) != string(want[:wd]) {
			t.Fatalf("escapeRun(%q, room %d) took %d wrote %q, want took %d wrote %q", src, room, gs, got[:gd], ws, want[:wd])
		}
	}
	forEachScanInput(func(p []byte) {
		for _, room := range []int{0, 63, 64, 65, 100, 200, 400} {
			check(p, room)
		}
	})
	// Lines: a newline every n bytes, and runs of newlines.
	for n := 1; n < 70; n++ {
		p := make([]byte, 300)
		for k := range p {
			p[k] = 'a' + byte(k%26)
			if k%n == n-1 {
				p[k] = '\n'
			}
		}
		for _, room := range []int{64, 97, 128, 700} {
			check(p, room)
			check(p[n/2:], room)
		}
	}
}

// Without AVX2, escapeRun takes nothing and the scan escapes the lines.
func TestAppendStringOfLinesWithoutAVX2(t *testing.T) {
	has := useAVX2
	defer func() { useAVX2 = has }()
	useAVX2 = false
	checkLinesAsEncodingJSON(t)
}
