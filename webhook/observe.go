package webhook

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/policies/profiles"
)

// latencyBuckets resolve the range that matters for an admission webhook: sub-millisecond
// patches up to the API server's timeout (2 s in the manifests) and a little beyond.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}

// observations are the metrics a dashboard and alerts need beyond the counters of metrics.go:
// latencies, the serving certificate's expiry, the memory limit and readiness (the policy
// generation each replica serves is the policy store's, policystore.Metrics). Labels stay
// bounded: webhook is mutate or validate, kind and manager are the fixed sets of metrics.go.
type observations struct {
	admission  *prometheus.HistogramVec
	apply      *prometheus.HistogramVec
	certExpiry prometheus.Gauge
	memLimit   prometheus.Gauge
	ready      prometheus.GaugeFunc
	readyCheck atomic.Pointer[func() bool]
}

// register creates the observations and registers them through reg, which returns the
// collector already registered under the same name, if any.
func (o *observations) register(reg func(prometheus.Collector) prometheus.Collector) {
	o.admission = reg(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "podpatch_admission_duration_seconds",
		Help:    "Time from reading an AdmissionReview to writing the response, by webhook (mutate, validate).",
		Buckets: latencyBuckets,
	}, []string{"webhook"})).(*prometheus.HistogramVec)
	o.apply = reg(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "podpatch_policy_apply_duration_seconds",
		Help:    "Time spent applying the policy layers to one object, by kind (Pod, Service) and recognised manager (empty: none).",
		Buckets: latencyBuckets,
	}, []string{"kind", "manager"})).(*prometheus.HistogramVec)
	o.certExpiry = reg(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podpatch_certificate_expiry_timestamp_seconds",
		Help: "Expiry (NotAfter, Unix seconds) of the serving certificate, set when it is loaded or reloaded.",
	})).(prometheus.Gauge)
	o.memLimit = reg(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podpatch_memory_limit_bytes",
		Help: "The container's memory limit as --memory-limit gives it (bytes; 0 when unset), to compare process_resident_memory_bytes with.",
	})).(prometheus.Gauge)
	o.ready = reg(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podpatch_ready",
		Help: "1 when this replica passes its readiness checks (policies synced, webhook server answering), else 0.",
	}, o.readyValue)).(prometheus.GaugeFunc)
}

// instrument measures every request a webhook handler serves.
func (m *Metrics) instrument(webhook string, h http.Handler) http.Handler {
	obs := m.obs.admission.WithLabelValues(webhook)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() { obs.Observe(time.Since(start).Seconds()) }()
		h.ServeHTTP(w, r)
	})
}

// observeApply records how long applying policies to one object took.
func (m *Metrics) observeApply(kind profiles.Kind, manager profiles.Manager, start time.Time) {
	k := string(kind)
	if kind != profiles.KindPod && kind != profiles.KindService {
		k = "other"
	}
	m.obs.apply.WithLabelValues(k, string(manager)).Observe(time.Since(start).Seconds())
}

// setCertificateExpiry records the serving certificate's expiry.
func (m *Metrics) setCertificateExpiry(notAfter time.Time) {
	m.obs.certExpiry.Set(float64(notAfter.Unix()))
}

// ReportMemoryLimit exports the container's memory limit (--memory-limit, bytes; 0 when unset), so
// that the resident memory can be compared with it (the PodpatchMemoryNearLimit alert).
func (m *Metrics) ReportMemoryLimit(limit int64) {
	m.obs.memLimit.Set(float64(max(limit, 0)))
}

// observeReadiness makes podpatch_ready report the outcome of the readiness checks.
func (m *Metrics) observeReadiness(checks ...healthz.Checker) {
	ready := func() bool {
		for _, c := range checks {
			if c(nil) != nil {
				return false
			}
		}
		return true
	}
	m.obs.readyCheck.Store(&ready)
}

func (o *observations) readyValue() float64 {
	if f := o.readyCheck.Load(); f != nil && (*f)() {
		return 1
	}
	return 0
}

// WatchCertificateExpiry exports the expiry of the serving certificate in certDir as a metric,
// until ctx is done.
func (m *Metrics) WatchCertificateExpiry(certDir string) func(context.Context) error {
	return certs.WatchExpiry(certDir, m.setCertificateExpiry)
}
