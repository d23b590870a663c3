package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRel(t *testing.T) {
	r := Root{Names: []string{"/home/a", "/data/a"}}
	for _, tc := range []struct {
		path, rel string
		depth     int
		ok        bool
	}{
		{"/home/a", "", 2, true},
		{"/home/a/", "", 2, true},
		{"/home/a/x/y", "x/y", 2, true},
		{"//home/./a/x", "x", 2, true},
		{"/data/a/x", "x", 2, true},
		{"/home/a/../etc", "../etc", 2, true}, // kept, refused beneath the root
		{"/home/ab", "", 0, false},
		{"/home", "", 0, false},
		{"/etc", "", 0, false},
		{"relative/a", "", 0, false},
	} {
		rel, depth, ok := r.Rel(tc.path)
		if rel != tc.rel || depth != tc.depth || ok != tc.ok {
			t.Errorf("Rel(%q) = %q, %d, %v; want %q, %d, %v", tc.path, rel, depth, ok, tc.rel, tc.depth, tc.ok)
		}
	}
}

func idOfPath(t *testing.T, p string) ID {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return ID{st.Dev, st.Ino}
}

func idOfFile(t *testing.T, f *os.File) ID {
	t.Helper()
	id, err := IDOf(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// layout makes base/root with links of every kind, and base/outside.
func layout(t *testing.T) (base, root, outside string) {
	t.Helper()
	base = t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root + "/real/sub", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"rel":      "real",             // stays within, relative
		"abs":      root + "/real/sub", // stays within, absolute
		"out":      outside,            // leads out, absolute
		"relout":   "../outside",       // leads out, relative
		"deepout":  "real/../../outside",
		"loop1":    "loop2",
		"loop2":    "loop1",
		"dangling": "missing",
		"real/up":  "..", // back to the root, within
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return base, root, outside
}

func TestOpenBeneath(t *testing.T) {
	_, root, outside := layout(t)
	r, err := OpenRoot(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		rel  string
		want string // the directory reached; "" for a refusal
		kind error  // ErrEscape, ErrLink or nil (another error)
		link string // the link the refusal names
	}{
		{"", root, nil, ""},
		{"real", root + "/real", nil, ""},
		{"rel", root + "/real", nil, ""},
		{"rel/sub", root + "/real/sub", nil, ""},
		{"abs", root + "/real/sub", nil, ""},
		{"abs/..", root + "/real", nil, ""}, // ".." of where the link led
		{"real/up/real", root + "/real", nil, ""},
		{"real/sub/../..", root, nil, ""},
		{"out", "", ErrEscape, root + "/out"},
		{"real/../out", "", ErrEscape, root + "/out"},
		{"relout", "", ErrEscape, ""},
		{"deepout", "", ErrEscape, ""},
		{"..", "", ErrEscape, ""},
		{"real/../..", "", ErrEscape, ""},
		{"../root/real", "", ErrEscape, ""},
		{"loop1", "", nil, ""},
		{"dangling", "", nil, ""},
		{"missing", "", nil, ""},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			f, err := Open(r, filepath.Join(root, tc.rel), tc.rel, Options{})
			if tc.want != "" {
				if err != nil {
					t.Fatalf("Open(%q) = %v, want %s", tc.rel, err, tc.want)
				}
				defer f.Close()
				if got, want := idOfFile(t, f), idOfPath(t, tc.want); got != want {
					t.Fatalf("Open(%q) reached %v, want %s (%v)", tc.rel, got, tc.want, want)
				}
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("Open(%q) succeeded, want a refusal", tc.rel)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Fatalf("Open(%q) = %v, want %v", tc.rel, err, tc.kind)
			}
			if tc.kind == nil && (errors.Is(err, ErrEscape) || errors.Is(err, ErrLink)) {
				t.Fatalf("Open(%q) = %v: a missing directory or a loop is no escape", tc.rel, err)
			}
			var le *LinkError
			if tc.link != "" && (!errors.As(err, &le) || le.Link != tc.link || le.Target != outside) {
				t.Fatalf("Open(%q) = %v: want it to name the link %s -> %s", tc.rel, err, tc.link, outside)
			}
		})
	}
}

// A root opened through a link (an operator's /root -> /data/root) keeps
// both names: an absolute link naming either stays within it.
func TestOpenRootThroughALink(t *testing.T) {
	base, root, _ := layout(t)
	alias := filepath.Join(base, "alias")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(alias+"/real", filepath.Join(root, "byalias")); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot(alias, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Names) != 2 || r.Names[0] != alias || r.Names[1] != root {
		t.Fatalf("names = %v, want [%s %s]", r.Names, alias, root)
	}
	for _, rel := range []string{"abs", "byalias"} {
		f, err := Open(r, rel, rel, Options{})
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		f.Close()
	}
}

// Outside every root no link is followed, not even one that stays put;
// the refusal names it.
func TestOpenNoLinks(t *testing.T) {
	_, root, _ := layout(t)
	fs, err := FSRoot()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	f, err := Open(fs, root+"/real/sub/..", root+"/real/sub/..", Options{NoLinks: true})
	if err != nil {
		t.Fatalf("a path without links: %v", err)
	}
	if idOfFile(t, f) != idOfPath(t, root+"/real") {
		t.Fatal("a path without links reached the wrong directory")
	}
	f.Close()
	for p, link := range map[string]string{
		root + "/rel":      root + "/rel",
		root + "/rel/sub":  root + "/rel",
		root + "/abs":      root + "/abs",
		root + "/dangling": root + "/dangling",
		root + "/real/up":  root + "/real/up",
	} {
		_, err := Open(fs, p, p, Options{NoLinks: true})
		var le *LinkError
		if !errors.As(err, &le) || le.Kind != ErrLink || le.Link != link {
			t.Errorf("Open(%q) = %v, want ErrLink naming %s", p, err, link)
		}
	}
}

// Missing directories are made with the asked mode whatever the umask,
// beneath the root; nothing is made where BeforeCreate refuses, or
// through a link that leads out.
func TestOpenCreate(t *testing.T) {
	_, root, outside := layout(t)
	r, err := OpenRoot(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	f, err := Open(r, "new/a/b", "rel/new/a/b", Options{Create: true, Perm: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, d := range []string{"real/new", "real/new/a", "real/new/a/b"} {
		fi, err := os.Lstat(filepath.Join(root, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %v %v, want a 0755 directory", d, fi, err)
		}
	}
	if _, err := Open(r, "out/made", "out/made", Options{Create: true, Perm: 0o755}); !errors.Is(err, ErrEscape) {
		t.Fatalf("create through a link out = %v, want ErrEscape", err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "made")); err == nil {
		t.Fatal("a directory was made through a link leading out")
	}
	no := errors.New("not here")
	var asked ID
	_, err = Open(r, "real/refused/x", "real/refused/x", Options{Create: true, Perm: 0o755, BeforeCreate: func(parent int) error {
		asked, _ = IDOf(parent)
		return no
	}})
	if !errors.Is(err, no) {
		t.Fatalf("refused create = %v", err)
	}
	if asked != idOfPath(t, root+"/real") {
		t.Fatal("BeforeCreate was not asked about the directory the new one goes in")
	}
	if _, err := os.Lstat(filepath.Join(root, "real/refused")); err == nil {
		t.Fatal("a directory was made although BeforeCreate refused")
	}
}

// Chain climbs by handle: the ancestry of a directory reached through a
// link is that of where it really is, and a bind mount of a directory is
// that directory.
func TestChain(t *testing.T) {
	base, root, _ := layout(t)
	f, err := os.Open(filepath.Join(root, "rel", "sub"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chain, err := Chain(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root + "/real/sub", root + "/real", root, base, "/"} {
		if !Contains(chain, idOfPath(t, p)) {
			t.Errorf("the chain of %s lacks %s", f.Name(), p)
		}
	}
	if Contains(chain, idOfPath(t, root+"/../outside")) {
		t.Error("the chain holds a directory that is not above it")
	}
	if chain[len(chain)-1] != idOfPath(t, "/") {
		t.Error("the chain does not end at /")
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the bind-mount case is skipped")
		return
	}
	mnt := filepath.Join(base, "outside")
	if err := unix.Mount(root+"/real", mnt, "", unix.MS_BIND, ""); err != nil {
		t.Logf("bind mount: %v: the bind-mount case is skipped", err)
		return
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	g, err := os.Open(filepath.Join(mnt, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bchain, err := Chain(int(g.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if !Contains(bchain, idOfPath(t, root+"/real")) {
		t.Error("a directory inside a bind mount of real/ is not seen inside real/")
	}
}
