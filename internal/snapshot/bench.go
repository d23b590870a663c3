package snapshot

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// MakeBenchHome fills dir with a deterministic mixed tree of about
// totalBytes bytes, for benchmarks and tests: three fifths in many small
// files (64 B to 64 KiB, log-uniform, 16 to a directory, three in four of
// them text and the rest random bytes as in images or binaries), two fifths
// in four big files (two text, two random), plus empty directories and
// symlinks. Text is made of pseudo-words, so it compresses about as well as
// source code or logs; random bytes do not compress at all.
func MakeBenchHome(dir string, totalBytes int64) error {
	rng := rand.New(rand.NewPCG(0x5eed, 0xbe7c4))
	g := &benchGen{rng: rng, vocab: makeVocab(rng, 4096)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bigTotal := totalBytes * 2 / 5
	smallTotal := totalBytes - bigTotal

	var written int64
	for i := 0; written < smallTotal; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("proj%02d", i/400), "src", fmt.Sprintf("mod%03d", i/16))
		if i%16 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		if i%400 == 0 {
			proj := filepath.Join(dir, fmt.Sprintf("proj%02d", i/400))
			if err := os.MkdirAll(filepath.Join(proj, "empty", "dir"), 0o755); err != nil {
				return err
			}
			if err := os.Symlink("src", filepath.Join(proj, "latest")); err != nil {
				return err
			}
		}
		size := int64(math.Exp(math.Log(64) + rng.Float64()*(math.Log(64<<10)-math.Log(64))))
		if rest := smallTotal - written; size > rest {
			size = rest
		}
		text := rng.IntN(4) != 0
		ext := ".txt"
		if !text {
			ext = ".bin"
		}
		if err := g.writeFile(filepath.Join(sub, fmt.Sprintf("f%05d%s", i, ext)), size, text); err != nil {
			return err
		}
		written += size
	}

	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	for i, name := range []string{"app.log", "archive.bin", "dump.sql", "model.bin"} {
		if err := g.writeFile(filepath.Join(data, name), bigTotal/4, i%2 == 0); err != nil {
			return err
		}
	}
	return nil
}

type benchGen struct {
	rng   *rand.Rand
	vocab []string
	buf   []byte
}

func makeVocab(rng *rand.Rand, n int) []string {
	const letters = "etaoinshrdlcumwfgypbvkjxqz_"
	v := make([]string, n)
	for i := range v {
		b := make([]byte, 2+rng.IntN(9))
		for j := range b {
			// skewed towards the first letters, as in real text
			b[j] = letters[int(float64(len(letters))*rng.Float64()*rng.Float64())]
		}
		v[i] = string(b)
	}
	return v
}

func (g *benchGen) writeFile(name string, size int64, text bool) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	const chunk = 1 << 20
	for left := size; left > 0; {
		n := min(left, chunk)
		b := g.fill(int(n), text)
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}

func (g *benchGen) fill(n int, text bool) []byte {
	b := g.buf[:0]
	if !text {
		b = append(b, make([]byte, n)...)
		for i := 0; i+8 <= n; i += 8 {
			u := g.rng.Uint64()
			for j := 0; j < 8; j++ {
				b[i+j] = byte(u >> (8 * j))
			}
		}
		g.buf = b
		return b[:n]
	}
	for len(b) < n {
		b = append(b, "\t\t"[:g.rng.IntN(3)]...)
		words := 3 + g.rng.IntN(10)
		for w := 0; w < words; w++ {
			if w > 0 {
				b = append(b, ' ')
			}
			b = append(b, g.vocab[int(float64(len(g.vocab))*g.rng.Float64()*g.rng.Float64())]...)
		}
		b = append(b, '\n')
	}
	g.buf = b
	return b[:n]
}
