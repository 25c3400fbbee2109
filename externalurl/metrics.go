package externalurl

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podpatch/podpatch/internal/promreg"
)

// Outcomes counted besides the sources, as the source label of podpatch_external_url_resolutions_total.
const (
	outcomePending    = "pending"
	outcomeUnresolved = "unresolved"
	outcomeInvalid    = "invalid"
	outcomeRefused    = "refused"
)

// Metrics are the resolver's Prometheus metrics; labels are bounded (managers and sources).
type Metrics struct {
	resolutions *prometheus.CounterVec
	writes      *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		resolutions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_external_url_resolutions_total",
			Help: "Changes of a Service's external URL, by recognised manager (none: unrecognised) and source (template, load-balancer, node-port; pending, unresolved, invalid, refused when there is no URL).",
		}, []string{"manager", "source"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_external_url_writes_total",
			Help: "Patches of result annotations on Services, by result (ok, conflict, error).",
		}, []string{"result"}),
	}
	r := promreg.New(reg)
	m.resolutions = r.Register(m.resolutions).(*prometheus.CounterVec)
	m.writes = r.Register(m.writes).(*prometheus.CounterVec)
	return m, r.Err()
}
