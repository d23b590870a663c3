package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

const testToken = "s3cret"

// newServer serves the two routes behind a bearer check, as internal/api
// mounts them.
func newServer(t *testing.T, cfg Config) (*Service, *httptest.Server, Conn) {
	t.Helper()
	svc := NewService(cfg)
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+testToken {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/v1/snapshot/save", auth(svc.HandleSave))
	mux.HandleFunc("/v1/snapshot/restore", auth(svc.HandleRestore))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return svc, srv, Conn{BaseURL: srv.URL, Token: testToken}
}

func writeFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func writeRandom(t *testing.T, path string, size int) {
	t.Helper()
	b := make([]byte, size)
	r := rand.NewChaCha8([32]byte{1, 2, 3})
	r.Read(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// saveRaw posts a save and returns the response with its whole body read.
func saveRaw(t *testing.T, srv *httptest.Server, body string) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/snapshot/save", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func restoreRaw(t *testing.T, srv *httptest.Server, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/snapshot/restore", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("not an error envelope: %q", b)
	}
	return env.Error.Code
}

// saveArchive runs the library Save and returns the archive.
func saveArchive(t *testing.T, home string, excludes []string, stateDir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Save(context.Background(), &buf, home, SaveOptions{Excludes: excludes, StateDir: stateDir}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// listArchive decodes an archive into its headers, by name.
func listArchive(t *testing.T, data []byte) map[string]*tar.Header {
	t.Helper()
	dec, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	tr := tar.NewReader(dec)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[h.Name]; dup {
			t.Errorf("duplicate entry %q", h.Name)
		}
		out[h.Name] = h
	}
}

func names(m map[string]*tar.Header) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// ent is one entry of a hand-made archive.
type ent struct {
	hdr  tar.Header
	body string
}

func file(name, body string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body: body}
}

// makeArchive builds a tar+zstd archive of ents.
func makeArchive(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(enc)
	for _, e := range ents {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("write header %q: %v", h.Name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	return buf.Bytes()
}

func zstdOf(t *testing.T, raw []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(raw)
	enc.Close()
	return buf.Bytes()
}

// treeState describes a tree for comparison: type, permission bits,
// content hash or link target, and which names share an inode.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			sum := sha256.Sum256(b)
			s := fmt.Sprintf("file %o %s mtime=%d", fi.Mode().Perm(), hex.EncodeToString(sum[:8]), fi.ModTime().Unix())
			if st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					s += " linked-to " + first
				} else {
					inodes[st.Ino] = rel
				}
			}
			out[rel] = s
		default:
			out[rel] = "other " + fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffStates(t *testing.T, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: want %q, got %q", k, v, got[k])
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %q", k, v)
		}
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, timeout)
	return 0
}
