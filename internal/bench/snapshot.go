package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shellctl/shellctl/internal/snapshot"
)

// treeBytes sums the sizes of the regular files below dir.
func treeBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// moveAside empties dir by renaming its entries into aside (created),
// keeping dir itself: nothing is deleted, see the restore passes.
func moveAside(dir, aside string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := os.Mkdir(aside, 0o700); err != nil {
		return err
	}
	for _, de := range ents {
		if err := os.Rename(filepath.Join(dir, de.Name()), filepath.Join(aside, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

// snapshotFloorTools says why the snapshot floors cannot run, or "".
func snapshotFloorTools() string {
	var missing []string
	for _, t := range []string{"tar", "zstd", "bash"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, ", ") + " not installed"
}

// save posts a snapshot save and copies the archive to w; it fails unless
// the trailer confirms the archive.
func (e *Env) save(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/snapshot/save", strings.NewReader(`{"excludes":[]}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("save: %d %s", resp.StatusCode, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("save: stream cut after %d bytes: %w", n, err)
	}
	if s := resp.Trailer.Get(snapshot.TrailerStatus); s != "ok" {
		return n, fmt.Errorf("save: trailer %s is %q, not ok", snapshot.TrailerStatus, s)
	}
	return n, nil
}

// restore posts the archive at path to the restore route.
func (e *Env) restore(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/snapshot/restore", f)
	if err != nil {
		return err
	}
	req.ContentLength = fi.Size()
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("restore: %d %s", resp.StatusCode, b)
	}
	return nil
}

func shell(dir, script string) (time.Duration, error) {
	cmd := exec.Command("bash", "-c", "set -o pipefail; "+script)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("`%s`: %v: %s", script, err, strings.TrimSpace(string(out)))
	}
	return d, nil
}

func benchSnapshot(ctx context.Context, e *Env, s Sizes) []*Row {
	save := &Row{Figure: fmt.Sprintf("snapshot save, %d MB Home", s.HomeMB), Unit: MBps, Target: Target{RatioAtLeast, 1}}
	rest := &Row{Figure: fmt.Sprintf("snapshot restore, %d MB Home", s.HomeMB), Unit: MBps, Target: Target{RatioAtLeast, 1}}
	fail := func(err error) []*Row {
		save.Err, rest.Err = err.Error(), err.Error()
		return []*Row{save, rest}
	}
	// Again, now that the earlier groups' logs take their share.
	if err := checkSnapshotSpace(e.Tmp, s); err != nil {
		return fail(err)
	}
	if err := snapshot.MakeBenchHome(e.Home, s.HomeMB*1000*1000); err != nil {
		return fail(fmt.Errorf("make the Home: %w", err))
	}
	total, err := treeBytes(e.Home)
	if err != nil {
		return fail(err)
	}
	missing := snapshotFloorTools()
	if missing != "" {
		save.FloorErr, rest.FloorErr = missing, missing
	}

	rss0, _ := RSS(e.PID)

	// One untimed save into a file: the archive of the restores, and a
	// warm page cache for every timed pass.
	archive := filepath.Join(e.Tmp, "home.tar.zst")
	f, err := os.Create(archive)
	if err != nil {
		return fail(err)
	}
	asize, err := e.save(ctx, f)
	f.Close()
	if err != nil {
		return fail(err)
	}
	defer os.Remove(archive)

	var rt, fl []float64
	for i := 0; i < s.Reps; i++ {
		start := time.Now()
		if _, err := e.save(ctx, io.Discard); err != nil {
			return fail(err)
		}
		rt = append(rt, mbps(total, time.Since(start)))
		if missing == "" {
			d, err := shell(e.Home, "tar -cf - . | zstd -1 -T1 > /dev/null")
			if err != nil {
				save.FloorErr = err.Error()
			} else {
				fl = append(fl, mbps(total, d))
			}
		}
	}
	save.Runtime, save.Floor = Summarize(rt), Summarize(fl)
	rss1, _ := RSS(e.PID)
	save.Notes = append(save.Notes, fmt.Sprintf("%d × POST /v1/snapshot/save of %.0f MB of files (archive %.0f MB) vs `tar -cf - . | zstd -1 -T1 > /dev/null`; rates on the file bytes; server RSS %.1f → %.1f MiB",
		s.Reps, float64(total)/1e6, float64(asize)/1e6, mib(rss0), mib(rss1)))

	// Every restore pass extracts into a directory holding nothing and no
	// pass is preceded by a deletion: the trees of earlier passes are moved
	// aside and removed only after the last pass. On ext4 without a journal
	// (this machine's root file system) creating an inode skips every free
	// inode of the group deleted in the last minute or more (the kernel's
	// recently_deleted check, one buffer lookup each), so a pass that
	// follows the deletion of a 150 MB tree paid 2-4 s of kernel time for
	// it, growing with the square of the tree's size: the ratio measured
	// which pass came after which deletion, not the restore.
	//
	// Both targets are also marked to spread their subdirectories
	// (spreadDirs), so neither lands among inodes that other work freed in
	// the minutes before.
	rt, fl = nil, nil
	spread, err := spreadDirs(e.Home)
	if err != nil {
		return fail(fmt.Errorf("mark the Home to spread its directories: %w", err))
	}
	var leftovers []string
	defer func() {
		for _, d := range leftovers {
			os.RemoveAll(d)
		}
	}()
	for i := 0; i < s.Reps; i++ {
		aside := filepath.Join(e.Tmp, fmt.Sprintf("home-%d", i))
		leftovers = append(leftovers, aside)
		if err := moveAside(e.Home, aside); err != nil {
			rest.Err = err.Error()
			return []*Row{save, rest}
		}
		syncFS()
		start := time.Now()
		if err := e.restore(ctx, archive); err != nil {
			rest.Err = err.Error()
			return []*Row{save, rest}
		}
		rt = append(rt, mbps(total, time.Since(start)))
		if missing == "" {
			floorDir := filepath.Join(e.Tmp, fmt.Sprintf("restore-%d", i))
			leftovers = append(leftovers, floorDir)
			os.MkdirAll(floorDir, 0o700)
			if spread {
				if _, err := spreadDirs(floorDir); err != nil {
					rest.FloorErr = err.Error()
				}
			}
			syncFS()
			d, err := shell(floorDir, "zstd -d -c < '"+archive+"' | tar -xf - "+restoreFloorFlags)
			if err != nil {
				rest.FloorErr = err.Error()
			} else {
				fl = append(fl, mbps(total, d))
			}
		}
	}
	rest.Runtime, rest.Floor = Summarize(rt), Summarize(fl)
	rss2, _ := RSS(e.PID)
	rest.Notes = append(rest.Notes, fmt.Sprintf("%d × POST /v1/snapshot/restore of that archive into an empty Home vs `zstd -d | tar -x %s` into an empty directory; earlier trees moved aside, none deleted until the end%s; server RSS %.1f MiB after", s.Reps, restoreFloorFlags, spreadNote(spread), mib(rss2)))
	return []*Row{save, rest}
}

// restoreFloorFlags make the restore floor do what the runtime does: the
// runtime extracts as the server's own user and sets each entry's mode and
// mtime but never its owner, so the floor's tar must not chown either. GNU
// tar run as root restores owners by default (one more syscall per file,
// and the floor's slowest part here); --no-same-owner makes it extract as
// the user running it, as it already does for a non-root user.
const restoreFloorFlags = "--no-same-owner"

// syncFS writes dirty pages back, so a pass does not pay for the previous
// one's writes.
func syncFS() { syscall.Sync() }

func spreadNote(spread bool) string {
	if spread {
		return "; both targets `chattr +T` (directories spread over the block groups)"
	}
	return ""
}
