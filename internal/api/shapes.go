package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/shellctl/shellctl/internal/jobs"
)

// The response shapes of http-api.md, with exactly its keys: the Python SDK
// rejects a response with a key it does not expect.

type resultJSON struct {
	JobID      string `json:"job_id"`
	Done       bool   `json:"done"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	OutputPath string `json:"output_path"`
	Output     string `json:"output"`
	Offset     int64  `json:"offset"`
	Truncated  bool   `json:"truncated"`
}

type statusViewJSON struct {
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	Done      bool    `json:"done"`
	ExitCode  *int    `json:"exit_code"`
	CreatedAt string  `json:"created_at"`
	StartedAt *string `json:"started_at"`
	EndedAt   *string `json:"ended_at"`
	Offset    int64   `json:"offset"`
}

type jobInfoJSON struct {
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	StartedAt *string `json:"started_at,omitempty"`
	EndedAt   *string `json:"ended_at,omitempty"`
}

type listJSON struct {
	Jobs []jobInfoJSON `json:"jobs"`
}

type deletedJSON struct {
	JobID   string `json:"job_id"`
	Deleted bool   `json:"deleted"`
}

const timeLayout = "2006-01-02T15:04:05Z"

func apiTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func optTime(t *time.Time) *string {
	if t == nil || t.IsZero() {
		return nil
	}
	s := apiTime(*t)
	return &s
}

func statusJSON(v *jobs.StatusView) statusViewJSON {
	return statusViewJSON{JobID: v.JobID, Status: v.Status, Done: v.Done, ExitCode: v.ExitCode,
		CreatedAt: apiTime(v.CreatedAt), StartedAt: optTime(v.StartedAt), EndedAt: optTime(v.EndedAt), Offset: v.Offset}
}

func writeResult(w http.ResponseWriter, r *jobs.Result) {
	writeJSON(w, resultJSON{JobID: r.JobID, Done: r.Done, Status: r.Status, ExitCode: r.ExitCode,
		OutputPath: r.OutputPath, Output: r.Output, Offset: r.Offset, Truncated: r.Truncated})
}

// writeJSON answers 200 with v. HTML escaping is off: output windows are
// terminal text, and escaping '<' '>' '&' only makes them bigger.
func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":{"code":"internal_error","message":"encode response"}}`, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}
