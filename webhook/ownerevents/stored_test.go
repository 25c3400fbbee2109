package ownerevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// apiObjects is what the API server holds, as the worker reads it: metadata by resource and
// name, changed while the test runs; reads are counted.
type apiObjects struct {
	mu     sync.Mutex
	objs   map[string]*metav1.PartialObjectMetadata
	denied map[string]bool // resources podpatch may not read
	reads  map[string]int
}

func newAPIObjects() *apiObjects {
	return &apiObjects{objs: map[string]*metav1.PartialObjectMetadata{}, denied: map[string]bool{}, reads: map[string]int{}}
}

func (a *apiObjects) put(resource string, o *metav1.PartialObjectMetadata) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.objs[resource+"/"+o.Namespace+"/"+o.Name] = o
}

func (a *apiObjects) owners() *kube.Owners {
	return kube.NewOwners(func(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.reads[gvr.Resource]++
		if a.denied[gvr.Resource] {
			return nil, apierrors.NewForbidden(gvr.GroupResource(), name, errors.New("no RBAC"))
		}
		if o, ok := a.objs[gvr.Resource+"/"+ns+"/"+name]; ok {
			return o.DeepCopy(), nil
		}
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	})
}

func (a *apiObjects) readsOf(resource string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reads[resource]
}

// podAt is a Pod of namespace ns as stored at t, with podpatch's provenance (none if empty)
// and owners.
func podAt(name string, uid types.UID, t time.Time, provenance string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: owners}}
	if provenance != "" {
		o.Annotations = map[string]string{policies.AppliedAnnotation: provenance, "team": "a"}
	}
	return createdAt(o, t)
}

// driverResult is what admission did to a Spark driver Pod named name (an executor when it has
// owners): one policy applied, the patch setting its provenance.
func driverResult(t *testing.T, name, provenance string, owners ...metav1.OwnerReference) ([]byte, policies.Result) {
	t.Helper()
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/annotations",
		"value": map[string]string{policies.AppliedAnnotation: provenance}}})
	require.NoError(t, err)
	role := profiles.RoleScheduler
	if len(owners) > 0 {
		role = profiles.RoleWorker
	}
	return podJSON(t, name, "", owners), policies.Result{Recognised: true, Changed: true,
		Identity: profiles.Identity{Manager: profiles.ManagerSpark, Role: role, Cluster: "spark-pi"},
		Applied:  []*policies.Policy{basePolicy}, Patch: patch}
}

// eventsOn is the Events recorded on an object, by reason.
func eventsOn(log *eventLog, kind, name string) map[string][]recorded {
	out := map[string][]recorded{}
	for reason, evs := range log.byReason() {
		for _, ev := range evs {
			if ev.ref.Kind == kind && ev.ref.Name == name {
				out[reason] = append(out[reason], ev)
			}
		}
	}
	return out
}

// A Spark driver Pod is its own top (reference §9): its Event goes on the Pod admitted, and on
// no other object of its name. The create a webhook sees can still fail after it; the Pod of
// that name read back afterwards is then another, and gets nothing: the AlreadyExists shapes
// (created before the admission, without podpatch's provenance, with an older one, with this
// admission's own but well before it), one created after but with another provenance (what
// a later webhook made of it: podpatch, called again, offers that), and a dry run, which is
// never offered even though a Pod of its name, as it would be stored, exists. Only the Pod
// stored as admitted gets PoliciesApplied, on its UID.
func TestEventsOnlyOnTheObjectAdmitted(t *testing.T) {
	const now, older = "podpatch-system/base/placement@3", "podpatch-system/base/placement@2"
	before := admittedAt.Add(-time.Minute)
	for _, tc := range []struct {
		name   string
		stored *metav1.PartialObjectMetadata // the Pod of that name read back; nil: none
		dryRun bool
		want   bool
	}{
		{name: "stored as admitted", stored: podAt("driver", "uid-admitted", admittedAt.Add(300*time.Millisecond), now), want: true},
		{name: "stored within the clock skew", stored: podAt("driver", "uid-admitted", admittedAt.Add(-clockSkew), now), want: true},
		{name: "another, created before, never patched", stored: podAt("driver", "uid-other", before, "")},
		{name: "another, created before, older provenance", stored: podAt("driver", "uid-other", before, older)},
		{name: "another, created before, same provenance", stored: podAt("driver", "uid-other", before, now)},
		{name: "another, created just before, older provenance", stored: podAt("driver", "uid-other", admittedAt, older)},
		{name: "changed by a later webhook", stored: podAt("driver", "uid-admitted", admittedAt.Add(time.Second), older)},
		{name: "another, owned by something else", stored: podAt("driver", "uid-other", admittedAt, now,
			metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "uid-x", Controller: new(true)})},
		{name: "dry run", stored: podAt("driver", "uid-other", admittedAt, now), dryRun: true},
		{name: "never stored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPIObjects()
			if tc.stored != nil {
				api.put("pods", tc.stored)
			}
			e, log, c := testEvents(t, api.owners(), Options{})
			pod, res := driverResult(t, "driver", now)
			e.Offer(podRequest(pod, tc.dryRun), res, nil)
			if tc.dryRun {
				require.Zero(t, len(e.queue), "a dry run offers nothing")
			}
			e.drain()
			for range 2 { // the second flush is past storeWait: whatever was pending is settled
				e.agg.flush(context.Background())
				c.t = c.t.Add(storeWait)
			}
			got := log.byReason()[EventPoliciesApplied]
			if !tc.want {
				require.Empty(t, log.events, "no Event on an object this admission did not produce")
				require.Empty(t, e.agg.pending)
				if !tc.dryRun {
					require.Equal(t, 1.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("not_stored")))
				}
				return
			}
			require.Len(t, got, 1)
			require.Equal(t, "Pod", got[0].ref.Kind)
			require.Equal(t, "driver", got[0].ref.Name)
			require.Equal(t, tc.stored.UID, got[0].ref.UID, "on the Pod read back, by its UID")
			require.Contains(t, got[0].msg, "to 1 Pod (role scheduler, cluster spark-pi;")
			require.Zero(t, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("not_stored")))
		})
	}
}

// An owner counts only the objects stored as it was told: a named executor refused as
// AlreadyExists (the Pod of its name is another), refused by a later admission step (never
// found; settled storeWait after its admission) or owned by another owner is not counted on
// the driver; an owner whose only admitted object was refused gets no Event at all. An object
// stored a while after its admission (a slow webhook after podpatch) still counts, a flush
// later; a create retried soon after, and podpatch called again on the same create, count
// once, by UID.
func TestOwnerEventsOnlyForObjectsStored(t *testing.T) {
	const prov = "podpatch-system/base/placement@3"
	api := newAPIObjects()
	driver := podAt("spark-pi-driver", "uid-driver", admittedAt.Add(-time.Hour), prov)
	lonely := podAt("lonely-driver", "uid-lonely", admittedAt.Add(-time.Hour), prov)
	api.put("pods", driver)
	api.put("pods", lonely)
	ref, lonelyRef := refTo(driver), refTo(lonely)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "someone-else", UID: "uid-else", Controller: new(true)}
	api.put("pods", podAt("exec-stored", "uid-1", admittedAt, prov, ref))
	api.put("pods", podAt("exec-taken", "uid-2", admittedAt.Add(-time.Hour), "", ref))
	api.put("pods", podAt("exec-other-owner", "uid-3", admittedAt, prov, other))
	e, log, c := testEvents(t, api.owners(), Options{})
	offer := func(name string, owner metav1.OwnerReference) {
		pod, res := driverResult(t, name, prov, owner)
		e.Offer(podRequest(pod, false), res, nil)
	}
	for _, name := range []string{"exec-stored", "exec-taken", "exec-other-owner", "exec-refused", "exec-late"} {
		offer(name, ref)
	}
	offer("exec-stored", ref) // podpatch called again on the same create
	offer("lonely-exec", lonelyRef)
	e.drain()
	e.agg.flush(context.Background())
	applied := eventsOn(log, "Pod", "spark-pi-driver")[EventPoliciesApplied]
	require.Len(t, applied, 1)
	require.Contains(t, applied[0].msg, "to 1 Pod (role worker")
	require.Equal(t, 2.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("not_stored")), "exec-taken and exec-other-owner")
	require.Len(t, e.agg.pending, 3, "exec-refused, exec-late and lonely-exec are not found yet")

	// exec-late is stored now; a retried create of exec-stored, a second on, is the same object.
	c.t = c.t.Add(time.Second)
	api.put("pods", podAt("exec-late", "uid-4", c.t, prov, ref))
	offer("exec-stored", ref)
	e.drain()
	c.t = c.t.Add(DefaultEventWindow)
	e.agg.flush(context.Background())
	applied = eventsOn(log, "Pod", "spark-pi-driver")[EventPoliciesApplied]
	require.Contains(t, applied[len(applied)-1].msg, "to 2 Pods (role worker", "exec-stored once, and exec-late")

	// storeWait on, exec-refused and lonely-exec were never stored.
	c.t = admittedAt.Add(storeWait)
	e.agg.flush(context.Background())
	require.Empty(t, e.agg.pending)
	require.Equal(t, 4.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("not_stored")))
	c.t = c.t.Add(DefaultEventMaxInterval)
	e.agg.flush(context.Background())
	applied = eventsOn(log, "Pod", "spark-pi-driver")[EventPoliciesApplied]
	require.Contains(t, applied[len(applied)-1].msg, "to 2 Pods (role worker")
	require.Empty(t, eventsOn(log, "Pod", "lonely-driver"), "an owner whose only object was refused hears nothing")
}

// An object podpatch may not read back (no RBAC on Services, say) is not known to be stored:
// no Event, counted. A denied object is told on its owner without a read (nothing was
// stored); a denied Spark driver Pod, its own top, gets nothing: there is no object to carry
// it. Updates are never offered.
func TestEventsReadBackForbiddenDeniedAndUpdates(t *testing.T) {
	const prov = "podpatch-system/base/placement@3"
	api := newAPIObjects()
	driver := podAt("spark-pi-driver", "uid-driver", admittedAt.Add(-time.Hour), prov)
	api.put("pods", driver)
	api.put("services", &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "spark-pi-svc", UID: "uid-svc",
		CreationTimestamp: metav1.NewTime(admittedAt), OwnerReferences: []metav1.OwnerReference{refTo(driver)}}})
	api.denied["services"] = true
	e, log, c := testEvents(t, api.owners(), Options{})

	_, res := driverResult(t, "spark-pi-svc", "", refTo(driver))
	res.Object = nil
	svc := podRequest(podJSON(t, "spark-pi-svc", "", []metav1.OwnerReference{refTo(driver)}), false)
	svc.Kind.Kind = "Service"
	e.Offer(svc, res, nil)

	pod, denied := driverResult(t, "spark-pi-exec-1", prov, refTo(driver))
	denied.Denied, denied.Skipped = true, workerResult("").Skipped
	e.Offer(podRequest(pod, false), denied, nil)
	pod, deniedDriver := driverResult(t, "another-driver", prov)
	deniedDriver.Denied, deniedDriver.Skipped = true, workerResult("").Skipped
	e.Offer(podRequest(pod, false), deniedDriver, nil)

	pod, update := driverResult(t, "spark-pi-driver", prov)
	req := podRequest(pod, false)
	req.Operation = admissionv1.Update
	e.Offer(req, update, nil)
	require.Equal(t, 3, len(e.queue), "the Service and the two denied Pods; not the update")

	e.drain()
	e.agg.flush(context.Background())
	c.t = c.t.Add(storeWait)
	e.agg.flush(context.Background())
	require.Equal(t, 1.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("not_stored")), "the Service")
	require.Empty(t, log.byReason()[EventPoliciesApplied])
	got := log.byReason()[EventPolicyDenied]
	require.Len(t, got, 1, "%v", log.events)
	require.Equal(t, types.UID("uid-driver"), got[0].ref.UID)
	require.Contains(t, got[0].msg, "podpatch denied 1 Pod (role worker")
	require.Zero(t, api.readsOf("pods")-1, "only the driver, as the executor's owner: no denied object is read back")
}

// The objects read back per flush are bounded, one read per name: the rest wait for the next
// flush, and every stored one is counted in the end.
func TestReadBackIsBounded(t *testing.T) {
	const prov = "podpatch-system/base/placement@3"
	api := newAPIObjects()
	driver := podAt("spark-pi-driver", "uid-driver", admittedAt.Add(-time.Hour), prov)
	api.put("pods", driver)
	n := maxReadsPerFlush + 100
	for i := range n {
		api.put("pods", podAt(fmt.Sprintf("exec-%d", i), types.UID(fmt.Sprint("uid-", i)), admittedAt, prov, refTo(driver)))
	}
	e, log, c := testEvents(t, api.owners(), Options{Queue: 2 * n})
	for i := range n {
		for range 2 { // one read for both
			pod, res := driverResult(t, fmt.Sprintf("exec-%d", i), prov, refTo(driver))
			e.Offer(podRequest(pod, false), res, nil)
		}
	}
	e.drain()
	e.agg.flush(context.Background())
	require.Equal(t, maxReadsPerFlush, api.readsOf("pods")-1, "the objects, and the driver as their owner")
	require.Len(t, e.agg.pending, 2*100)
	c.t = c.t.Add(DefaultEventWindow)
	e.agg.flush(context.Background())
	require.Empty(t, e.agg.pending)
	require.Equal(t, n+1, api.readsOf("pods"))
	applied := log.byReason()[EventPoliciesApplied]
	require.Contains(t, applied[len(applied)-1].msg, fmt.Sprintf("to %d Pods", n))
}

// provenanceAfter reads the annotation of the object admission returned as encoding/json reads
// it once the patch is applied: set whole with the metadata or the annotations, alone, replaced,
// removed, left as the object came, and nothing when absent or present under another case or
// in a nested metadata; on the engine's own patches, it is the annotation the patched object
// holds.
func TestProvenanceAfter(t *testing.T) {
	for _, c := range []struct{ obj, patch string }{
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{}}`,
			`[{"op":"add","path":"/metadata/annotations","value":{"podpatch.io/applied":"x/y/z@1,x/y/w@2","b":"c"}}]`},
		{`{"kind":"Pod","spec":{}}`, `[{"op":"add","path":"/metadata","value":{"annotations":{"podpatch.io/applied":"m"}}}]`},
		{`{"metadata":{"annotations":{"podpatch.io/applied":"forged"}}}`, `[{"op":"replace","path":"/metadata/annotations/podpatch.io~1applied","value":"real"}]`},
		{`{"metadata":{"annotations":{"a":"b"}},"spec":{}}`, `[{"op":"add","path":"/spec/x","value":1},{"op":"add","path":"/metadata/annotations/podpatch.io~1applied","value":""}]`},
		{`{"metadata":{"annotations":{"podpatch.io/applied":"kept"}},"spec":{}}`, `[{"op":"add","path":"/spec/x","value":{"metadata":{"annotations":{"podpatch.io/applied":"no"}}}}]`},
		{`{"metadata":{"annotations":{"podpatch.io/applied":"gone"}}}`, `[{"op":"remove","path":"/metadata/annotations/podpatch.io~1applied"}]`},
		{`{"metadata":{"annotations":{"podpatch.io/applied":"gone"}}}`, `[{"op":"remove","path":"/metadata/annotations"}]`},
		{`{"metadata":{"annotations":{"Podpatch.io/applied":"other case","podpatch.io/applied-by":"x"}}}`, `[]`},
		{`{"spec":{"metadata":{"annotations":{"podpatch.io/applied":"nested"}}},"metadata":{"labels":{"podpatch.io/applied":"a label"}}}`, ``},
		{`{}`, `[{"op":"replace","path":"","value":{"metadata":{"annotations":{"podpatch.io/applied":"whole"}}}}]`},
		{`{}`, ``},
	} {
		got := []byte(c.obj)
		var ops []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if c.patch != "" {
			require.NoError(t, json.Unmarshal([]byte(c.patch), &ops))
		}
		if len(ops) == 1 && ops[0].Path == "" {
			got = ops[0].Value // the library replaces no root
		} else if c.patch != "" {
			p, err := jsonpatch.DecodePatch([]byte(c.patch))
			require.NoError(t, err)
			got, err = p.Apply(got)
			require.NoError(t, err, c)
		}
		var want struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(got, &want))
		v, ok := want.Metadata.Annotations[policies.AppliedAnnotation]
		sum, has, err := provenanceAfter([]byte(c.obj), []byte(c.patch))
		require.NoError(t, err, c)
		require.Equal(t, ok, has, c)
		if ok {
			require.Equal(t, hashOf(v), sum, c)
		}
	}
	for _, bad := range []struct{ obj, patch string }{
		{`[1]`, ``},
		{`{}`, `{}`},
		{`{}`, `[{"op":"copy","from":"/x","path":"/metadata/annotations"}]`},
		{`{}`, `[{"op":"add","path":"/metadata/annotations","value":[1]}]`},
	} {
		_, _, err := provenanceAfter([]byte(bad.obj), []byte(bad.patch))
		require.Error(t, err, bad)
	}

	ps, probs := policies.ParseConfigMap(policyConfigMap(), policies.DefaultOptions())
	require.Empty(t, probs)
	set := policies.NewSet(ps)
	for _, f := range []string{"spark/driver-pod.yaml", "spark/executor-pod.yaml", "kuberay/worker-pod.yaml"} {
		pod := fixturePod(t, f)
		for _, forged := range []bool{false, true} {
			in := pod
			if forged { // the user's own value, which podpatch replaces
				var obj map[string]any
				require.NoError(t, json.Unmarshal(pod, &obj))
				meta := obj["metadata"].(map[string]any)
				meta["annotations"] = map[string]any{policies.AppliedAnnotation: "forged"}
				var err error
				in, err = json.Marshal(obj)
				require.NoError(t, err)
			}
			res, _ := patchInItsNamespace(t, set, in)
			require.True(t, res.Changed, f)
			p, err := jsonpatch.DecodePatch(res.Patch)
			require.NoError(t, err)
			out, err := p.Apply(in)
			require.NoError(t, err)
			var patched struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(out, &patched))
			v := patched.Metadata.Annotations[policies.AppliedAnnotation]
			require.True(t, strings.HasPrefix(v, policies.DefaultPlatformNamespace+"/p/team"), "%s: %q", f, v)
			sum, ok, err := provenanceAfter(in, res.Patch)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, hashOf(v), sum, f)
		}
	}
}

// policyConfigMap is a platform policy ConfigMap labelling every Spark and Ray Pod.
func policyConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\n" +
		"kind: PodTemplatePatch\nmetadata: {name: team}\nspec:\n  match: {managers: [spark, ray]}\n  template: {metadata: {labels: {team: a}}}\n"}}
}

// The cost of what Offer adds for a Pod of the real size: reading the provenance of the
// object admission returned from the object and the engine's patch.
func BenchmarkProvenanceAfter(b *testing.B) {
	raw, err := os.ReadFile("../../policies/testdata/fixtures/kuberay/worker-pod.yaml")
	require.NoError(b, err)
	pod, err := yaml.YAMLToJSON(raw)
	require.NoError(b, err)
	ps, probs := policies.ParseConfigMap(policyConfigMap(), policies.DefaultOptions())
	require.Empty(b, probs)
	res, err := policies.NewSet(ps).Patch(policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", NamespaceFromRequest: true})
	require.NoError(b, err)
	require.NotEmpty(b, res.Patch)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := provenanceAfter(pod, res.Patch); err != nil {
			b.Fatal(err)
		}
	}
}

// fixturePod is a manager's Pod fixture (policies/testdata/fixtures) as JSON.
func fixturePod(tb testing.TB, fixture string) []byte {
	tb.Helper()
	raw, err := os.ReadFile("../../policies/testdata/fixtures/" + fixture)
	require.NoError(tb, err)
	pod, err := yaml.YAMLToJSON(raw)
	require.NoError(tb, err)
	return pod
}

// patchInItsNamespace patches a Pod as admission does, in the namespace of its metadata, given
// by the request; it returns the result and that namespace.
func patchInItsNamespace(tb testing.TB, set *policies.Set, pod []byte) (policies.Result, string) {
	tb.Helper()
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	require.NoError(tb, json.Unmarshal(pod, &obj))
	res, err := set.Patch(policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: obj.Metadata.Namespace, NamespaceFromRequest: true})
	require.NoError(tb, err)
	return res, obj.Metadata.Namespace
}
