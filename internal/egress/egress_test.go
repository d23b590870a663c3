package egress

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDomainMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, host string
		want          bool
	}{
		{"api.github.com", "api.github.com", true},
		{"api.github.com", "API.GitHub.com:443", true},
		{"api.github.com", "x.api.github.com", false},
		{"*.githubusercontent.com", "raw.githubusercontent.com", true},
		{"*.githubusercontent.com", "a.b.githubusercontent.com", true},
		{"*.githubusercontent.com", "githubusercontent.com", false},
		{"*.githubusercontent.com", "evilgithubusercontent.com", false},
		{"xn--bcher-kva.example", "bücher.example", true},
	} {
		cr := &Credential{Domains: []string{c.pattern}}
		if got := cr.Matches(c.host); got != c.want {
			t.Errorf("%s matches %s = %v, want %v", c.pattern, c.host, got, c.want)
		}
	}
}

func TestDomainsOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.com", "a.com", true}, {"a.com", "b.com", false},
		{"*.a.com", "x.a.com", true}, {"*.a.com", "a.com", false},
		{"*.a.com", "*.x.a.com", true}, {"*.a.com", "*.b.com", false},
	} {
		if got := domainsOverlap(c.a, c.b); got != c.want {
			t.Errorf("overlap(%s, %s) = %v", c.a, c.b, got)
		}
		if got := domainsOverlap(c.b, c.a); got != c.want {
			t.Errorf("overlap(%s, %s) = %v", c.b, c.a, got)
		}
	}
}

func TestParseExpr(t *testing.T) {
	for expr, ok := range map[string]bool{
		"{{.Value}}": true, "Bearer {{.Value}}": true, "token {{ .Value }} x": true,
		`{{printf "%s" .Value}}`: false, "{{.Other}}": false, "{{if .Value}}x{{end}}": false,
		"{{.Value | len}}": false, "{{$x := .Value}}": false, "{{.Value": false, "{{template \"x\"}}": false,
	} {
		_, err := parseExpr(expr)
		if (err == nil) != ok {
			t.Errorf("parseExpr(%q) err = %v, want ok=%v", expr, err, ok)
		}
	}
}

func TestEnvName(t *testing.T) {
	if got := EnvName("git-hub", "my.token"); got != "SECRET_GIT_HUB_MY_TOKEN" {
		t.Errorf("EnvName = %s", got)
	}
}

func TestParsePrepareKinds(t *testing.T) {
	cred := `{"provider":"p","name":"n","value":"v","inject":{"type":"http-header","config":{"name":"X-K","domains":["a.test"]}}}`
	for body, kind := range map[string]error{
		`{"session_id":"s","credentials":[` + cred + `]}`:              nil,
		`{"sandbox_id":"s","credentials":[` + cred + `]}`:              nil,
		`{"session_id":"s","credentials":[]}`:                          ErrInvalidRequest,
		`[]`:                                                           ErrInvalidRequest,
		`{"credentials":[` + cred + `]}`:                               ErrValidation,
		`{"session_id":"s","credentials":[` + cred + `,` + cred + `]}`: ErrValidation,
		`{"session_id":"s","credentials":[{"provider":"p","name":"n","value":"a\nb","inject":{"type":"http-header","config":{"name":"X-K","domains":["a.test"]}}}]}`:                       ErrValidation,
		`{"session_id":"s","credentials":[{"provider":"p","name":"n","value":"v","env_name":"HTTPS_PROXY","inject":{"type":"http-header","config":{"name":"X-K","domains":["a.test"]}}}]}`: ErrValidation,
		`{"session_id":"s","credentials":[{"provider":"p","name":"n","value":"v","inject":{"type":"http-header","config":{"name":"Host","domains":["a.test"]}}}]}`:                         ErrValidation,
		`{"session_id":"s","credentials":[{"provider":"p","name":"n","value":"v","inject":{"type":"http-header","config":{"name":"X-K","domains":["https://a.test"]}}}]}`:                  ErrValidation,
	} {
		_, _, err := ParsePrepare([]byte(body))
		if kind == nil && err != nil || kind != nil && !errors.Is(err, kind) {
			t.Errorf("%s: err %v, want %v", body, err, kind)
		}
		if err != nil && strings.Contains(err.Error(), `"v"`) {
			t.Errorf("an error names the value: %v", err)
		}
	}
}

// TestScrubReaderSplitValues: a value split across reads of every size is
// still replaced.
func TestScrubReaderSplitValues(t *testing.T) {
	pairs := []pair{{[]byte("SECRETVALUE"), []byte("__secret:a/b__")}, {[]byte("xyz"), []byte("__secret:c/d__")}}
	in := "head SECRETVALUE mid xyzSECRETVALUExyz tail SECRETVALU"
	want := "head __secret:a/b__ mid __secret:c/d____secret:a/b____secret:c/d__ tail SECRETVALU"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in)), iotest.HalfReader(strings.NewReader(in))} {
		got, err := io.ReadAll(newScrubReader(io.NopCloser(r), pairs))
		if err != nil || string(got) != want {
			t.Errorf("got %q, %v\nwant %q", got, err, want)
		}
	}
}

// TestScrubReaderHoldsOnlyAPossibleValue: what cannot start a value is
// given out at once (a stream's event is not held for the next one); the
// start of a value is held until it is known.
func TestScrubReaderHoldsOnlyAPossibleValue(t *testing.T) {
	pairs := []pair{{[]byte("SECRETVALUE"), []byte("__secret:a/b__")}}
	pr, pw := io.Pipe()
	sr := newScrubReader(pr, pairs)
	go pw.Write([]byte("data: SECRETVALUE\n\n"))
	buf := make([]byte, 100)
	n, err := sr.Read(buf)
	if err != nil || string(buf[:n]) != "data: __secret:a/b__\n\n" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	go pw.Write([]byte("x SECRETV"))
	n, _ = sr.Read(buf)
	if string(buf[:n]) != "x " {
		t.Fatalf("read %q, want only what cannot start the value", buf[:n])
	}
	go func() { pw.Write([]byte("ALUE!")); pw.Close() }()
	rest, _ := io.ReadAll(sr)
	if string(rest) != "__secret:a/b__!" {
		t.Fatalf("rest %q", rest)
	}
}

// TestScrubReaderRandom: random bodies full of values, near misses and
// self-overlapping starts, read in random splits into buffers of random
// sizes (small ones take the copying path, large ones the direct one),
// come out as a plain left-to-right replacement of the whole body.
func TestScrubReaderRandom(t *testing.T) {
	pairs := []pair{{[]byte("abaabac"), []byte("<P1>")}, {[]byte("cab"), []byte("<P2>")}, {[]byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), []byte("<P3>")}}
	want := func(in []byte) []byte {
		var out []byte
		for i := 0; i < len(in); {
			hit := false
			for _, pr := range pairs {
				if bytes.HasPrefix(in[i:], pr.value) {
					out, i, hit = append(out, pr.placeholder...), i+len(pr.value), true
					break
				}
			}
			if !hit {
				out, i = append(out, in[i]), i+1
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		in := make([]byte, rng.IntN(200_000))
		for i := range in {
			in[i] = "abcx"[rng.IntN(4)]
			if rng.IntN(4000) == 0 { // runs of b, sometimes long enough for P3
				for j := 0; j < rng.IntN(60) && i < len(in); j++ {
					in[i] = 'b'
					i++
				}
				i--
			}
		}
		for k := 0; k < rng.IntN(40); k++ {
			pr := pairs[rng.IntN(len(pairs))]
			if at := rng.IntN(len(in) + 1); at+len(pr.value) <= len(in) {
				copy(in[at:], pr.value)
			}
		}
		split := 1 + rng.IntN(70_000)
		src := &splitReader{b: in, max: split, rng: rng}
		sr := newScrubReader(io.NopCloser(src), pairs)
		var got []byte
		for {
			buf := make([]byte, 1+rng.IntN(100_000))
			n, err := sr.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if w := want(in); !bytes.Equal(got, w) {
			t.Fatalf("round %d (split %d): %d bytes out, want %d", round, split, len(got), len(w))
		}
	}
}

// splitReader gives out b in reads of 1 to max bytes.
type splitReader struct {
	b   []byte
	max int
	rng *rand.Rand
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+r.rng.IntN(r.max))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}
