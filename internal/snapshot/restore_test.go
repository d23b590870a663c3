package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// gnuSparseArchive is a tar with an old-GNU sparse entry ('S'), which
// archive/tar cannot write: a GNU header is patched by hand.
func gnuSparseArchive(t *testing.T) []byte {
	return zstdOf(t, patchedHeader(t, "sparse", 'S', "", tar.FormatGNU))
}

// patchedHeader writes a tar (with its end marker) holding one entry of
// type typ, which archive/tar refuses to write itself, and body.
func patchedHeader(t *testing.T, name string, typ byte, body string, format tar.Format) []byte {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), Format: format}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	b := raw.Bytes()
	b[156] = typ
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b[:512] {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// paxSparseArchive is a tar with a PAX (format 0.1) GNU sparse entry:
// archive/tar drops GNU.sparse records when writing, so the PAX header is
// made by hand.
func paxSparseArchive(t *testing.T) []byte {
	var recs string
	for _, kv := range [][2]string{{"GNU.sparse.major", "0"}, {"GNU.sparse.minor", "1"}, {"GNU.sparse.name", "sparse"},
		{"GNU.sparse.size", "1"}, {"GNU.sparse.numblocks", "1"}, {"GNU.sparse.map", "0,1"}} {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec) + 1
		if len(fmt.Sprint(n+len(rec)))+len(rec) != n {
			n = len(fmt.Sprint(len(rec)+2)) + len(rec)
		}
		recs += fmt.Sprint(n) + rec
	}
	pax := patchedHeader(t, "PaxHeaders/sparse", 'x', recs, tar.FormatUSTAR)
	pax = pax[:len(pax)-1024] // drop its end marker
	var rest bytes.Buffer
	tw := tar.NewWriter(&rest)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "GNUSparseFile.0/sparse", Mode: 0o644, Size: 1, Format: tar.FormatUSTAR})
	tw.Write([]byte("x"))
	tw.Close()
	return zstdOf(t, append(pax, rest.Bytes()...))
}

func rawTar(t *testing.T, ents ...ent) []byte {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range ents {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return raw.Bytes()
}

func TestRestoreRefusals(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "target"), "original", 0o644)
	outsideLink := func(name string) ent {
		return ent{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: outside}}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(rawTar(t, file("f", "x")))
	zw.Close()
	valid := makeArchive(t, file("f", "x"))

	cases := []struct {
		name string
		data []byte
	}{
		{"absolute name", makeArchive(t, file(filepath.Join(outside, "abs"), "x"))},
		{"dot dot", makeArchive(t, file("../escape", "x"))},
		{"dot dot inside", makeArchive(t, file("a/../../escape", "x"))},
		{"write through symlink to outside", makeArchive(t, outsideLink("evil"), file("evil/target", "pwned"))},
		{"write through symlink to outside, nested", makeArchive(t, outsideLink("evil"), file("evil/new/file", "pwned"))},
		{"directory through symlink to outside", makeArchive(t, outsideLink("evil"),
			ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "evil/newdir/", Mode: 0o755}})},
		{"symlink through symlink to outside", makeArchive(t, outsideLink("evil"),
			ent{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "evil/l", Linkname: "x"}})},
		{"hard link to outside by dot dot", makeArchive(t,
			ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "../" + filepath.Base(outside) + "/target"}})},
		{"hard link to outside by absolute name", makeArchive(t,
			ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: filepath.Join(outside, "target")}})},
		{"hard link to outside through symlink", makeArchive(t, outsideLink("evil"),
			ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "evil/target"}})},
		{"hard link to missing target", makeArchive(t,
			ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "nothing"}})},
		{"char device", makeArchive(t, ent{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Mode: 0o666, Devmajor: 1, Devminor: 3}})},
		{"block device", makeArchive(t, ent{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Mode: 0o660, Devmajor: 8}})},
		{"fifo", makeArchive(t, ent{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "fifo", Mode: 0o644}})},
		{"old GNU sparse", gnuSparseArchive(t)},
		{"PAX sparse", paxSparseArchive(t)},
		{"unknown type", makeArchive(t, ent{hdr: tar.Header{Typeflag: 'Z', Name: "z", Mode: 0o644}})},
		{"gzip input", gz.Bytes()},
		{"plain tar input", rawTar(t, file("f", "x"))},
		{"window over 64 MiB", zstdOf(t, rawTar(t, file("f", strings.Repeat("y", 200<<10))),
			zstd.WithWindowSize(128<<20), zstd.WithSingleSegment(false))},
		{"truncated", valid[:len(valid)-5]},
		{"corrupt checksum", append(append([]byte{}, valid[:len(valid)-1]...), valid[len(valid)-1]^0xff)},
		{"empty body", nil},
		{"garbage", []byte("this is not an archive at all")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			before := treeState(t, outside)
			_, srv, _ := newServer(t, Config{Home: home})
			resp, body := restoreRaw(t, srv, c.data)
			if resp.StatusCode != 400 || errCode(t, body) != "archive_malformed" {
				t.Errorf("got %d %s", resp.StatusCode, body)
			}
			diffStates(t, before, treeState(t, outside))
			if b, _ := os.ReadFile(filepath.Join(outside, "target")); string(b) != "original" {
				t.Errorf("outside file changed: %q", b)
			}
			// The library says the same.
			_, err := Restore(context.Background(), bytes.NewReader(c.data), t.TempDir(), RestoreOptions{})
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Restore: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestRestorePermissionBitsOnly(t *testing.T) {
	home := t.TempDir()
	data := makeArchive(t,
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "sgid/", Mode: 0o2775}},
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "sticky/", Mode: 0o1777}},
		ent{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "suid", Mode: 0o4755, Size: 1, Uid: 1234, Gid: 5678, Uname: "someone"}, body: "x"},
		ent{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "sgid/f", Mode: 0o2640, Size: 1}, body: "y"},
	)
	if _, err := Restore(context.Background(), bytes.NewReader(data), home, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{"sgid": fs.ModeDir | 0o775, "sticky": fs.ModeDir | 0o777, "suid": 0o755, "sgid/f": 0o640} {
		fi, err := os.Lstat(filepath.Join(home, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
			t.Errorf("%s: owner %d: ownership should be ignored", name, st.Uid)
		}
	}
}

func TestRestoreReadOnlyDirGetsChildren(t *testing.T) {
	home := t.TempDir()
	data := makeArchive(t,
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "ro/", Mode: 0o500}},
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "ro/sub/", Mode: 0o500}},
		file("ro/sub/f", "x"),
		file("ro/g", "y"),
		file("after", "z"),
	)
	st, err := Restore(context.Background(), bytes.NewReader(data), home, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 5 || st.BytesWritten != 3 {
		t.Errorf("stats %+v", st)
	}
	want := map[string]string{
		"ro": "dir 500", "ro/sub": "dir 500",
		"ro/sub/f": "", "ro/g": "", "after": "",
	}
	got := treeState(t, home)
	for k, v := range want {
		if v != "" && got[k] != v {
			t.Errorf("%s: %q want %q", k, got[k], v)
		}
		if _, ok := got[k]; !ok {
			t.Errorf("%s missing", k)
		}
	}
}

func TestRestoreOverwritesAndKeeps(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "victim"), "original", 0o644)
	writeFile(t, filepath.Join(home, "existing"), "old contents, longer", 0o644)
	writeFile(t, filepath.Join(home, "other"), "kept", 0o644)
	writeFile(t, filepath.Join(home, "dir", "other"), "kept too", 0o644)
	// An existing symlink to outside, where the archive has a file: the
	// link is replaced, the file it points to is untouched.
	if err := os.Symlink(filepath.Join(outside, "victim"), filepath.Join(home, "was-link")); err != nil {
		t.Fatal(err)
	}
	// An existing hard link to a file outside: replaced, not written through.
	if err := os.Link(filepath.Join(outside, "victim"), filepath.Join(home, "was-hardlink")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "file-then-dir"), "x", 0o644)
	data := makeArchive(t,
		file("existing", "new"),
		file("was-link", "new"),
		file("was-hardlink", "new"),
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "dir/", Mode: 0o755}},
		file("dir/new", "new"),
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "file-then-dir/", Mode: 0o755}},
	)
	if _, err := Restore(context.Background(), bytes.NewReader(data), home, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"existing": "new", "was-link": "new", "was-hardlink": "new",
		"other": "kept", "dir/other": "kept too", "dir/new": "new"} {
		if b, err := os.ReadFile(filepath.Join(home, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", name, b, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(home, "was-link")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("was-link not replaced by a file")
	}
	if fi, err := os.Lstat(filepath.Join(home, "file-then-dir")); err != nil || !fi.IsDir() {
		t.Errorf("file-then-dir not replaced by a directory")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "original" {
		t.Errorf("outside file changed: %q", b)
	}
}

func TestRestoreLeavesStateDirAlone(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, ".local", "share", "shellctl")
	writeFile(t, filepath.Join(state, "shellctl.db"), "live", 0o600)
	_, srv, _ := newServer(t, Config{Home: home, StateDir: state})
	data := makeArchive(t,
		file(".local/share/shellctl/shellctl.db", "from archive"),
		ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "db-link", Linkname: ".local/share/shellctl/shellctl.db"}},
		file("f", "restored"),
	)
	resp, body := restoreRaw(t, srv, data)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "shellctl.db")); string(b) != "live" {
		t.Errorf("state dir overwritten: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(home, "db-link")); err == nil {
		t.Error("hard link into the state dir created")
	}
	if b, _ := os.ReadFile(filepath.Join(home, "f")); string(b) != "restored" {
		t.Errorf("f: %q", b)
	}
	if string(body) != `{"entries":1,"bytes_written":8}`+"\n" {
		t.Errorf("answer %s", body)
	}
}

func TestRestoreAcceptsTarStyleNames(t *testing.T) {
	// Archives made with `tar -C home -cf - .` name entries "./x".
	home := t.TempDir()
	data := makeArchive(t,
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}},
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./d/", Mode: 0o755}},
		file("./d/f", "x"),
		file("no-dir-entry/g", "y"),
	)
	if _, err := Restore(context.Background(), bytes.NewReader(data), home, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"d/f", "no-dir-entry/g"} {
		if _, err := os.Stat(filepath.Join(home, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestPAXSparseFixtureIsSparse(t *testing.T) {
	// The fixture must really be read as a sparse file by archive/tar, or
	// the refusal test above would prove nothing.
	dec, _ := zstd.NewReader(bytes.NewReader(paxSparseArchive(t)))
	defer dec.Close()
	h, err := tar.NewReader(dec).Next()
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "sparse" || h.PAXRecords["GNU.sparse.map"] == "" {
		t.Fatalf("fixture header %+v", h)
	}
}

// TestRestoreFromFileReportsEarlyRefusal: the server refuses a big input
// after its first bytes; the client still reports the refusal, not a
// broken pipe.
func TestRestoreFromFileReportsEarlyRefusal(t *testing.T) {
	_, _, conn := newServer(t, Config{Home: t.TempDir()})
	path := filepath.Join(t.TempDir(), "big.tar.gz")
	writeRandom(t, path, 64<<20)
	_, err := RestoreFromFile(context.Background(), conn, path, nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "archive_malformed" {
		t.Fatalf("err = %v, want archive_malformed", err)
	}
}
