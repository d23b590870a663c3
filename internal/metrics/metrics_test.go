package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestReasonLabelStaysSmall(t *testing.T) {
	for in, want := range map[string]string{
		"exited":                        "exited",
		"start_failed: fork: no memory": "start_failed",
		"":                              "none",
		"Weird Reason":                  "other",
		strings.Repeat("a", 41):         "other",
		"max_output_bytes":              "max_output_bytes",
		"setup_failed:landlock refused": "setup_failed",
	} {
		if got := ReasonLabel(in); got != want {
			t.Errorf("ReasonLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNilMetricsIsANoOp: services built without metrics call the hooks
// on a nil *Metrics.
func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	m.JobStarted("pty")
	m.JobRunning(time.Now(), time.Now())
	m.JobEnded("exited", "exited", time.Second)
	m.Output(10)
	m.Request("/v1/jobs", "GET", 200, time.Millisecond)
	m.Snapshot("save", "ok", 10, time.Second)
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestHooksShowInTheTextFormat(t *testing.T) {
	m := New()
	running := 3
	m.RegisterGauges(Gauges{JobsRunning: func() int { return running }, JobsLive: func() int { return 4 }, WarmRunners: func() int { return 2 }})
	now := time.Now()
	m.JobStarted("stdio")
	m.JobRunning(now, now.Add(5*time.Millisecond))
	m.JobEnded("failed", "start_failed: no runner", 2*time.Second)
	m.Output(123)
	m.Request("/v1/jobs/{id}", "BREW", 0, time.Millisecond)
	m.Snapshot("restore", "archive_malformed", 77, time.Second)
	running = 1
	out := scrape(t, m)
	for _, want := range []string{
		`shellctl_jobs_started_total{mode="stdio"} 1`,
		`shellctl_job_start_latency_seconds_sum 0.005`,
		`shellctl_jobs_ended_total{reason="start_failed",status="failed"} 1`,
		`shellctl_job_duration_seconds_sum 2`,
		`shellctl_job_output_bytes_total 123`,
		`shellctl_http_requests_total{code="200",method="other",route="/v1/jobs/{id}"} 1`,
		`shellctl_snapshot_bytes_total{op="restore"} 77`,
		`shellctl_snapshot_duration_seconds_count{op="restore",outcome="archive_malformed"} 1`,
		"shellctl_jobs_running 1",
		"shellctl_jobs_live 4",
		"shellctl_warm_runners 2",
		"shellctl_build_info{",
		"go_goroutines ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
