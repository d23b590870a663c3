package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// The restore fuzz target extracts arbitrary input into a fresh Home that
// has a sibling directory "outside" (holding "secret" and "dir/"), so an
// archive can reach it as ../outside through a symlink of its own. Whatever
// the input, Restore must not panic, must leave everything outside Home as
// it was (nothing created beside Home, "outside" unchanged, "secret" not
// linked into Home), and must not create anything in Home that restore
// never makes: device nodes, FIFOs, sockets, setuid/setgid/sticky bits.
//
// The input is a tar stream that the target compresses (compress = true),
// so the fuzzer works on tar headers rather than on zstd framing, or raw
// bytes handed to Restore as they are (compress = false).

var (
	fzEncOnce sync.Once
	fzEnc     *zstd.Encoder
)

func fzCompress(raw []byte) []byte {
	fzEncOnce.Do(func() {
		var err error
		fzEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err)
		}
	})
	return fzEnc.EncodeAll(raw, nil)
}

const fzSecret = "the secret\n"

// fzLayout makes base/home (empty) and base/outside/{secret,dir/}.
func fzLayout(t *testing.T) (base, home string) {
	base = t.TempDir()
	t.Cleanup(func() { fzMakeRemovable(base) })
	home = filepath.Join(base, "home")
	for _, d := range []string{home, filepath.Join(base, "outside", "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "outside", "secret"), []byte(fzSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	return base, home
}

// fzMakeRemovable gives every directory under root owner rwx, so the test's
// cleanup can remove what a restored archive made read-only.
func fzMakeRemovable(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

// fzOutsideState describes base without Home: the names beside Home and
// everything under "outside", with type, mode, size and contents.
func fzOutsideState(t *testing.T, base string) string {
	t.Helper()
	var lines []string
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		lines = append(lines, "base: "+e.Name())
	}
	out := filepath.Join(base, "outside")
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			lines = append(lines, "error: "+err.Error())
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			lines = append(lines, "error: "+err.Error())
			return nil
		}
		line := p[len(out):] + " " + fi.Mode().String() + " " + fi.ModTime().UTC().Format(time.RFC3339Nano)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// fzCheckHome walks Home for what restore must never create.
func fzCheckHome(t *testing.T, base, home string) {
	t.Helper()
	secret, err := os.Lstat(filepath.Join(base, "outside", "secret"))
	if err != nil {
		t.Fatalf("outside/secret: %v", err)
	}
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		m := fi.Mode()
		if m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			t.Errorf("restore made %s of mode %v", p, m)
		}
		if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			t.Errorf("restore set special bits on %s: %v", p, m)
		}
		if m.IsRegular() && os.SameFile(fi, secret) {
			t.Errorf("%s is a hard link to a file outside Home", p)
		}
		return nil
	})
}

func FuzzRestore(f *testing.F) {
	f.Add([]byte{}, true)
	f.Add([]byte("not zstd"), false)
	f.Fuzz(func(t *testing.T, data []byte, compress bool) {
		base, home := fzLayout(t)
		before := fzOutsideState(t, base)
		in := data
		if compress {
			in = fzCompress(data)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		st, err := Restore(ctx, bytes.NewReader(in), home, RestoreOptions{})
		t.Logf("restore: %+v, %v", st, err)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("restore of %d input bytes did not end within 20 s", len(in))
		}
		if after := fzOutsideState(t, base); after != before {
			t.Fatalf("restore (err %v) changed what lies outside Home:\nbefore:\n%s\nafter:\n%s", err, before, after)
		}
		fzCheckHome(t, base, home)
	})
}
