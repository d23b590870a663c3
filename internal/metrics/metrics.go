// Package metrics holds the Prometheus collectors of shellctl serve
// (GET /metrics) and the small hooks the services call to feed them. Every
// hook is safe on a nil *Metrics, so a service built without metrics (unit
// tests, tools) needs no checks of its own.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shellctl/shellctl/internal/buildinfo"
)

const namespace = "shellctl"

// Metrics is the registry of one server and its collectors.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	jobsStarted      *prometheus.CounterVec
	jobsEnded        *prometheus.CounterVec
	jobDuration      prometheus.Histogram
	startLatency     prometheus.Histogram
	outputBytes      prometheus.Counter
	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	snapshotBytes    *prometheus.CounterVec
	snapshotDuration *prometheus.HistogramVec
}

// New makes the collectors and registers them, with the Go runtime's and
// the process's, and shellctl_build_info.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	m.jobsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "jobs_started_total",
		Help: "Jobs created by run requests, by mode (pty, stdio).",
	}, []string{"mode"})
	m.jobsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "jobs_ended_total",
		Help: "Jobs whose end this server recorded or learnt, by final status and reason.",
	}, []string{"status", "reason"})
	m.jobDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "job_duration_seconds",
		Help:    "Wall-clock time of ended jobs, from their first instruction (or creation, when they never ran) to their end.",
		Buckets: []float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600},
	})
	m.startLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "job_start_latency_seconds",
		Help:    "Time from the arrival of a run request to the job's first instruction (its running event).",
		Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	})
	m.outputBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "job_output_bytes_total",
		Help: "Bytes of output written by jobs followed by this server (counted from the runners' size events).",
	})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "http_request_duration_seconds",
		Help:    "Time to answer HTTP requests (waits included), by route pattern and status code.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"route", "code"})
	m.snapshotBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "snapshot_bytes_total",
		Help: "Archive bytes of snapshot operations: sent by saves, received by restores.",
	}, []string{"op"})
	m.snapshotDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "snapshot_duration_seconds",
		Help:    "Time of snapshot operations, by operation (save, restore) and outcome (ok, or the error code).",
		Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800},
	}, []string{"op", "outcome"})
	bi := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help:        "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "goversion": bi.GoVersion},
	})
	build.Set(1)
	m.reg.MustRegister(m.jobsStarted, m.jobsEnded, m.jobDuration, m.startLatency, m.outputBytes,
		m.httpRequests, m.httpDuration, m.snapshotBytes, m.snapshotDuration, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Gauges are read when /metrics is scraped, from the services' own state.
type Gauges struct {
	JobsRunning func() int // jobs in status running
	JobsLive    func() int // jobs whose end is not yet recorded (created, starting, running)
	WarmRunners func() int // started runners waiting for a job
}

// RegisterGauges adds the gauges read from the services at scrape time.
func (m *Metrics) RegisterGauges(g Gauges) {
	add := func(name, help string, f func() int) {
		if f != nil {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help},
				func() float64 { return float64(f()) }))
		}
	}
	add("jobs_running", "Jobs in status running.", g.JobsRunning)
	add("jobs_live", "Jobs not yet ended: created, starting or running.", g.JobsLive)
	add("warm_runners", "Runners started ahead and waiting for a job.", g.WarmRunners)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// JobStarted counts a job created in mode.
func (m *Metrics) JobStarted(mode string) {
	if m == nil {
		return
	}
	m.jobsStarted.WithLabelValues(mode).Inc()
}

// JobRunning records the time from the run request to the job's first
// instruction.
func (m *Metrics) JobRunning(requested, started time.Time) {
	if m == nil || requested.IsZero() || started.IsZero() {
		return
	}
	m.startLatency.Observe(max(started.Sub(requested), 0).Seconds())
}

// JobEnded counts a job's end; duration is observed when known (> 0).
func (m *Metrics) JobEnded(status, reason string, duration time.Duration) {
	if m == nil {
		return
	}
	m.jobsEnded.WithLabelValues(status, ReasonLabel(reason)).Inc()
	if duration > 0 {
		m.jobDuration.Observe(duration.Seconds())
	}
}

// Output counts n more bytes of job output.
func (m *Metrics) Output(n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.outputBytes.Add(float64(n))
}

// Request counts an answered HTTP request.
func (m *Metrics) Request(route, method string, code int, d time.Duration) {
	if m == nil {
		return
	}
	c := codeLabel(code)
	m.httpRequests.WithLabelValues(route, methodLabel(method), c).Inc()
	m.httpDuration.WithLabelValues(route, c).Observe(d.Seconds())
}

// Snapshot records one snapshot operation: op is "save" or "restore",
// outcome "ok" or an error code, bytes the archive bytes moved.
func (m *Metrics) Snapshot(op, outcome string, bytes int64, d time.Duration) {
	if m == nil {
		return
	}
	if bytes > 0 {
		m.snapshotBytes.WithLabelValues(op).Add(float64(bytes))
	}
	m.snapshotDuration.WithLabelValues(op, outcome).Observe(d.Seconds())
}

// ReasonLabel keeps the label set of reasons small: a reason's detail
// after its first ":" ("start_failed: …") is dropped, and anything that
// is not a short snake_case word becomes "other".
func ReasonLabel(reason string) string {
	if i := strings.IndexByte(reason, ':'); i >= 0 {
		reason = reason[:i]
	}
	if reason == "" {
		return "none"
	}
	if len(reason) > 40 {
		return "other"
	}
	for i := 0; i < len(reason); i++ {
		c := reason[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return "other"
		}
	}
	return reason
}

func codeLabel(code int) string {
	if code == 0 {
		code = http.StatusOK
	}
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code)
}

// methodLabel keeps the label set of methods small.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return m
	}
	return "other"
}
