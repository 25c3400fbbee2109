package references

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/podpatch/podpatch/policies/versions"
)

// answer is what the fake API server does with a sample Pod: return what it stores, or refuse.
type answer func(pod *unstructured.Unstructured) (*unstructured.Unstructured, error)

func keep(pod *unstructured.Unstructured) (*unstructured.Unstructured, error) { return pod, nil }

// drop stores a Pod without the sample's fields.
func drop(pod *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := pod.DeepCopy()
	out.Object["spec"] = map[string]any{"containers": []any{map[string]any{"name": "probe", "image": "registry.k8s.io/pause:3.10"}}}
	return out, nil
}

func invalidAt(path *field.Path, detail string) answer {
	return func(*unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "podpatch-probe-x", field.ErrorList{field.Invalid(path, "", detail)})
	}
}

func failWith(err error) answer {
	return func(*unstructured.Unstructured) (*unstructured.Unstructured, error) { return nil, err }
}

var (
	valueFrom  = field.NewPath("spec", "containers").Index(0).Child("env").Index(0).Child("valueFrom")
	rbacDenied = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
		fmt.Errorf("%s cannot create resource %q in API group %q in the namespace %q", `User "system:serviceaccount:podpatch-system:podpatch"`, "pods", "", "podpatch-system"))
	podSecurity = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "podpatch-probe-x",
		errors.New(`violates PodSecurity "restricted:latest": seccompProfile`))
	quota   = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "podpatch-probe-x", errors.New("exceeded quota: pods"))
	webhook = apierrors.NewBadRequest(`admission webhook "deny.example.com" denied the request: no`)
)

// fakeServer is an API server answering each sample by the field it sets, and recording the
// requests.
type fakeServer struct {
	mu       sync.Mutex
	answers  map[string]answer // by field path; absent: keep
	requests []*clienttesting.CreateActionImpl
}

func (s *fakeServer) client(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	dyn.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		create := a.(clienttesting.CreateActionImpl)
		s.mu.Lock()
		s.requests = append(s.requests, &create)
		s.mu.Unlock()
		pod := create.GetObject().(*unstructured.Unstructured)
		for _, f := range versions.Fields {
			if _, set := versions.Find(pod.Object, f.Path); set {
				if ans, ok := s.answers[f.Path]; ok {
					out, err := ans(pod)
					return true, out, err
				}
			}
		}
		return true, pod, nil
	})
	return dyn
}

func (s *fakeServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// logLines collects a logger's lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logLines) matching(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// probedCaches are caches on a fake discovery at gitVersion and a fake API server, with the
// probe set up (not run).
func probedCaches(t *testing.T, gitVersion string, s *fakeServer, reg prometheus.Registerer, timeout time.Duration) (*Caches, *fakediscovery.FakeDiscovery, *logLines) {
	t.Helper()
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	setVersion(disc, gitVersion, "")
	logs := &logLines{}
	r := &Caches{version: &serverVersion{discovery: disc}, dynamic: s.client(t)}
	require.NoError(t, r.ProbeFields(ProbeOptions{Namespace: "podpatch-system", Log: logs.logger(), Registry: reg, Timeout: timeout}))
	return r, disc, logs
}

func setVersion(disc *fakediscovery.FakeDiscovery, gitVersion, emulationMinor string) {
	v, err := versions.Parse(gitVersion)
	if err != nil {
		panic(err)
	}
	disc.FakedServerVersion = &version.Info{Major: "1", Minor: strings.TrimPrefix(v.String(), "1."), GitVersion: gitVersion,
		EmulationMajor: map[bool]string{true: "1"}[emulationMinor != ""], EmulationMinor: emulationMinor}
}

func field0(t *testing.T, path string) versions.Field {
	t.Helper()
	for _, f := range versions.Fields {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("no field %s in versions.Fields", path)
	return versions.Field{}
}

const (
	stopSignal   = "spec.containers[].lifecycle.stopSignal"
	restartRules = "spec.containers[].restartPolicyRules"
	fileKeyRef   = "spec.containers[].env[].valueFrom.fileKeyRef"
	hostname     = "spec.hostnameOverride"
	imageVolume  = "spec.volumes[].image"
)

// TestProbeLearnsEachOutcome: on a 1.37 cluster whose gates differ from the defaults
// (ContainerStopSignals on, ContainerRestartRules off, EnvFiles refused as 1.34 refuses it), the
// probe learns kept, dropped and refused, the engine's lookups answer with them before the
// table, the log says where the cluster differs, and the gauge shows each field's source.
func TestProbeLearnsEachOutcome(t *testing.T) {
	s := &fakeServer{answers: map[string]answer{
		restartRules: drop,
		fileKeyRef:   invalidAt(valueFrom, "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"),
	}}
	reg := prometheus.NewRegistry()
	r, _, logs := probedCaches(t, "v1.37.2", s, reg, 0)
	for _, f := range versions.Fields {
		_, known := r.FieldOutcome(f)
		require.False(t, known, "nothing learned before the probe ran")
	}
	r.version.ask(context.Background(), "")
	require.Equal(t, len(podFields), s.count(), "one request per field")
	for _, req := range s.requests {
		require.Equal(t, []string{metav1.DryRunAll}, req.GetCreateOptions().DryRun, "nothing is stored")
		require.Equal(t, "podpatch-system", req.GetNamespace())
		pod := req.GetObject().(*unstructured.Unstructured)
		require.Equal(t, versions.ProbePrefix, pod.GetGenerateName())
		require.Empty(t, pod.GetLabels(), "no manager's labels: no podpatch webhook entry selects it")
	}
	want := map[string]versions.Outcome{hostname: versions.Kept, imageVolume: versions.Kept, restartRules: versions.Dropped,
		stopSignal: versions.Kept, fileKeyRef: versions.Refused}
	for path, o := range want {
		got, known := r.FieldOutcome(field0(t, path))
		require.True(t, known, path)
		require.Equal(t, o.String(), got.String(), path)
	}

	v, _ := r.KubeVersion()
	require.Equal(t, 37, v.Minor)
	patch := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "@main",
		"lifecycle": map[string]any{"stopSignal": "SIGUSR1"}, "restartPolicy": "Never",
		"restartPolicyRules": []any{map[string]any{"action": "Restart"}}}}}}
	require.Len(t, versions.Affected("Pod", patch, v), 1, "the table: stopSignal dropped on 1.37, restart rules kept")
	got := versions.AffectedOn("Pod", patch, r, v)
	require.Len(t, got, 1, "learned: stopSignal kept here, restart rules dropped")
	require.Equal(t, restartRules, got[0].Field.Path)
	require.Equal(t, versions.Dropped, got[0].Outcome)

	require.Equal(t, 1, logs.matching("feature gate ContainerStopSignals is on here: spec.containers[].lifecycle.stopSignal kept"))
	require.Equal(t, 1, logs.matching("feature gate ContainerRestartRules is off here: spec.containers[].restartPolicyRules dropped"))
	require.Equal(t, 1, logs.matching("feature gate EnvFiles is off here: spec.containers[].env[].valueFrom.fileKeyRef refused"))
	differ := 0 // the fake keeps every field it is not told to drop or refuse: the table's alpha fields differ too
	for _, f := range podFields {
		if o, _ := r.FieldOutcome(f); o != f.At(v) {
			differ++
		}
	}
	require.GreaterOrEqual(t, differ, 3)
	require.Equal(t, differ, logs.matching("the cluster differs from its version's table"), "hostnameOverride and the image volume are as the table says")
	require.Equal(t, 1, logs.matching("learned from the API server which fields it keeps"))
	require.Zero(t, logs.matching(`"error"`))

	require.Equal(t, len(versions.Fields), testutil.CollectAndCount(reg, "podpatch_kube_field_outcome"), "every field: the Service's from the table")
	gauge := func(path, gate, outcome, source string) float64 {
		g, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range g {
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["field"] == path && l["gate"] == gate && l["outcome"] == outcome && l["source"] == source {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	require.Equal(t, 1.0, gauge(stopSignal, "ContainerStopSignals", "kept", "probe"))
	require.Equal(t, 1.0, gauge(fileKeyRef, "EnvFiles", "refused", "probe"))
}

// TestProbeFailuresLeaveTheTable: whatever keeps the probe from an answer about a field —
// no RBAC, Pod Security, a quota, another webhook, a refusal for another field, a request
// that does not answer in time — the field is unknown and the table answers; the run says
// why once, and makes at most one request per field.
func TestProbeFailuresLeaveTheTable(t *testing.T) {
	for name, tc := range map[string]struct {
		answer  answer
		timeout bool
	}{
		"no RBAC":           {answer: failWith(rbacDenied)},
		"Pod Security":      {answer: failWith(podSecurity)},
		"quota":             {answer: failWith(quota)},
		"another webhook":   {answer: failWith(webhook)},
		"another field":     {answer: invalidAt(field.NewPath("spec", "containers").Index(0).Child("image"), "bad")},
		"the object's top":  {answer: invalidAt(field.NewPath("spec"), "bad")},
		"no answer in time": {timeout: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := &fakeServer{answers: map[string]answer{}}
			for _, f := range versions.Fields {
				s.answers[f.Path] = tc.answer
			}
			r, _, logs := probedCaches(t, "v1.37.2", s, nil, 20*time.Millisecond)
			if tc.timeout {
				r.probe.pods = hanging{r.probe.pods}
			}
			start := time.Now()
			r.version.ask(context.Background(), "")
			if tc.timeout {
				require.Less(t, time.Since(start), time.Duration(len(podFields))*time.Second, "each request is bounded")
			} else {
				require.Equal(t, len(podFields), s.count())
			}
			for _, f := range versions.Fields {
				_, known := r.FieldOutcome(f)
				require.False(t, known, f.Path)
				require.Equal(t, f.At(versions.Version{Minor: 37}), versions.OutcomeOf(r, f, versions.Version{Minor: 37}), "the table answers for %s", f.Path)
			}
			require.Equal(t, 1, logs.matching(`"error"`), "said once: %v", logs.lines)
			require.Equal(t, 1, logs.matching("its version's table answers for them"))
			require.Zero(t, logs.matching("the cluster differs"))
		})
	}
}

// hanging is a Pod client whose create answers only when its context ends.
type hanging struct{ dynamic.ResourceInterface }

func (hanging) Create(ctx context.Context, _ *unstructured.Unstructured, _ metav1.CreateOptions, _ ...string) (*unstructured.Unstructured, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestProbeFollowsTheVersion: the probe runs when discovery first answers and again only when
// the version changes (a patch release, an emulated version), never for a version podpatch
// does not support; what it learned at one version is not used at another.
func TestProbeFollowsTheVersion(t *testing.T) {
	s := &fakeServer{answers: map[string]answer{stopSignal: keep}}
	r, disc, _ := probedCaches(t, "v1.37.1", s, nil, 0)
	ctx := context.Background()
	seen := r.version.ask(ctx, "")
	n := len(podFields)
	require.Equal(t, n, s.count())
	seen = r.version.ask(ctx, seen)
	require.Equal(t, n, s.count(), "the same version: no new run")
	o, known := r.FieldOutcome(field0(t, stopSignal))
	require.True(t, known)
	require.Equal(t, versions.Kept, o)

	// The control plane emulates 1.36 now: until the probe learned that, the table answers.
	setVersion(disc, "v1.37.1", "36")
	v36 := versions.Version{Minor: 36}
	r.version.known.Store(&v36)
	_, known = r.FieldOutcome(field0(t, stopSignal))
	require.False(t, known, "learned at 1.37, not used at 1.36")
	seen = r.version.ask(ctx, seen)
	require.Equal(t, 2*n, s.count(), "a new version: a new run")
	_, known = r.FieldOutcome(field0(t, stopSignal))
	require.True(t, known)

	setVersion(disc, "v1.37.2", "36")
	seen = r.version.ask(ctx, seen)
	require.Equal(t, 3*n, s.count(), "a patch release of the binary: a new run")

	setVersion(disc, "v1.39.0", "")
	r.version.ask(ctx, seen)
	require.Equal(t, 4*n, s.count(), "a version podpatch does not support is asked too: the probe is all it knows of it")
	o, known = r.FieldOutcome(field0(t, stopSignal))
	require.True(t, known)
	require.Equal(t, versions.Kept, o)
	v39 := versions.Version{Minor: 39}
	td := versions.Fields[slices.IndexFunc(versions.Fields, func(f versions.Field) bool { return f.Kind == "Service" })]
	require.Equal(t, versions.Refused, versions.OutcomeOf(r, td, versions.Version{Minor: 33}), "not learned (a Service field): the table")
	require.Equal(t, versions.Kept, versions.OutcomeOf(r, td, v39), "no table for 1.39: what was not learned is not checked")
}

// TestProbeRetriesPassingFailures: a field whose answer failed for a passing reason (the API
// server throttling, a request that timed out) is asked again at the next version tick, and
// only it, at most maxRetries times; one refused for a lasting reason (RBAC) is not. Why it
// failed is logged once; what a retry learns is logged.
func TestProbeRetriesPassingFailures(t *testing.T) {
	throttled := 2 // the first two answers about stopSignal
	s := &fakeServer{answers: map[string]answer{
		stopSignal: func(pod *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if throttled > 0 {
				throttled--
				return nil, apierrors.NewTooManyRequests("slow down", 1)
			}
			return pod, nil
		},
		hostname: failWith(rbacDenied),
	}}
	r, _, logs := probedCaches(t, "v1.37.2", s, nil, 0)
	ctx := context.Background()
	n := len(podFields)
	seen := r.version.ask(ctx, "")
	require.Equal(t, n, s.count())
	_, known := r.FieldOutcome(field0(t, stopSignal))
	require.False(t, known)
	seen = r.version.ask(ctx, seen)
	require.Equal(t, n+1, s.count(), "only the throttled field again, not the one RBAC refused")
	_, known = r.FieldOutcome(field0(t, stopSignal))
	require.False(t, known, "throttled again")
	seen = r.version.ask(ctx, seen)
	require.Equal(t, n+2, s.count())
	o, known := r.FieldOutcome(field0(t, stopSignal))
	require.True(t, known, "learned on the second retry")
	require.Equal(t, versions.Kept, o)
	_, known = r.FieldOutcome(field0(t, imageVolume))
	require.True(t, known, "what the first run learned is kept")
	_, known = r.FieldOutcome(field0(t, hostname))
	require.False(t, known)
	r.version.ask(ctx, seen)
	require.Equal(t, n+2, s.count(), "nothing left to retry")
	require.Equal(t, 1, logs.matching(`"error"`), "why, once: %v", logs.lines)
	require.Equal(t, 1, logs.matching("feature gate ContainerStopSignals is on here"), "the retry says what it learned")
	require.Equal(t, 2, logs.matching("learned from the API server which fields it keeps"))

	// Never answering: asked again at most maxRetries times.
	s = &fakeServer{answers: map[string]answer{}}
	r, _, _ = probedCaches(t, "v1.37.2", s, nil, 10*time.Millisecond)
	r.probe.pods = hanging{r.probe.pods}
	seen = ""
	for range maxRetries + 3 {
		seen = r.version.ask(ctx, seen)
	}
	l := r.probe.learned.Load()
	require.Equal(t, maxRetries, l.retried)
	require.Len(t, l.retry, n)
}

// TestNamesField: a refusal counts as the field's only where a cause is at the field, under
// it, or at its parent; odd or long causes are no match.
func TestNamesField(t *testing.T) {
	invalid := func(paths ...string) error {
		var errs field.ErrorList
		for _, p := range paths {
			errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: p, Detail: "x"})
		}
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", errs)
	}
	for _, tc := range []struct {
		err  error
		path string
		want bool
	}{
		{invalid("spec.hostnameOverride"), hostname, true},
		{invalid("spec.containers[0].env[0].valueFrom"), fileKeyRef, true},
		{invalid("spec.containers[0].env[A].valueFrom.fileKeyRef.key"), fileKeyRef, true},
		{invalid("spec.volumes[3]"), imageVolume, true},
		{invalid("spec.volumes[3].image.reference"), imageVolume, true},
		{invalid("spec"), hostname, false},
		{invalid("spec.containers[0].env[0]"), fileKeyRef, false},
		{invalid("spec.containers[0].image"), stopSignal, false},
		{invalid("spec.hostnameOverrideX"), hostname, false},
		{invalid(strings.Repeat("x", maxCausePath) + ".spec.hostnameOverride"), hostname, false},
		{invalid(append(make([]string, maxCauses), "spec.hostnameOverride")...), hostname, false},
		{errors.New("spec.hostnameOverride"), hostname, false},
		{apierrors.NewBadRequest("spec.hostnameOverride"), hostname, false},
	} {
		require.Equal(t, tc.want, namesField(tc.err, tc.path), "%v at %s", tc.err, tc.path)
	}
	require.Equal(t, "spec.containers[].env[].valueFrom", withoutIndexes("spec.containers[0].env[A].valueFrom"))
}

// BenchmarkAffectedOnLearned is the engine's version check per applied policy (policies/apply.go,
// versionEffects) through the caches: with the table alone, and with every field learned by the
// probe (what `serve` answers once it ran).
//
//	go test ./internal/references -run '^$' -bench AffectedOnLearned
func BenchmarkAffectedOnLearned(b *testing.B) {
	patch := map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"pool": "gpu"}, "containers": []any{
		map[string]any{"name": "@main", "resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}},
			"lifecycle": map[string]any{"stopSignal": "SIGUSR1"}}}}}
	v := versions.Version{Minor: 37}
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = versions.AffectedOn("Pod", patch, versions.At(v), v)
		}
	})
	b.Run("learned", func(b *testing.B) {
		r := &Caches{version: &serverVersion{}, probe: &fieldProbe{}}
		r.version.known.Store(&v)
		l := &learnedFields{version: v, outcomes: map[fieldKey]versions.Outcome{}}
		for _, f := range versions.Fields {
			l.outcomes[keyOf(f)] = versions.Kept
		}
		r.probe.learned.Store(l)
		b.ReportAllocs()
		for b.Loop() {
			_ = versions.AffectedOn("Pod", patch, r, v)
		}
	})
}
