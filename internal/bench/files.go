package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/snapshot"
)

// fileMiB is the size of the file moved up and down.
const fileMiB = 40

// benchFiles measures the file routes against a plain loopback HTTP file
// server in this process (net/http: ServeFile for the download, a handler
// that writes, fsyncs and renames the body for the upload, as the PUT
// does), stat's latency, and an archive of a tree against tar -c.
func benchFiles(ctx context.Context, e *Env, s Sizes) []*Row {
	down := &Row{Figure: fmt.Sprintf("file download, %d MiB", fileMiB), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	up := &Row{Figure: fmt.Sprintf("file upload, %d MiB", fileMiB), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	stat := &Row{Figure: "file stat", Unit: Millis, Target: Target{ValueAtMost, 1}}
	arch := &Row{Figure: fmt.Sprintf("archive, %d MB tree", s.HomeMB), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	rows := []*Row{down, up, stat, arch}
	fail := func(err error) []*Row {
		for _, r := range rows {
			if r.Runtime == nil && r.Err == "" {
				r.Err = err.Error()
			}
		}
		return rows
	}
	dir := filepath.Join(e.Home, "files-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	data := make([]byte, fileMiB<<20)
	rand.Read(data)
	src := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return fail(err)
	}
	floorURL, stop, err := plainFileServer(dir)
	if err != nil {
		return fail(err)
	}
	defer stop()
	n := int64(len(data))
	get := func(u string, auth bool) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+e.Token)
		}
		start := time.Now()
		resp, err := e.HTTP.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		got, err := io.Copy(io.Discard, resp.Body)
		if err == nil && (resp.StatusCode != 200 || got != n) {
			err = fmt.Errorf("GET %s: %d, %d bytes", u, resp.StatusCode, got)
		}
		return time.Since(start), err
	}
	put := func(u string, auth bool) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, nil)
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(data)), n
		if auth {
			req.Header.Set("Authorization", "Bearer "+e.Token)
		}
		start := time.Now()
		resp, err := e.HTTP.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 201 {
			return 0, fmt.Errorf("PUT %s: %d", u, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	route := func(p string) string { return e.URL + "/v1/files/content?path=" + url.QueryEscape(p) }
	reps := max(s.Reps, 3) * 3
	var rt, fl, urt, ufl []float64
	for range reps {
		d, err := get(route(src), true)
		if err != nil {
			return fail(err)
		}
		rt = append(rt, mbps(n, d))
		if d, err = get(floorURL+"/src.bin", false); err != nil {
			down.FloorErr = err.Error()
		} else {
			fl = append(fl, mbps(n, d))
		}
		if d, err = put(route(filepath.Join(dir, "up.bin")), true); err != nil {
			return fail(err)
		}
		urt = append(urt, mbps(n, d))
		if d, err = put(floorURL+"/up-floor.bin", false); err != nil {
			up.FloorErr = err.Error()
		} else {
			ufl = append(ufl, mbps(n, d))
		}
	}
	down.Runtime, down.Floor = Summarize(rt), Summarize(fl)
	up.Runtime, up.Floor = Summarize(urt), Summarize(ufl)
	down.Notes = append(down.Notes, fmt.Sprintf("%d × GET /v1/files/content of a %d MiB file vs GET of it from net/http's ServeFile on loopback", reps, fileMiB))
	up.Notes = append(up.Notes, fmt.Sprintf("%d × PUT /v1/files/content of %d MiB (temporary file, fsync, rename) vs a plain net/http handler writing the body to a temporary file, fsync, rename", reps, fileMiB))

	var st []float64
	for range s.Runs {
		start := time.Now()
		if _, err := e.Client.Stat(ctx, src, true); err != nil {
			return fail(err)
		}
		st = append(st, float64(time.Since(start).Microseconds())/1000)
	}
	stat.Runtime = Summarize(st)
	stat.Notes = append(stat.Notes, fmt.Sprintf("%d × GET /v1/files/stat, client to client", s.Runs))

	tree := filepath.Join(dir, "tree")
	if err := snapshot.MakeBenchHome(tree, s.HomeMB*1000*1000); err != nil {
		return fail(err)
	}
	total, err := treeBytes(tree)
	if err != nil {
		return fail(err)
	}
	var art, afl []float64
	for range s.Reps {
		start := time.Now()
		resp, err := e.Client.Archive(ctx, tree, archiveNoBounds)
		if err != nil {
			return fail(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.Trailer.Get("X-Archive-Status") != "ok" {
			return fail(fmt.Errorf("archive: %v, status %q", err, resp.Trailer.Get("X-Archive-Status")))
		}
		art = append(art, mbps(total, time.Since(start)))
		// Through cat: GNU tar writing to /dev/null reads no file.
		if d, err := shell(tree, "tar -cf - . | cat > /dev/null"); err != nil {
			arch.FloorErr = err.Error()
		} else {
			afl = append(afl, mbps(total, d))
		}
	}
	arch.Runtime, arch.Floor = Summarize(art), Summarize(afl)
	arch.Notes = append(arch.Notes, fmt.Sprintf("%d × GET /v1/files/archive (tar) of %.0f MB of files vs `tar -cf - . | cat > /dev/null`; rates on the file bytes", s.Reps, float64(total)/1e6))
	return rows
}

// archiveNoBounds lifts the archive's bounds above the bench tree's.
var archiveNoBounds = client.ArchiveOptions{MaxFiles: 1 << 30, MaxBytes: 1 << 40, MaxEntriesVisited: 1 << 30}

// plainFileServer serves dir on loopback: GET as net/http's ServeFile,
// PUT into a temporary file, fsynced and renamed into place.
func plainFileServer(dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := filepath.Join(dir, filepath.Base(r.URL.Path))
		if r.Method != http.MethodPut {
			http.ServeFile(w, r, p)
			return
		}
		f, err := os.CreateTemp(dir, ".floor-*")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		_, err = io.CopyBuffer(f, r.Body, make([]byte, 1<<20))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err == nil {
			err = os.Rename(f.Name(), p)
		}
		if err != nil {
			os.Remove(f.Name())
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}
