package policystore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podpatch/podpatch/internal/promreg"
)

// Metrics are the policy store's Prometheus metrics: the policies it serves and their
// generation, and how the compiles of policy ConfigMaps went. Labels are bounded: scopes and
// results are fixed sets, and hash has one value per replica at a time.
type Metrics struct {
	policies   *prometheus.GaugeVec
	invalid    prometheus.Gauge
	reloads    *prometheus.CounterVec
	generation *prometheus.GaugeVec
	// reg is where the cluster feed registers its PolicySource's metrics.
	reg prometheus.Registerer
}

// NewMetrics creates the store's metrics and registers them with reg (controller-runtime's
// registry in the server, next to the admission adapter's).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.New(reg)
	m := &Metrics{reg: reg}
	m.policies = r.Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "podpatch_policies",
		Help: "Compiled policies being served, by scope (platform, namespace).",
	}, []string{"scope"})).(*prometheus.GaugeVec)
	m.invalid = r.Register(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podpatch_policy_configmaps_invalid",
		Help: "Policy ConfigMaps whose current version fails to compile (their last good version, if any, is served).",
	})).(prometheus.Gauge)
	m.reloads = r.Register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podpatch_policy_reloads_total",
		Help: "Policy ConfigMap compilations by result (ok, invalid, deleted).",
	}, []string{"result"})).(*prometheus.CounterVec)
	m.generation = r.Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "podpatch_policy_generation_info",
		Help: "Always 1, labelled with the generation (a content hash, policies.Set.Generation) of the policies this replica serves; replicas with different hashes serve different policies.",
	}, []string{"hash"})).(*prometheus.GaugeVec)
	return m, r.Err()
}

// setGeneration publishes the generation of the policies being served; the previous one is
// removed, so a replica exports one series.
func (m *Metrics) setGeneration(generation string) {
	m.generation.Reset()
	m.generation.WithLabelValues(generation).Set(1)
}
