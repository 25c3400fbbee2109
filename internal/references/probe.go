package references

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/podpatch/podpatch/internal/promreg"
	"github.com/podpatch/podpatch/policies/versions"
)

// ProbeOptions configure Caches.ProbeFields.
type ProbeOptions struct {
	// Namespace is podpatch's own: the sample Pods are dry-run created there.
	Namespace string
	// Timeout bounds each dry-run request; 0: DefaultProbeTimeout.
	Timeout time.Duration
	// Log says what each run learned and, once per run, why a field could not be learned.
	Log logr.Logger
	// Registry, if set, takes the podpatch_kube_field_outcome gauge.
	Registry prometheus.Registerer
}

// DefaultProbeTimeout bounds each dry-run request of the probe: a run makes at most
// len(versions.Fields) of them, one after the other, on the version's goroutine.
const DefaultProbeTimeout = 5 * time.Second

// Sources of a field's outcome, the gauge's source label.
const (
	sourceProbe = "probe"
	sourceTable = "table"
)

// fieldProbe learns from the API server itself which of versions.Fields it keeps
// (reference §8 "What this cluster's version keeps"): for each field, a server-side dry-run
// (dryRun=All: admitted and validated, never stored) of the field's versions.Sample in
// podpatch's namespace; stored with the field is Kept, without it Dropped, refused as Invalid
// naming the field Refused. Any other answer (RBAC, Pod Security, a quota, a timeout, another
// webhook) says nothing of the field: the table answers for it. It runs off the request path,
// when discovery sees a new version, and asks again at the next versions what failed for a
// passing reason (serverVersion.follow, fieldProbe.follow).
type fieldProbe struct {
	pods      dynamic.ResourceInterface
	namespace string
	timeout   time.Duration
	log       logr.Logger
	// gauge is podpatch_kube_field_outcome; nil: none.
	gauge   *prometheus.GaugeVec
	learned atomic.Pointer[learnedFields]
}

// learnedFields are the outcomes the runs at one version learned.
type learnedFields struct {
	version  versions.Version
	outcomes map[fieldKey]versions.Outcome // a field not learned is absent
	// retry are the fields whose answer failed for a passing reason (a timeout, a throttle, the
	// API server unavailable); retried counts the runs that asked them again.
	retry   []versions.Field
	retried int
}

// maxRetries bounds how many times the fields that failed for a passing reason are asked
// again, one version tick (a minute) apart.
const maxRetries = 3

// fieldKey names a field of versions.Fields without allocating (FieldOutcome runs per admission).
type fieldKey struct{ kind, path string }

func keyOf(f versions.Field) fieldKey { return fieldKey{f.Kind, f.Path} }

func newFieldProbe(dyn dynamic.Interface, o ProbeOptions) (*fieldProbe, error) {
	if o.Namespace == "" {
		return nil, errors.New("field probe: no namespace to dry-run the sample Pods in")
	}
	p := &fieldProbe{pods: dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(o.Namespace),
		namespace: o.Namespace, timeout: o.Timeout, log: o.Log}
	if p.timeout <= 0 {
		p.timeout = DefaultProbeTimeout
	}
	if o.Registry != nil {
		reg := promreg.New(o.Registry)
		gauge, ok := reg.Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podpatch_kube_field_outcome",
			Help: "What the cluster's API server does with each field of policies/versions (1 per field): its outcome (kept, dropped, refused) and whether the probe learned it from the API server or the version's table answers.",
		}, []string{"field", "gate", "outcome", "source"})).(*prometheus.GaugeVec)
		if err := reg.Err(); err != nil || !ok {
			return nil, errors.Join(errors.New("field probe: podpatch_kube_field_outcome"), err)
		}
		p.gauge = gauge
	}
	return p, nil
}

// outcome is what the last run learned of f, if it ran at version v.
func (p *fieldProbe) outcome(f versions.Field, v versions.Version) (versions.Outcome, bool) {
	l := p.learned.Load()
	if l == nil || l.version != v {
		return versions.Kept, false
	}
	o, ok := l.outcomes[keyOf(f)]
	return o, ok
}

// podFields are the fields of versions.Fields the probe asks about: a Pod's (podpatch may
// create Pods, by dry-run, in its namespace; the Service fields are the table's).
var podFields = slices.DeleteFunc(slices.Clone(versions.Fields), func(f versions.Field) bool { return f.Kind != "Pod" })

// follow is serverVersion's call at each version discovery reports: a new version is asked
// about every field; at the same one, only the fields whose answer failed for a passing reason,
// at most maxRetries times.
func (p *fieldProbe) follow(ctx context.Context, v versions.Version, changed bool) {
	if changed {
		p.run(ctx, v, podFields, nil)
		return
	}
	if l := p.learned.Load(); l != nil && l.version == v && len(l.retry) > 0 && l.retried < maxRetries {
		p.run(ctx, v, l.retry, l)
	}
}

// run asks the API server, at version v, about fields (to add to what prev learned at v, if
// not nil): at most len(versions.Fields) requests, each within the timeout. Cancelled, it
// keeps what it had.
func (p *fieldProbe) run(ctx context.Context, v versions.Version, fields []versions.Field, prev *learnedFields) {
	start := time.Now()
	l := &learnedFields{version: v, outcomes: make(map[fieldKey]versions.Outcome, len(versions.Fields))}
	if prev != nil {
		for k, o := range prev.outcomes {
			l.outcomes[k] = o
		}
		l.retried = prev.retried + 1
	}
	var firstErr error
	var asked []versions.Field
	for _, f := range fields {
		o, err := p.ask(ctx, f)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if passing(err) {
				l.retry = append(l.retry, f)
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		l.outcomes[keyOf(f)] = o
		asked = append(asked, f)
	}
	p.learned.Store(l)
	switch {
	case prev == nil:
		p.report(l, asked, firstErr, time.Since(start))
	case len(asked) > 0: // a retry says what it learned; why the rest failed was said once
		p.report(l, asked, nil, time.Since(start))
	}
}

// passing reports whether an answer failed for a reason that may pass: the request timed out
// or never reached the API server, or the server was throttling, overloaded or failing.
func passing(err error) bool {
	var transport *url.Error
	return errors.As(err, &transport) || errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err)
}

// ask dry-run creates f's sample and reads what the API server did with the field; an error
// says why the answer says nothing of it.
func (p *fieldProbe) ask(ctx context.Context, f versions.Field) (versions.Outcome, error) {
	sample, ok := versions.Sample(f)
	if !ok {
		return versions.Kept, fmt.Errorf("no sample Pod sets %s %s", f.Kind, f.Path)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	stored, err := p.pods.Create(ctx, &unstructured.Unstructured{Object: sample}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return outcomeOf(f, stored, err)
}

// outcomeOf reads the answer to a dry-run create of f's sample.
func outcomeOf(f versions.Field, stored *unstructured.Unstructured, err error) (versions.Outcome, error) {
	switch {
	case err == nil && stored != nil:
		if f.Set(stored.Object) {
			return versions.Kept, nil
		}
		return versions.Dropped, nil
	case err == nil:
		return versions.Kept, errors.New("the API server returned no object")
	case apierrors.IsInvalid(err) && namesField(err, f.Path):
		return versions.Refused, nil
	case apierrors.IsInvalid(err):
		return versions.Kept, fmt.Errorf("refused for another field than %s: %w", f.Path, err)
	}
	return versions.Kept, err
}

// Bounds on reading the API server's answer: the causes of a refusal looked at, the length of a
// cause's field path, and of a reason kept for the log.
const (
	maxCauses     = 16
	maxCausePath  = 256
	maxReasonText = 512
)

// namesField reports whether an Invalid error names the field at path (members joined by dots,
// lists as "[]"): a cause at the field, under it, or at its parent (a one-of group such as
// env's valueFrom, refused as "must specify one of" when the field is not known there) — not
// at the object's top ("spec").
func namesField(err error, path string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	if details == nil {
		return false
	}
	parent := ""
	if i := strings.LastIndexByte(path, '.'); i >= 0 && strings.Contains(path[:i], ".") {
		parent = path[:i]
	}
	for i, c := range details.Causes {
		if i == maxCauses {
			break
		}
		if len(c.Field) > maxCausePath {
			continue
		}
		at := withoutIndexes(c.Field)
		if at == path || strings.HasPrefix(at, path+".") || strings.HasPrefix(at, path+"[") || (parent != "" && at == parent) {
			return true
		}
	}
	return false
}

// withoutIndexes writes a field path's list items ("containers[0]", "env[A]") as "[]".
func withoutIndexes(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	in := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[':
			in = true
			b.WriteString("[]")
		case c == ']':
			in = false
		case !in:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func clip(s string) string {
	if len(s) <= maxReasonText {
		return s
	}
	return s[:maxReasonText] + "…"
}

// report logs what the runs at a version learned, where the fields a run learned (asked) differ
// from the version's table, and why fields could not be learned (firstErr, if not nil); and
// sets the gauge.
func (p *fieldProbe) report(l *learnedFields, asked []versions.Field, firstErr error, took time.Duration) {
	var kept, dropped, refused, unknown []string
	if p.gauge != nil {
		p.gauge.Reset()
	}
	for _, f := range versions.Fields {
		table := f.At(l.version)
		o, known := l.outcomes[keyOf(f)]
		source := sourceProbe
		if !known {
			o, source = table, sourceTable
			unknown = append(unknown, f.Path)
		}
		if p.gauge != nil {
			p.gauge.WithLabelValues(f.Path, f.Gate, o.String(), source).Set(1)
		}
		if !known {
			continue
		}
		switch o {
		case versions.Kept:
			kept = append(kept, f.Path)
		case versions.Dropped:
			dropped = append(dropped, f.Path)
		case versions.Refused:
			refused = append(refused, f.Path)
		}
		if o != table && slices.ContainsFunc(asked, func(a versions.Field) bool { return keyOf(a) == keyOf(f) }) {
			p.log.Info("the cluster differs from its version's table: what it does is served", "kubernetesVersion", l.version.String(),
				"field", f.Path, "gate", f.Gate, "table", table.String(), "learned", o.String(), "says", difference(f, table, o))
		}
	}
	p.log.Info("learned from the API server which fields it keeps", "kubernetesVersion", l.version.String(), "namespace", p.namespace,
		"kept", kept, "dropped", dropped, "refused", refused, "fromTable", unknown, "ms", took.Milliseconds())
	if firstErr != nil {
		p.log.Error(errors.New(clip(firstErr.Error())), "could not learn what the API server does with some fields: its version's table answers for them (the probe needs create on pods in podpatch's namespace, and a namespace whose admission lets a restricted Pod in)",
			"fields", unknown, "namespace", p.namespace)
	}
}

// difference says, for a person, how the cluster differs from its version's table on f:
// "feature gate ContainerStopSignals is on here: spec.containers[].lifecycle.stopSignal kept".
func difference(f versions.Field, table, learned versions.Outcome) string {
	switch {
	case learned == versions.Kept:
		return fmt.Sprintf("feature gate %s is on here: %s kept", f.Gate, f.Path)
	case table == versions.Kept:
		return fmt.Sprintf("feature gate %s is off here: %s %s", f.Gate, f.Path, learned)
	}
	return fmt.Sprintf("feature gate %s is off here: %s %s (the table says %s)", f.Gate, f.Path, learned, table)
}
