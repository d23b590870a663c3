package metrics

import "github.com/prometheus/client_golang/prometheus"

// EgressCounters are the egress proxy's counters, read at scrape time.
type EgressCounters struct {
	// Requests by decision: intercepted (answered inside TLS the proxy
	// terminated), tunnelled (CONNECTs passed through), forwarded (plain
	// HTTP), refused.
	Requests map[string]func() int64
	// Substitutions by result: done (values put into requests), refused
	// (misbound placeholders, placeholders in plain HTTP).
	Substitutions map[string]func() int64
}

// RegisterEgress adds shellctl_egress_requests_total{decision} and
// shellctl_egress_substitutions_total{result}.
func (m *Metrics) RegisterEgress(c EgressCounters) {
	add := func(name, help, label string, fs map[string]func() int64) {
		for v, f := range fs {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: namespace, Name: name, Help: help, ConstLabels: prometheus.Labels{label: v},
			}, func() float64 { return float64(f()) }))
		}
	}
	add("egress_requests_total", "Requests through the egress proxy by decision: intercepted, tunnelled, forwarded (plain HTTP), refused.", "decision", c.Requests)
	add("egress_substitutions_total", "Credential values put into requests by the egress proxy (done), and placeholders it refused (refused).", "result", c.Substitutions)
}
