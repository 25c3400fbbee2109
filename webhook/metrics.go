package webhook

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podpatch/podpatch/internal/promreg"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/webhook/slots"
)

// Metrics are the admission adapter's Prometheus metrics (the policy store's are
// policystore.Metrics, the owner Events' ownerevents'). Every label is bounded: managers,
// roles, kinds, results and reasons are small fixed sets; no object or policy names.
type Metrics struct {
	admissions  *prometheus.CounterVec
	warnings    *prometheus.CounterVec
	validations *prometheus.CounterVec
	exceeded    *prometheus.CounterVec
	inFlight    prometheus.Gauge
	bodyBytes   *prometheus.GaugeVec
	panics      *prometheus.CounterVec
	skipped     *prometheus.CounterVec
	denials     *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	findings    *prometheus.CounterVec
	obs         observations // observe.go
}

// NewMetrics creates the metrics and registers them with reg (controller-runtime's registry
// in the server, so they sit next to its webhook latency histograms).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_admission_requests_total",
			Help: "Mutating admission requests by kind, recognised manager and role, and result (patched, unchanged, unrecognised, ignored, error, budget_exceeded, denied).",
		}, []string{"kind", "manager", "role", "result"}),
		warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_admission_warnings_total",
			Help: "Admission warnings returned, by reason (invalid_policy: a policy ConfigMap failed to compile and its last good version, if any, was used; apply_error: the object could not be patched (a bound of the engine); budget_exceeded: the request budget ran out; overloaded: every request slot stayed busy for the whole budget; too_large: the review or one of its objects was larger than podpatch handles; malformed_review: a review with a uid did not decode; internal_error: the handler panicked — each of these five answered with the fallback: denied when a platform enforce policy could bind the object, else allowed unchanged (a policy ConfigMap unvalidated); namespace_policies_left_out: namespace policies made the object unpatchable and the platform's were applied alone; selection_diverges: the platform's selectors contradict each other and only its enforce policies applied; namespace_limit: policy ConfigMaps past the namespace's limit were left out; namespace_mismatch: the object's metadata.namespace is not the request's namespace and it was allowed unchanged; policy_skipped: policies were left out because they would have made the object invalid; field_without_effect: a policy sets a field the cluster's Kubernetes version drops; check_finding: a manager-aware check found a problem).",
		}, []string{"reason"}),
		validations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_policy_validations_total",
			Help: "Policy ConfigMap validation requests by result (allowed, denied).",
		}, []string{"result"}),
		exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_budget_exceeded_total",
			Help: "Requests answered without being handled because the request budget ran out or the request was cancelled, by webhook (mutate, validate) and stage (wait: no room for the body or no free slot, the server is overloaded; read: the body did not arrive within its read deadline; handle: the policies took too long).",
		}, []string{"webhook", "stage"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_policy_skipped_total",
			Help: "Policies left out of an object because their contribution would have made it invalid (reference §8), by the rule it would have broken (request-above-limit, priority-class-not-found, …; see docs/metrics.md).",
		}, []string{"reason"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_enforce_denials_total",
			Help: "Objects denied because a platform enforce policy that matches them cannot be applied (reference §5), one per enforce policy and object, by why: the rule its result would break (as podpatch_policy_skipped_total), budget (the request budget ran out, or podpatch was overloaded), work (the object is beyond what podpatch patches: a bound of the engine, the review's size, a review that does not decode), internal-error (podpatch panicked on it), selection-diverges.",
		}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_fields_without_effect_total",
			Help: "Fields applied policies set that the cluster's Kubernetes version drops (its feature gate is off; reference §8, policies/versions), one per field and object, by gate.",
		}, []string{"gate"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_check_findings_total",
			Help: "Manager-aware check findings on admitted objects (reference §8), by check id (" + admissionChecks() + "; see docs/checks.md).",
		}, []string{"check"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "podpatch_requests_in_flight",
			Help: "Admission requests holding one of the --max-in-flight slots (their bodies read, being handled).",
		}),
		bodyBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podpatch_request_body_bytes_reserved",
			Help: "Bytes of room reserved for request bodies being read or handled, by pool (ordinary: bodies up to 64 KiB; large: the rest, sized from --memory-limit).",
		}, []string{"pool"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_panics_total",
			Help: "Admission handler (or fallback) panics recovered and answered with the fallback, by webhook (mutate, validate): a bug to report.",
		}, []string{"webhook"}),
	}
	r := promreg.New(reg)
	m.admissions = r.Register(m.admissions).(*prometheus.CounterVec)
	m.warnings = r.Register(m.warnings).(*prometheus.CounterVec)
	m.validations = r.Register(m.validations).(*prometheus.CounterVec)
	m.exceeded = r.Register(m.exceeded).(*prometheus.CounterVec)
	m.inFlight = r.Register(m.inFlight).(prometheus.Gauge)
	m.bodyBytes = r.Register(m.bodyBytes).(*prometheus.GaugeVec)
	m.panics = r.Register(m.panics).(*prometheus.CounterVec)
	m.skipped = r.Register(m.skipped).(*prometheus.CounterVec)
	m.denials = r.Register(m.denials).(*prometheus.CounterVec)
	m.dropped = r.Register(m.dropped).(*prometheus.CounterVec)
	m.findings = r.Register(m.findings).(*prometheus.CounterVec)
	m.obs.register(r.Register)
	return m, r.Err()
}

// budgetExceeded counts a request answered without being handled; m may be nil.
func (m *Metrics) budgetExceeded(webhook, stage string) {
	if m != nil {
		m.exceeded.WithLabelValues(webhook, stage).Inc()
	}
}

// panicked counts a recovered handler panic; m may be nil.
func (m *Metrics) panicked(webhook string) {
	if m != nil {
		m.panics.WithLabelValues(webhook).Inc()
	}
}

// warned counts an admission warning; m may be nil.
func (m *Metrics) warned(reason Reason) {
	if m != nil {
		m.warnings.WithLabelValues(string(reason)).Inc()
	}
}

// admissionChecks are the ids of the checks that run at admission, for the metric's help: every
// one but the placement's, which needs the cluster's Nodes.
func admissionChecks() string {
	return strings.Join(slices.DeleteFunc(slices.Clone(checks.IDs), func(id string) bool { return id == checks.Unschedulable }), ", ")
}

// reserved counts room reserved (sign 1) or given back (-1); m may be nil.
func (m *Metrics) reserved(r slots.Reservation, sign int64) {
	if m != nil {
		m.bodyBytes.WithLabelValues(r.Pool).Add(float64(sign * r.Bytes))
	}
}

// policySkipped counts a policy left out by the rule it would break or the reason it was left
// out for; m may be nil. The rule is one of validity.Rules or validity.Reasons, fixed sets.
func (m *Metrics) policySkipped(rule string) {
	if m == nil {
		return
	}
	if !validity.LeftOutFor(rule) {
		rule = "other"
	}
	m.skipped.WithLabelValues(rule).Inc()
}

// enforceDenied counts an enforce policy that denied an object, by why; m may be nil. The rule
// is one of validity.Rules, validity.Reasons or validity.UpdateReasons, fixed sets, or
// ruleInternalError.
func (m *Metrics) enforceDenied(rule string) {
	if m == nil {
		return
	}
	if !validity.LeftOutFor(rule) && !slices.Contains(validity.UpdateReasons, rule) && rule != ruleInternalError {
		rule = "other"
	}
	m.denials.WithLabelValues(rule).Inc()
}

// fieldDropped counts a field the cluster drops, by its gate; m may be nil. The gate is one of
// versions.Fields', a fixed set.
func (m *Metrics) fieldDropped(gate string) {
	if m == nil {
		return
	}
	if !slices.ContainsFunc(versions.Fields, func(f versions.Field) bool { return f.Gate == gate }) {
		gate = "other"
	}
	m.dropped.WithLabelValues(gate).Inc()
}

// checkFinding counts a manager-aware check's finding; m may be nil. The check is one of
// checks.IDs, a fixed set.
func (m *Metrics) checkFinding(check string) {
	if m == nil {
		return
	}
	if !slices.Contains(checks.IDs, check) {
		check = "other"
	}
	m.findings.WithLabelValues(check).Inc()
}
