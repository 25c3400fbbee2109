package audit

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	openreports "github.com/openreports/reports-api/pkg/client/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/promreg"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
)

// PeriodicOptions configure the audit of `podpatch serve`.
type PeriodicOptions struct {
	// Kit is the cluster's clients, Event recorder and owner resolver.
	Kit *kube.Kit
	// Interval is the time between the starts of two rounds.
	Interval time.Duration
	// Policies returns the policies the webhook serves now: the informer-fed store's, so the
	// audit compares objects with exactly what admission applies, last good versions included.
	Policies func() *policies.Set
	// NamespaceLabels returns a namespace's labels (the store's namespace informer).
	NamespaceLabels func(string) map[string]string
	// Lookups answers what objects reference: the webhook's own caches, so that the audit
	// leaves out what admission leaves out (reference §8); nil: unknown.
	Lookups validity.Lookups
	// Ready says that the policies are synced: no round runs before.
	Ready func() bool
	// Registry gets the metrics.
	Registry prometheus.Registerer
	Log      logr.Logger
}

// Periodic is the leader-elected audit of `podpatch serve`: every Interval, the elected
// replica (internal/leader) audits every recognised Pod and Service and writes the results as
// OpenReports Reports (when the CRDs are installed), the podpatch_drift_objects metric, and
// Events on the custom resources that own drifting objects.
//
// Pods and Services are read with paged List calls, one page (500) at a time, and not from an
// informer: the audit needs each object once per round, while an informer would hold every
// recognised Pod of the cluster in the webhook's memory (10,000 Pods are 50-100 MiB against a
// 256 Mi limit) and follow every status update of every Pod between rounds. Policies and
// namespace labels do come from the webhook's informer cache.
type Periodic struct {
	o       PeriodicOptions
	reader  *Reader
	reports *reportWriter
	metrics *metrics
}

// metrics are the audit's Prometheus metrics.
type metrics struct {
	drift    *prometheus.GaugeVec
	rounds   *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration prometheus.Gauge
}

// The stages of podpatch_audit_errors_total.
const (
	// stageRead: listing the cluster's objects failed; the round stops.
	stageRead = "read"
	// stageObject: an object could not be checked; the round goes on.
	stageObject = "object"
	// stageReport: a namespace's Report could not be written or deleted; the round goes on.
	stageReport = "report"
)

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "podpatch_drift_objects",
			Help: "Recognised Pods and Services whose live object differs from what the current policies produce, at the last audit round (leader only)."},
			[]string{"manager", "role", "reason"}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "podpatch_audit_rounds_total",
			Help: "Audit rounds run, by result (ok, error)."}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "podpatch_audit_errors_total",
			Help: "Audit errors, by stage (read: listing objects failed and the round stopped; object: an object was not checked; report: a namespace's Report was not written, the other namespaces' were)."},
			[]string{"stage"}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{Name: "podpatch_audit_round_seconds",
			Help: "How long the last audit round took."}),
	}
	reg := promreg.New(r)
	m.drift = reg.Register(m.drift).(*prometheus.GaugeVec)
	m.rounds = reg.Register(m.rounds).(*prometheus.CounterVec)
	m.errors = reg.Register(m.errors).(*prometheus.CounterVec)
	m.duration = reg.Register(m.duration).(prometheus.Gauge)
	return m, reg.Err()
}

// NewPeriodic builds the periodic audit; Start runs it.
func NewPeriodic(o PeriodicOptions) (*Periodic, error) {
	if o.Interval <= 0 {
		return nil, errors.New("audit interval must be positive")
	}
	reader, err := NewReader(o.Kit)
	if err != nil {
		return nil, err
	}
	orc, err := openreports.NewForConfig(o.Kit.Config)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	p := &Periodic{o: o, reader: reader, metrics: m,
		reports: &reportWriter{client: orc, log: o.Log, now: time.Now}}
	p.reports.failed = p.reportFailed
	return p, nil
}

// reportFailed logs and counts a namespace whose Report was not written.
func (p *Periodic) reportFailed(namespace string, err error) {
	p.o.Log.Error(err, "Report not written; the other namespaces' are", "namespace", namespace)
	p.metrics.errors.WithLabelValues(stageReport).Inc()
}

// Start is one leadership term: it audits every Interval, once the policies are synced,
// until ctx is done. Each term starts afresh: Events are said again, and a follower keeps no
// drift gauges, which would double the leader's.
func (p *Periodic) Start(ctx context.Context) error {
	events := newOwnerEvents(p.o.Kit.Recorder("podpatch-audit"))
	defer p.metrics.drift.Reset()
	p.o.Log.Info("auditing", "interval", p.o.Interval)
	for !p.o.Ready() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	t := time.NewTicker(p.o.Interval)
	defer t.Stop()
	for {
		p.round(ctx, events)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// round audits the cluster once and writes what it found; events are this term's.
func (p *Periodic) round(ctx context.Context, events *ownerEvents) {
	start := time.Now()
	byNS := map[string][]Record{}
	var all []Record
	errs := 0
	a := &Audit{Reader: p.reader, Set: p.o.Policies(), NamespaceLabels: p.o.NamespaceLabels, Lookups: p.o.Lookups, Owners: p.reader.Owners(),
		OnRecord: func(f Record) {
			all = append(all, f)
			byNS[f.Namespace] = append(byNS[f.Namespace], f)
		},
		OnError: func(err error) {
			p.metrics.errors.WithLabelValues(stageObject).Inc()
			if errs++; errs <= 10 {
				p.o.Log.Info("object not audited", "error", err.Error())
			}
		},
	}
	st, err := a.Run(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			p.o.Log.Error(err, "audit round failed")
			p.metrics.rounds.WithLabelValues("error").Inc()
			p.metrics.errors.WithLabelValues(stageRead).Inc()
		}
		return
	}
	p.metrics.drift.Reset()
	for _, f := range all {
		if f.Drift {
			p.metrics.drift.WithLabelValues(string(f.Cluster.Manager), string(f.Cluster.Role), string(f.Reason)).Inc()
		}
	}
	events.update(all)
	w, err := p.reports.sync(ctx, byNS)
	if err != nil {
		if ctx.Err() == nil {
			p.o.Log.Error(err, "writing Reports failed")
			p.metrics.rounds.WithLabelValues("error").Inc()
			p.metrics.errors.WithLabelValues(stageReport).Inc()
		}
		return
	}
	p.metrics.rounds.WithLabelValues("ok").Inc()
	p.metrics.duration.Set(time.Since(start).Seconds())
	p.o.Log.Info("audit round done", "pods", st.Pods, "services", st.Services, "checked", st.Checked, "drifted", st.Drifted,
		"errors", st.Errors, "reportsCreated", w.created, "reportsUpdated", w.updated, "reportsDeleted", w.deleted,
		"reportsUnchanged", w.unchanged, "reportsFailed", w.failed, "duration", time.Since(start).Round(time.Millisecond).String())
}
