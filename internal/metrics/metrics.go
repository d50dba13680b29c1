// Package metrics is the mesh's Prometheus instrumentation: the counters and histograms the
// daemons add to as they work, and the HTTP handler that serves them, with what a scrape reads
// from the mesh at that moment, as Prometheus text at /metrics.
//
// The counters are process-wide, as a process runs one mesh; their names and labels are a stable
// interface (docs/metrics.md). Every label takes its values from a bounded set: no label carries
// a caller's free text.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcome label values.
const (
	OK     = "ok"
	Failed = "failed"
)

var (
	// EndpointCalls counts the endpoint requests this process handled (calls and casts), by
	// endpoint, command (a declared command's name, or "-" for one refused before it was
	// admitted) and outcome ("ok", or the error code).
	EndpointCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cotal_endpoint_calls_total",
		Help: "Endpoint requests handled, by endpoint, command and outcome (ok or the error code).",
	}, []string{"endpoint", "command", "outcome"})

	// WardenRepairs counts the bucket rows the warden put back or deleted, by bucket and cause.
	WardenRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cotal_warden_repairs_total",
		Help: "Bucket rows the warden repaired, by bucket and cause.",
	}, []string{"bucket", "cause"})

	// WardenQuarantines counts the stored messages the warden deleted, by stream and cause.
	WardenQuarantines = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cotal_warden_quarantines_total",
		Help: "Stored messages the warden quarantined, by stream and cause.",
	}, []string{"stream", "cause"})

	// Renewals counts the renewals of the daemons' credentials, by profile and result.
	Renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cotal_credential_renewals_total",
		Help: "Renewals of the daemons' credentials, by profile and result (ok or failed).",
	}, []string{"profile", "result"})

	// ManagerSpawns counts the manager's spawns, by result.
	ManagerSpawns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cotal_manager_spawns_total",
		Help: "Agents the manager spawned, by result (ok or failed).",
	}, []string{"result"})

	// ManagerRestarts counts the agents the manager started again after they exited.
	ManagerRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cotal_manager_restarts_total",
		Help: "Agents the manager restarted after they exited.",
	})

	// Handoff observes the delivery daemon's hand-off latency: from a post's store on its
	// channel to its copy's store in a member's inbox.
	Handoff = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cotal_delivery_handoff_seconds",
		Help:    "Time from a durable channel post's store to its copy's store in a member's inbox.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})

	// RunSteps counts the workflow run steps this process journaled settled, by the step's kind
	// and status (Cotal Lang's journal vocabulary).
	RunSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cotal_run_steps_total",
		Help: "Workflow run steps settled, by kind and status.",
	}, []string{"kind", "status"})
)

// Result is the result label of an operation that returned err.
func Result(err error) string {
	if err != nil {
		return Failed
	}
	return OK
}

// Handler serves, at every path it is mounted on, the process's counters, the Go runtime's and
// the process's own metrics, and what each of scraped reads at the scrape.
func Handler(scraped ...prometheus.Collector) http.Handler {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		EndpointCalls, WardenRepairs, WardenQuarantines, Renewals, ManagerSpawns, ManagerRestarts, Handoff, RunSteps,
	)
	reg.MustRegister(scraped...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
