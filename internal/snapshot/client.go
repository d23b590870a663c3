package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Conn says how to reach a shellctl server.
type Conn struct {
	BaseURL string       // e.g. http://127.0.0.1:8080
	Token   string       // bearer token; empty when the server has none
	HTTP    *http.Client // nil means a client without a total timeout (snapshots are long)
}

func (c Conn) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{}
}

func (c Conn) newRequest(ctx context.Context, route string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+route, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// APIError is an error answer of the server.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
}

func apiError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		return &APIError{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
	}
	return &APIError{Status: resp.StatusCode, Code: "unexpected_answer", Message: strings.TrimSpace(string(b))}
}

// SaveToFile saves the server's Home into path ("-" is standard output).
// It succeeds only when the stream ended cleanly with the trailer
// X-Snapshot-Status: ok and the byte count and SHA-256 in the trailers match
// what was received. A file is written under a temporary name beside path
// and renamed into place on success, so path never holds a partial archive
// (and a previous archive at path is kept when the save fails). progress,
// when not nil, receives a progress line (bytes and rate) a few times a
// second and a final one.
func SaveToFile(ctx context.Context, c Conn, path string, excludes []string, progress io.Writer) (SaveStats, error) {
	if excludes == nil {
		excludes = []string{}
	}
	body, err := json.Marshal(saveRequest{Excludes: excludes})
	if err != nil {
		return SaveStats{}, err
	}
	req, err := c.newRequest(ctx, "/v1/snapshot/save", bytes.NewReader(body))
	if err != nil {
		return SaveStats{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client().Do(req)
	if err != nil {
		return SaveStats{}, fmt.Errorf("snapshot save: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return SaveStats{}, fmt.Errorf("snapshot save: %w", apiError(resp))
	}

	var out io.Writer
	var tmp *os.File
	if path == "-" {
		out = os.Stdout
	} else {
		tmp, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
		if err != nil {
			return SaveStats{}, fmt.Errorf("snapshot save: %w", err)
		}
		defer func() {
			if tmp != nil { // not renamed into place: remove the partial file
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		out = tmp
	}

	h := sha256.New()
	pr := newProgress(progress, "saved")
	n, err := io.Copy(io.MultiWriter(out, h, pr), resp.Body)
	pr.finish(err == nil)
	if err != nil {
		return SaveStats{}, fmt.Errorf("snapshot save: stream cut after %d bytes: %w", n, err)
	}
	st := SaveStats{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if err := checkTrailers(resp.Trailer, st); err != nil {
		return SaveStats{}, fmt.Errorf("snapshot save: %w", err)
	}
	if tmp != nil {
		if err := tmp.Sync(); err != nil {
			return SaveStats{}, fmt.Errorf("snapshot save: %w", err)
		}
		if err := tmp.Close(); err != nil {
			return SaveStats{}, fmt.Errorf("snapshot save: %w", err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return SaveStats{}, fmt.Errorf("snapshot save: %w", err)
		}
		tmp = nil
	}
	return st, nil
}

// checkTrailers verifies that the server declared success and that what
// was received is what it sent.
func checkTrailers(tr http.Header, got SaveStats) error {
	if s := tr.Get(TrailerStatus); s != "ok" {
		return fmt.Errorf("the server did not confirm the archive (%s: %q): the archive is incomplete", TrailerStatus, s)
	}
	want, err := strconv.ParseInt(tr.Get(TrailerBytes), 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s trailer %q", TrailerBytes, tr.Get(TrailerBytes))
	}
	if want != got.Bytes {
		return fmt.Errorf("received %d bytes, the server sent %d", got.Bytes, want)
	}
	if s := tr.Get(TrailerSHA256); !strings.EqualFold(s, got.SHA256) {
		return fmt.Errorf("SHA-256 mismatch: received %s, the server sent %q", got.SHA256, s)
	}
	return nil
}

// RestoreFromFile sends the archive at path ("-" is standard input) to the
// server's restore route and returns its answer. progress as for
// SaveToFile.
func RestoreFromFile(ctx context.Context, c Conn, path string, progress io.Writer) (RestoreStats, error) {
	var in io.Reader
	size := int64(-1)
	if path == "-" {
		in = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return RestoreStats{}, fmt.Errorf("snapshot restore: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		in = f
	}
	pr := newProgress(progress, "sent")
	body := io.TeeReader(in, pr)
	req, err := c.newRequest(ctx, "/v1/snapshot/restore", io.NopCloser(body))
	if err != nil {
		return RestoreStats{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if size >= 0 {
		req.ContentLength = size
	}
	resp, err := c.client().Do(req)
	pr.finish(err == nil)
	if err != nil {
		return RestoreStats{}, fmt.Errorf("snapshot restore: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return RestoreStats{}, fmt.Errorf("snapshot restore: %w", apiError(resp))
	}
	var st RestoreStats
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st); err != nil {
		return RestoreStats{}, fmt.Errorf("snapshot restore: read answer: %w", err)
	}
	return st, nil
}

// progressInterval bounds how often the progress line is redrawn.
const progressInterval = 250 * time.Millisecond

// progress counts bytes and redraws one line ("\r") on w at most every
// progressInterval. A nil w makes it count only.
type progress struct {
	w     io.Writer
	verb  string
	mu    sync.Mutex
	n     int64
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, verb string) *progress {
	now := time.Now()
	return &progress{w: w, verb: verb, start: now, last: now}
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(len(b))
	if p.w != nil {
		if now := time.Now(); now.Sub(p.last) >= progressInterval {
			p.last = now
			fmt.Fprintf(p.w, "\r%s %s (%s/s)   ", p.verb, humanBytes(p.n), humanBytes(rate(p.n, now.Sub(p.start))))
		}
	}
	return len(b), nil
}

func (p *progress) finish(ok bool) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	status := ""
	if !ok {
		status = ", failed"
	}
	fmt.Fprintf(p.w, "\r%s %s in %s (%s/s)%s   \n", p.verb, humanBytes(p.n), el.Round(100*time.Millisecond),
		humanBytes(rate(p.n, el)), status)
}

func rate(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n) / d.Seconds())
}

// humanBytes formats n in binary units: 0 B, 1023 B, 1.5 KiB, 12.3 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
