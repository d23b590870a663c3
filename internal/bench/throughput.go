package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shellctl/shellctl/internal/client"
)

// line99 is 99 printable characters; with its newline a 100-byte line.
var line99 = strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 3)[:99]

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }

func countJobs(state string) (int, error) {
	ents, err := os.ReadDir(filepath.Join(state, "jobs"))
	return len(ents), err
}

func benchStdioThroughput(ctx context.Context, e *Env, s Sizes) []*Row {
	n := s.StdioMiB << 20
	script := fmt.Sprintf("head -c %dM /dev/zero", s.StdioMiB)
	r := &Row{Figure: fmt.Sprintf("stdio throughput, %d MiB", s.StdioMiB), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	file := filepath.Join(e.Tmp, "zero.out")
	var rt, fl []float64
	for i := 0; i < s.Reps; i++ {
		d, id, err := e.RunUntilDone(ctx, "stdio", script)
		if id != "" {
			e.Client.Delete(ctx, id, true, 1)
		}
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		rt = append(rt, mbps(n, d))
		f, err := ExecFloor(script + " > " + file)
		os.Remove(file)
		if err != nil {
			r.FloorErr = err.Error()
		} else {
			fl = append(fl, mbps(n, f))
		}
	}
	r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
	r.Notes = append(r.Notes, fmt.Sprintf("%d × stdio job `%s` to done (status polled every ~0.5 %% of the elapsed time) vs `bash -c '%s > file'`", s.Reps, script, script))
	return []*Row{r}
}

func benchPTYThroughput(ctx context.Context, e *Env, s Sizes) []*Row {
	n := s.PTYMiB << 20
	script := fmt.Sprintf("yes '%s' | head -c %dM", line99, s.PTYMiB)
	r := &Row{Figure: fmt.Sprintf("pty throughput, %d MiB", s.PTYMiB), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	var rt, fl []float64
	var logSize int64
	for i := 0; i < s.Reps; i++ {
		d, id, err := e.RunUntilDone(ctx, "pty", script)
		if id != "" {
			if st, err := e.Client.Status(ctx, id); err == nil {
				logSize = st.Offset
			}
			e.Client.Delete(ctx, id, true, 1)
		}
		if err != nil {
			r.Err = err.Error()
			return []*Row{r}
		}
		rt = append(rt, mbps(n, d))
		f, _, err := PTYFloor(script)
		if err != nil {
			r.FloorErr = err.Error()
		} else {
			fl = append(fl, mbps(n, f))
		}
	}
	r.Runtime, r.Floor = Summarize(rt), Summarize(fl)
	r.Notes = append(r.Notes, fmt.Sprintf("%d × pty job of 100-byte lines (`yes … | head -c %dM`, %d bytes in output.log) to done vs the same read to EOF from a bare PTY; rates on %d MiB", s.Reps, s.PTYMiB, logSize, s.PTYMiB))
	return []*Row{r}
}

// rangeServer serves byte ranges of one file over loopback: GET
// /?off=N&len=M answers those bytes as they are. It is the floor of the
// page read.
type rangeServer struct {
	f   *os.File
	ln  net.Listener
	url string
}

func startRangeServer(path string) (*rangeServer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	rs := &rangeServer{f: f, ln: ln, url: "http://" + ln.Addr().String()}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.ParseInt(r.URL.Query().Get("off"), 10, 64)
		n, _ := strconv.Atoi(r.URL.Query().Get("len"))
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		if cap(*bp) < n {
			*bp = make([]byte, n)
		}
		buf := (*bp)[:n]
		k, err := f.ReadAt(buf, off) // one pread
		if err != nil && err != io.EOF {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(k))
		w.Write(buf[:k])
	}))
	return rs, nil
}

var bufPool = sync.Pool{New: func() any { return new([]byte) }}

func (rs *rangeServer) Close() { rs.ln.Close(); rs.f.Close() }

func benchPageRead(ctx context.Context, e *Env, s Sizes) []*Row {
	const window = 524288
	size := s.LogMiB << 20
	main := &Row{Figure: fmt.Sprintf("page read, %d MiB log", s.LogMiB), Unit: Millis, Target: Target{RatioAtMost, 2}}
	ends := &Row{Figure: "page read, end vs start", Unit: Millis, Target: Target{RatioAtMost, 1.25}}
	fail := func(err error) []*Row {
		main.Err, ends.Err = err.Error(), err.Error()
		return []*Row{main, ends}
	}
	// A text log (base64 lines of 99 characters), so the windows are what
	// agents read, not JSON escapes of NUL bytes.
	script := fmt.Sprintf("base64 -w 99 /dev/urandom | head -c %dM", s.LogMiB)
	_, id, err := e.RunUntilDone(ctx, "stdio", script)
	if err != nil {
		return fail(fmt.Errorf("make the log: %w", err))
	}
	defer e.Client.Delete(context.Background(), id, true, 1)
	st, err := e.Client.Status(ctx, id)
	if err != nil {
		return fail(err)
	}
	if st.Offset != size {
		return fail(fmt.Errorf("log of job %s is %d bytes, want %d", id, st.Offset, size))
	}
	logPath := filepath.Join(e.State, "jobs", id, "output.log")
	rs, err := startRangeServer(logPath)
	if err != nil {
		return fail(err)
	}
	defer rs.Close()
	// keep: one connection kept open across calls on each side (what an
	// agent's client does); fresh: a new connection per call on each side
	// (for the note only).
	keep := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	defer keep.CloseIdleConnections()

	// Both sides read the answer into a buffer kept across calls, so the
	// client's allocations weigh on neither figure.
	var rtBuf, flBuf bytes.Buffer
	// runtimeRead times one wait call at off of job jid (log size jsize):
	// to the last byte of the answer (the figure), and to the window's text
	// decoded from the JSON as the Go client decodes it (the decoded row).
	runtimeRead := func(hc *http.Client, jid string, jsize, off int64) (body, decoded time.Duration, err error) {
		zero := 0.0
		reqBody, err := json.Marshal(client.WaitRequest{Offset: off, Timeout: &zero, OutputLimit: window})
		if err != nil {
			return 0, 0, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Client.BaseURL+"/v1/jobs/"+jid+"/wait", bytes.NewReader(reqBody))
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+e.Client.Token)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, 0, err
		}
		rtBuf.Reset()
		_, err = rtBuf.ReadFrom(resp.Body)
		resp.Body.Close()
		body = time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		raw := rtBuf.Bytes()
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("wait at %d: %d %s", off, resp.StatusCode, raw)
		}
		// Decoded as the Go client decodes an answer (client.Call): the
		// JobResult's own decoder, without encoding/json's scans first.
		var res client.JobResult
		if err := res.UnmarshalJSON(raw); err != nil {
			return 0, 0, err
		}
		decoded = time.Since(start)
		if len(res.Output) != window && res.Offset != jsize {
			return 0, 0, fmt.Errorf("wait at %d decoded to %d bytes of output, want %d", off, len(res.Output), window)
		}
		if got := res.Offset - off; got != window && res.Offset != jsize {
			return 0, 0, fmt.Errorf("wait at %d answered %d bytes, want %d", off, got, window)
		}
		return body, decoded, nil
	}
	floorRead := func(hc *http.Client, url string, off int64) (time.Duration, error) {
		start := time.Now()
		resp, err := hc.Get(fmt.Sprintf("%s/?off=%d&len=%d", url, off, window))
		if err != nil {
			return 0, err
		}
		flBuf.Reset()
		n, err := flBuf.ReadFrom(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if n != window {
			return 0, fmt.Errorf("range server answered %d bytes", n)
		}
		return d, nil
	}

	rng := rand.New(rand.NewPCG(1, 2))
	last := size - window
	var rt, dec, fl, atStart, atEnd []float64
	region := min(int64(8<<20), last)
	for i := -5; i < s.Pages; i++ {
		off := rng.Int64N(last + 1)
		d, dd, err := runtimeRead(keep, id, size, off)
		if err != nil {
			return fail(err)
		}
		f, err := floorRead(keep, rs.url, off)
		if err != nil {
			main.FloorErr = err.Error()
		}
		if i >= 0 {
			rt, dec = append(rt, ms(d)), append(dec, ms(dd))
			if err == nil {
				fl = append(fl, ms(f))
			}
		}
	}
	for i := 0; i < s.Pages/2; i++ {
		a, _, err := runtimeRead(keep, id, size, rng.Int64N(region))
		if err != nil {
			return fail(err)
		}
		b, _, err := runtimeRead(keep, id, size, last-rng.Int64N(region))
		if err != nil {
			return fail(err)
		}
		atStart, atEnd = append(atStart, ms(a)), append(atEnd, ms(b))
	}
	// A new connection per call on both sides (informative).
	var frt, ffl []float64
	for i := 0; i < max(s.Pages/4, 10); i++ {
		off := rng.Int64N(last + 1)
		d, _, err := runtimeRead(fresh, id, size, off)
		if err != nil {
			return fail(err)
		}
		f, err := floorRead(fresh, rs.url, off)
		if err != nil {
			break
		}
		frt, ffl = append(frt, ms(d)), append(ffl, ms(f))
	}
	decoded := &Row{Figure: "page read, + Go client decode", Unit: Millis, Target: Target{RatioAtMost, 2}}
	main.Runtime, main.Floor = Summarize(rt), Summarize(fl)
	decoded.Runtime, decoded.Floor, decoded.FloorErr = Summarize(dec), main.Floor, main.FloorErr
	ends.Runtime, ends.Floor = Summarize(atEnd), Summarize(atStart)
	main.Notes = append(main.Notes, fmt.Sprintf("%d wait calls (output_limit %d, timeout 0) at uniformly random offsets (fixed seed) of a finished stdio job's %d MiB base64 text log (99-character lines), each timed from the request to the last byte of the JSON answer; floor = GET of the same window from a plain Go HTTP server over loopback that answers one pread of it; both bodies read into a buffer kept across calls; both sides keep one connection open across calls (keep-alive) and alternate call by call", s.Pages, window, s.LogMiB))
	if a, b := Summarize(frt), Summarize(ffl); a != nil && b != nil {
		main.Notes = append(main.Notes, fmt.Sprintf("with a new connection per call on both sides (%d calls each): runtime %s, floor %s, %s; new connections for the runtime only would give %s",
			a.N, FormatStats(a, Millis), FormatStats(b, Millis), FormatValue(a.P50/b.P50)+"×", FormatValue(a.P50/main.Floor.P50)+"×"))
	}
	decoded.Notes = append(decoded.Notes, "the same calls as the page read, each timed until the answer is decoded into the window's text as shellctl's Go client decodes it (wire.JobResult's one-pass decoder, encoding/json for any other shape; the floor's body is the bytes themselves): the cost of the JSON wire shape on the client's side")
	if z := nulWindow(ctx, e, window, runtimeRead, floorRead, keep); z != "" {
		decoded.Notes = append(decoded.Notes, z)
	}
	ends.Notes = append(ends.Notes, fmt.Sprintf("%d windows in the last 8 MiB (runtime column) vs %d in the first 8 MiB (floor column), interleaved, to the answer's last byte; target: the same at the end as at the start (within 25 %%)", len(atEnd), len(atStart)))
	return []*Row{main, decoded, ends}
}

// nulWindow measures 512 KiB windows of a log of NUL bytes (each one a
// six-byte JSON escape) and says what they cost, or "" when it cannot.
func nulWindow(ctx context.Context, e *Env, window int64,
	runtimeRead func(*http.Client, string, int64, int64) (time.Duration, time.Duration, error),
	floorRead func(*http.Client, string, int64) (time.Duration, error), hc *http.Client) string {
	const logMiB = 4
	_, id, err := e.RunUntilDone(ctx, "stdio", fmt.Sprintf("head -c %dM /dev/zero", logMiB))
	if id != "" {
		defer e.Client.Delete(context.Background(), id, true, 1)
	}
	if err != nil {
		return ""
	}
	rs, err := startRangeServer(filepath.Join(e.State, "jobs", id, "output.log"))
	if err != nil {
		return ""
	}
	defer rs.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	var rt, dec, fl []float64
	for i := -2; i < 10; i++ {
		off := rng.Int64N(logMiB<<20 - window + 1)
		d, dd, err := runtimeRead(hc, id, logMiB<<20, off)
		if err != nil {
			return ""
		}
		f, err := floorRead(hc, rs.url, off)
		if err != nil {
			return ""
		}
		if i >= 0 {
			rt, dec, fl = append(rt, ms(d)), append(dec, ms(dd)), append(fl, ms(f))
		}
	}
	a, b, c := Summarize(rt), Summarize(dec), Summarize(fl)
	return fmt.Sprintf("a window of NUL bytes (a `head -c %dM /dev/zero` log, %d windows; each NUL is the six-byte escape \\u0000 in JSON): %s to the last byte (%s), %s decoded (%s), vs a floor of %s",
		logMiB, a.N, FormatStats(a, Millis), FormatValue(a.P50/c.P50)+"×", FormatStats(b, Millis), FormatValue(b.P50/c.P50)+"×", FormatStats(c, Millis))
}
