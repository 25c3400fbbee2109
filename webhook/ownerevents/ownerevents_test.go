package ownerevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// recorded is one Event a test recorder got.
type recorded struct {
	ref              corev1.ObjectReference
	typ, reason, msg string
}

// eventLog is a record.EventRecorder keeping what it is given.
type eventLog struct {
	mu     sync.Mutex
	events []recorded
}

func (l *eventLog) Event(obj runtime.Object, typ, reason, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recorded{ref: *obj.(*corev1.ObjectReference), typ: typ, reason: reason, msg: msg})
}

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) byReason() map[string][]recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]recorded{}
	for _, e := range l.events {
		out[e.reason] = append(out[e.reason], e)
	}
	return out
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// metaClient serves custom resources' and Pods' metadata, counting reads.
func metaClient(t *testing.T, objs ...*metav1.PartialObjectMetadata) (*kube.Owners, *int) {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	var ros []runtime.Object
	for _, o := range objs {
		scheme.AddKnownTypeWithName(o.GroupVersionKind(), &metav1.PartialObjectMetadata{})
		ros = append(ros, o)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, ros...)
	reads := new(int)
	lookup := kube.MetadataLookup(meta)
	return kube.NewOwners(func(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, error) {
		*reads++
		return lookup(ctx, gvr, ns, name)
	}), reads
}

func partial(apiVersion, kind, ns, name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), OwnerReferences: owners}}
}

func refTo(o *metav1.PartialObjectMetadata) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, Controller: new(true)}
}

// admittedAt is when testEvents' clock starts.
var admittedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// createdAt is o as the API server stores it at t: an admitted object read back.
func createdAt(o *metav1.PartialObjectMetadata, t time.Time) *metav1.PartialObjectMetadata {
	o.CreationTimestamp = metav1.NewTime(t.Truncate(time.Second))
	return o
}

// testEvents builds Events on a recorder and owners, with a settable clock; no worker runs.
func testEvents(t *testing.T, owners *kube.Owners, o Options) (*Events, *eventLog, *clock) {
	t.Helper()
	log := &eventLog{}
	c := &clock{t: admittedAt}
	o.Recorder, o.Owners, o.Registry, o.now = kube.NewRecorder(log), owners, prometheus.NewRegistry(), c.now
	e, err := New(o)
	require.NoError(t, err)
	return e, log, c
}

// drain hands everything queued to the aggregator, as the worker does.
func (e *Events) drain() {
	for {
		select {
		case r := <-e.queue:
			e.agg.add(r)
		default:
			return
		}
	}
}

// podJSON is a Pod with a name or generateName and owner references.
func podJSON(t testing.TB, name, generateName string, owners []metav1.OwnerReference) []byte {
	t.Helper()
	p := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: generateName, Namespace: "ns", OwnerReferences: owners},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return b
}

func podRequest(obj []byte, dryRun bool) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns", Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: obj}, DryRun: &dryRun}}
}

var (
	gpuPolicy  = &policies.Policy{Ref: "podpatch-system/gpu/gpu@7", Mode: policies.ModeDefault}
	basePolicy = &policies.Policy{Ref: "podpatch-system/base/placement@3", Mode: policies.ModeDefault}
	mountPol   = &policies.Policy{Ref: "ray/team/scratch@12", Mode: policies.ModeEnforce}
)

// workerResult is what admission did to one Ray worker: two policies applied, one left out,
// one finding.
func workerResult(cluster string) policies.Result {
	return policies.Result{Recognised: true, Changed: true,
		Identity: profiles.Identity{Manager: profiles.ManagerRay, Role: profiles.RoleWorker, Cluster: cluster, Group: "gpu-group"},
		Applied:  []*policies.Policy{basePolicy, gpuPolicy},
		Patch: []byte(`[{"op":"add","path":"/metadata/annotations/podpatch.io~1applied","value":"x"},` +
			`{"op":"add","path":"/spec/containers/0/resources/limits/nvidia.com~1gpu","value":"1"},{"op":"add","path":"/spec/tolerations","value":[]}]`),
		Skipped: []policies.Skipped{{Policy: mountPol, Violation: validity.Violation{Rule: "volume-mount-without-volume",
			Field: "spec.containers[ray-worker].volumeMounts[scratch]", Message: "no volume named scratch"}}},
		Findings: []checks.Finding{{Check: checks.RayResources, Severity: checks.SeverityWarning, Policy: gpuPolicy.Ref,
			Field: "spec.containers[ray-worker].resources.limits.nvidia.com/gpu", Message: "ray start says --num-gpus=0",
			Fix: "set rayStartParams.num-gpus on the RayCluster's worker group"}},
	}
}

// A cluster of 1,000 workers gets one Event per reason on its top owner (a RayJob above the
// RayCluster), each naming the policies, the fields, the rule or the finding and the count;
// its owners are read once. A second burst updates the count at a doubling interval: far
// fewer writes than objects, and none while nothing changes.
func TestEventsAggregateOneCluster(t *testing.T) {
	rj := partial("ray.io/v1", "RayJob", "ns", "job")
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc", refTo(rj))
	owners, reads := metaClient(t, rj, rc)
	e, log, c := testEvents(t, owners, Options{Queue: 4096})

	head := policies.Result{Recognised: true, Changed: true, Identity: profiles.Identity{Manager: profiles.ManagerRay, Role: profiles.RoleScheduler, Cluster: "rc"},
		Applied: []*policies.Policy{basePolicy}}
	e.Offer(podRequest(podJSON(t, "", "rc-head-", []metav1.OwnerReference{refTo(rc)}), false), head, nil)
	for range 1000 {
		e.Offer(podRequest(podJSON(t, "", "rc-gpu-group-worker-", []metav1.OwnerReference{refTo(rc)}), false), workerResult("rc"), nil)
	}
	e.drain()
	e.agg.flush(context.Background())
	got := log.byReason()
	require.Len(t, got[EventPoliciesApplied], 2, "one per role")
	require.Len(t, got[EventPolicySkipped], 1)
	require.Len(t, got[EventPolicyCheck], 1)
	require.Equal(t, 2, *reads, "the RayCluster and the RayJob, once")
	for _, ev := range log.events {
		require.Equal(t, corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: "RayJob", Namespace: "ns", Name: "job", UID: "uid-job"}, ev.ref)
		require.LessOrEqual(t, len(ev.msg), kube.MaxEventMessage)
	}
	var worker recorded
	for _, ev := range got[EventPoliciesApplied] {
		if strings.Contains(ev.msg, "role worker") {
			worker = ev
		}
	}
	require.Equal(t, corev1.EventTypeNormal, worker.typ)
	require.Contains(t, worker.msg, "to 1000 Pods (role worker, cluster rc;")
	require.Contains(t, worker.msg, gpuPolicy.Ref+" (1000 Pods)")
	require.Contains(t, worker.msg, basePolicy.Ref+" (1000 Pods)")
	require.Contains(t, worker.msg, "fields: spec.containers[0].resources.limits, spec.tolerations")
	require.NotContains(t, worker.msg, "podpatch.io/applied")
	sk := got[EventPolicySkipped][0]
	require.Equal(t, corev1.EventTypeWarning, sk.typ)
	require.Contains(t, sk.msg, "out of 1000 Pods")
	require.Contains(t, sk.msg, mountPol.Ref+" (enforce): spec.containers[ray-worker].volumeMounts[scratch] (volume-mount-without-volume) (1000 Pods)")
	require.Contains(t, got[EventPolicyCheck][0].msg, checks.RayResources+" (warning) "+gpuPolicy.Ref)
	require.Contains(t, got[EventPolicyCheck][0].msg, "fix: set rayStartParams.num-gpus")

	// Nothing new: nothing written.
	c.t = c.t.Add(time.Hour)
	e.agg.flush(context.Background())
	require.Len(t, log.events, 4)

	// 1,000 more workers, one every 100ms, flushed every window: the count is updated at a
	// doubling interval.
	writes := len(log.events)
	for i := range 1000 {
		e.Offer(podRequest(podJSON(t, "", "rc-gpu-group-worker-", []metav1.OwnerReference{refTo(rc)}), false), workerResult("rc"), nil)
		c.t = c.t.Add(100 * time.Millisecond)
		if i%50 == 49 {
			e.drain()
			e.agg.flush(context.Background())
		}
	}
	c.t = c.t.Add(DefaultEventMaxInterval)
	e.agg.flush(context.Background())
	updates := len(log.events) - writes
	t.Logf("second 1,000 workers over 100s: %d Event writes (3 reasons)", updates)
	require.LessOrEqual(t, updates, 3*6, "at most a handful per reason")
	last := log.byReason()[EventPolicySkipped]
	require.Contains(t, last[len(last)-1].msg, "out of 2000 Pods")
	require.Equal(t, 2, *reads, "the owners are read once per flush that meets a new group only")
}

// Dask: worker Pods behind a ReplicaSet, a Deployment and a DaskWorkerGroup, and the scheduler
// behind its own Deployment, tell the DaskCluster. spark-submit: the executors tell their
// driver Pod, and the driver Pod, which has no owner, itself.
func TestEventsTopOwners(t *testing.T) {
	dc := partial("kubernetes.dask.org/v1", "DaskCluster", "ns", "dc")
	dwg := partial("kubernetes.dask.org/v1", "DaskWorkerGroup", "ns", "dc-default", refTo(dc))
	wd := partial("apps/v1", "Deployment", "ns", "dc-default-worker", refTo(dwg))
	wrs := partial("apps/v1", "ReplicaSet", "ns", "dc-default-worker-abc", refTo(wd))
	sd := partial("apps/v1", "Deployment", "ns", "dc-scheduler", refTo(dc))
	srs := partial("apps/v1", "ReplicaSet", "ns", "dc-scheduler-abc", refTo(sd))
	driver := createdAt(partial("v1", "Pod", "ns", "spark-pi-driver"), admittedAt)
	owners, _ := metaClient(t, dc, dwg, wd, wrs, sd, srs, driver)
	e, log, _ := testEvents(t, owners, Options{})
	applied := func(m profiles.Manager, r profiles.Role) policies.Result {
		return policies.Result{Recognised: true, Identity: profiles.Identity{Manager: m, Role: r}, Applied: []*policies.Policy{basePolicy}}
	}
	for range 3 {
		e.Offer(podRequest(podJSON(t, "", "dc-default-worker-abc-", []metav1.OwnerReference{refTo(wrs)}), false), applied(profiles.ManagerDask, profiles.RoleWorker), nil)
		e.Offer(podRequest(podJSON(t, "", "spark-pi-exec-", []metav1.OwnerReference{refTo(driver)}), false), applied(profiles.ManagerSpark, profiles.RoleWorker), nil)
	}
	e.Offer(podRequest(podJSON(t, "", "dc-scheduler-abc-", []metav1.OwnerReference{refTo(srs)}), false), applied(profiles.ManagerDask, profiles.RoleScheduler), nil)
	e.Offer(podRequest(podJSON(t, "spark-pi-driver", "", nil), false), applied(profiles.ManagerSpark, profiles.RoleScheduler), nil)
	e.Offer(podRequest(podJSON(t, "bare", "", nil), false), applied(profiles.ManagerDask, profiles.RoleWorker), nil)
	e.drain()
	e.agg.flush(context.Background())
	on := map[string][]string{}
	for _, ev := range log.events {
		on[ev.ref.Kind+"/"+ev.ref.Name+"/"+string(ev.ref.UID)] = append(on[ev.ref.Kind+"/"+ev.ref.Name+"/"+string(ev.ref.UID)], ev.msg)
	}
	require.Len(t, on, 2, "%v", on)
	require.Len(t, on["DaskCluster/dc/uid-dc"], 2, "scheduler and worker")
	require.Len(t, on["Pod/spark-pi-driver/uid-spark-pi-driver"], 2, "driver and executors")
	require.Contains(t, strings.Join(on["DaskCluster/dc/uid-dc"], "\n"), "to 3 Pods (role worker")
}

// Dry runs offer nothing; a full queue drops and counts without blocking; owners that are
// gone are counted, written nowhere.
func TestEventsDryRunAndFullQueue(t *testing.T) {
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc")
	owners, _ := metaClient(t, rc)
	e, log, c := testEvents(t, owners, Options{Queue: 10})
	pod := podJSON(t, "", "rc-worker-", []metav1.OwnerReference{refTo(rc)})
	for range 100 {
		e.Offer(podRequest(pod, true), workerResult("rc"), nil)
	}
	require.Zero(t, len(e.queue), "a dry run offers nothing")

	done := make(chan struct{})
	go func() { // nobody reads the queue: Offer must not wait
		defer close(done)
		for range 1000 {
			e.Offer(podRequest(pod, false), workerResult("rc"), nil)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Offer blocked on a full queue")
	}
	require.Equal(t, 990.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("queue_full")))
	require.Equal(t, 10.0, testutil.ToFloat64(e.metrics.queue))
	e.drain()
	e.agg.flush(context.Background())
	require.Contains(t, log.byReason()[EventPoliciesApplied][0].msg, "to 10 Pods")

	gone := metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "gone", UID: "uid-gone"}
	e.Offer(podRequest(podJSON(t, "", "gone-", []metav1.OwnerReference{gone}), false), workerResult("gone"), nil)
	e.drain()
	e.agg.flush(context.Background())
	require.Zero(t, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("unresolved")), "not found so soon after admission: tried again")
	c.t = c.t.Add(DefaultEventWindow)
	e.agg.flush(context.Background())
	require.Equal(t, 3.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("unresolved")), "one object in each of three groups")
	require.Len(t, log.events, 3, "nothing on the owner that is gone")
}

// Hostile objects are bounded: a list of 20,000 owner references is read up to its 16th, an
// owner whose name or kind no object can have gets no Event, long policy refs, rules and
// findings are clipped, and distinct owners past the cap evict the oldest, counted.
func TestEventsHostileInputBounded(t *testing.T) {
	owners, reads := metaClient(t)
	e, log, _ := testEvents(t, owners, Options{Queue: 100, Groups: 50})

	many := make([]metav1.OwnerReference, 20000)
	for i := range many {
		many[i] = metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: fmt.Sprintf("rc-%d", i), UID: types.UID(fmt.Sprint(i))}
	}
	meta, err := readMeta(podJSON(t, "", "x-", many))
	require.NoError(t, err)
	require.Len(t, meta.OwnerReferences, maxOwnerRefs)

	long := strings.Repeat("a", 1<<20)
	res := workerResult("rc")
	res.Applied = []*policies.Policy{{Ref: long}}
	res.Skipped[0].Violation.Field = long
	res.Findings[0].Message = long
	for _, owner := range []metav1.OwnerReference{
		{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: long, UID: "u"},
		{APIVersion: "ray.io/v1", Kind: "Ray Cluster!", Name: "rc", UID: "u"},
	} {
		e.Offer(podRequest(podJSON(t, "", "x-", []metav1.OwnerReference{owner}), false), res, nil)
	}
	e.drain()
	e.agg.flush(context.Background())
	require.Empty(t, log.events)
	require.Zero(t, *reads, "an implausible owner is not read")

	for i := range 500 {
		owner := metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: fmt.Sprintf("rc-%d", i), UID: types.UID(fmt.Sprint(i))}
		e.Offer(podRequest(podJSON(t, "", "x-", []metav1.OwnerReference{owner}), false), res, nil)
		e.drain()
	}
	require.LessOrEqual(t, len(e.agg.groups), 50)
	require.Equal(t, len(e.agg.groups), e.agg.lru.Len())
	require.Positive(t, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("evicted")))
}

// The figure of reference §9: a RayCluster of 1,000 workers admitted in one burst, through
// the process's real Event broadcaster to a clientset that counts its Event writes.
func TestEventsAPIWritesFor1000Pods(t *testing.T) {
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc")
	owners, reads := metaClient(t, rc)
	cs := fake.NewClientset()
	var mu sync.Mutex
	writes := map[string]int{}
	cs.PrependReactor("*", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if v := a.GetVerb(); v == "create" || v == "patch" || v == "update" {
			writes[v]++
		}
		return false, nil, nil
	})
	events := kube.NewEvents(cs)
	defer events.Shutdown()
	e, err := New(Options{Recorder: events.Recorder("podpatch"), Owners: owners, Registry: prometheus.NewRegistry(),
		Window: 500 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	pod := podJSON(t, "", "rc-worker-", []metav1.OwnerReference{refTo(rc)})
	for range 1000 {
		e.Offer(podRequest(pod, false), workerResult("rc"), nil) // one burst, well within a window
	}
	require.Eventually(t, func() bool {
		list, err := cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		n := 0
		for _, ev := range list.Items {
			if ev.Reason == EventPolicySkipped && strings.Contains(ev.Message, "1000 Pods") {
				n++
			}
		}
		return n == 1 && len(e.queue) == 0
	}, 10*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // anything more would be written by now
	cancel()
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range writes {
		total += n
	}
	t.Logf("1,000 Pods of one RayCluster: %d Event API writes (%v), %d owner reads, dropped %v", total, writes, *reads,
		testutil.ToFloat64(e.metrics.dropped.WithLabelValues("queue_full")))
	require.LessOrEqual(t, total, 3*2, "a handful per reason, not one per Pod")
	require.Zero(t, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("queue_full")))
}

// With RBAC to read a RayCluster but not the RayJob above it, the RayCluster is the top: the
// Event goes there. An owner that may not be read at all is not known to exist: no Event, and
// the objects are counted as unresolved (a Ray Pod's RayCluster, a Dask worker's ReplicaSet).
func TestEventsForbiddenOwner(t *testing.T) {
	rj := partial("ray.io/v1", "RayJob", "ns", "rj")
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc", refTo(rj))
	allowed, _ := metaClient(t, rc)
	onlyRayClusters := kube.NewOwners(func(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, error) {
		if gvr.Resource != "rayclusters" {
			return nil, apierrors.NewForbidden(gvr.GroupResource(), name, errors.New("no RBAC"))
		}
		return allowed.Get(ctx, gvr, ns, name)
	})
	e, log, _ := testEvents(t, onlyRayClusters, Options{})
	e.Offer(podRequest(podJSON(t, "", "rc-worker-", []metav1.OwnerReference{refTo(rc)}), false),
		policies.Result{Recognised: true, Identity: profiles.Identity{Manager: profiles.ManagerRay, Role: profiles.RoleWorker}, Applied: []*policies.Policy{basePolicy}}, nil)
	e.drain()
	e.agg.flush(context.Background())
	require.Len(t, log.events, 1)
	require.Equal(t, "RayCluster", log.events[0].ref.Kind)
	require.Equal(t, rc.UID, log.events[0].ref.UID)

	forbidden := kube.NewOwners(func(_ context.Context, gvr schema.GroupVersionResource, _, name string) (*metav1.PartialObjectMetadata, error) {
		return nil, apierrors.NewForbidden(gvr.GroupResource(), name, errors.New("no RBAC"))
	})
	e, log, _ = testEvents(t, forbidden, Options{})
	e.Offer(podRequest(podJSON(t, "", "rc-worker-", []metav1.OwnerReference{refTo(rc)}), false),
		policies.Result{Recognised: true, Identity: profiles.Identity{Manager: profiles.ManagerRay, Role: profiles.RoleWorker}, Applied: []*policies.Policy{basePolicy}}, nil)
	rs := partial("apps/v1", "ReplicaSet", "ns", "w-abc")
	e.Offer(podRequest(podJSON(t, "", "w-abc-", []metav1.OwnerReference{refTo(rs)}), false),
		policies.Result{Recognised: true, Identity: profiles.Identity{Manager: profiles.ManagerDask, Role: profiles.RoleWorker}, Applied: []*policies.Policy{basePolicy}}, nil)
	e.drain()
	e.agg.flush(context.Background())
	require.Empty(t, log.events)
	require.Equal(t, 2.0, testutil.ToFloat64(e.metrics.dropped.WithLabelValues("unresolved")))
}

// Made-up owner references, of every shape a user can write (the API server checks neither that
// the owner exists nor its UID), get no Event: of a kind nothing serves, a name nothing has, the
// name of a real owner with another UID or kind. The real owner among them gets its Event.
func TestEventsOnlyOnOwnersThatExist(t *testing.T) {
	dc := partial("kubernetes.dask.org/v1", "DaskCluster", "ns", "dc")
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc")
	owners, _ := metaClient(t, dc, rc)
	e, log, c := testEvents(t, owners, Options{})
	made := []metav1.OwnerReference{
		{APIVersion: "example.com/v1", Kind: "Pipeline", Name: "p", UID: "uid-p"},
		{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "nobody", UID: "uid-nobody"},
		{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc", UID: "uid-not-rc"},
		{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "rc", UID: rc.UID},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "rc", UID: rc.UID},
		{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "dc", UID: "uid-other"},
	}
	for i, ref := range append(made, refTo(rc)) {
		ref.Controller = new(true)
		e.Offer(podRequest(podJSON(t, "", fmt.Sprintf("p%d-", i), []metav1.OwnerReference{ref}), false),
			policies.Result{Recognised: true, Identity: profiles.Identity{Manager: profiles.ManagerRay, Role: profiles.RoleWorker}, Applied: []*policies.Policy{basePolicy}}, nil)
	}
	e.drain()
	for range 3 { // not found is settled a window after the first object
		e.agg.flush(context.Background())
		c.t = c.t.Add(time.Minute)
	}
	require.Len(t, log.events, 1, "%v", log.events)
	require.Equal(t, rc.UID, log.events[0].ref.UID)
	require.Equal(t, "rc", log.events[0].ref.Name)
}

// When the process stops, what the last window admitted is said before the worker returns.
func TestEventsFlushOnStop(t *testing.T) {
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc")
	owners, _ := metaClient(t, rc)
	log := &eventLog{}
	e, err := New(Options{Recorder: kube.NewRecorder(log), Owners: owners, Registry: prometheus.NewRegistry(), Window: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	for range 3 {
		e.Offer(podRequest(podJSON(t, "", "rc-worker-", []metav1.OwnerReference{refTo(rc)}), false), workerResult("rc"), nil)
	}
	cancel()
	require.NoError(t, <-done)
	got := log.byReason()
	require.Len(t, got[EventPoliciesApplied], 1)
	require.Contains(t, got[EventPoliciesApplied][0].msg, "to 3 Pods")
}

// Whatever an object or a patch holds, what the worker keeps of it is bounded: at most
// maxOwnerRefs owner references, at most maxEventItems fields of at most 128 bytes.
func FuzzEventInputs(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"a","ownerReferences":[{"apiVersion":"ray.io/v1","kind":"RayCluster","name":"rc","uid":"u","controller":true}]}}`),
		[]byte(`[{"op":"add","path":"/metadata/labels","value":{"a":"b","c":"d"}},{"op":"add","path":"/spec/tolerations/-","value":{}}]`))
	f.Add([]byte(`{"spec":{},"metadata":{"ownerReferences":null}}`), []byte(`[{"op":"replace","path":"/a~1b/~0c/0/d/e/f/g","value":1}]`))
	f.Add([]byte(`{"metadata":{"ownerReferences":[{},{},{}]}}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, obj, patch []byte) {
		m, err := readMeta(obj)
		if err == nil {
			require.LessOrEqual(t, len(m.OwnerReferences), maxOwnerRefs)
		}
		fs := patchFields(patch)
		require.LessOrEqual(t, len(fs), maxEventItems)
		for _, f := range fs {
			require.LessOrEqual(t, len(f), 128)
		}
	})
}

// The request path's share: what Offer costs for a KubeRay worker Pod (generateName: counted
// at admission) and a Spark executor Pod (named: its provenance is read for the read-back).
func BenchmarkEventsOffer(b *testing.B) {
	ps, probs := policies.ParseConfigMap(policyConfigMap(), policies.DefaultOptions())
	require.Empty(b, probs)
	set := policies.NewSet(ps)
	for _, f := range []string{"kuberay/worker-pod.yaml", "spark/executor-pod.yaml"} {
		b.Run(strings.Split(f, "/")[0], func(b *testing.B) {
			pod := fixturePod(b, f)
			res, ns := patchInItsNamespace(b, set, pod)
			require.NotEmpty(b, res.Patch)
			e, err := New(Options{Recorder: kube.NewRecorder(&eventLog{}), Owners: kube.NewOwners(nil), Registry: prometheus.NewRegistry(), Queue: 1})
			require.NoError(b, err)
			req := podRequest(pod, false)
			req.Namespace = ns
			b.ReportAllocs()
			for b.Loop() {
				e.Offer(req, res, set)
				select {
				case <-e.queue:
				default:
				}
			}
		})
	}
}

// readMeta's scan agrees with encoding/json on what it reads, whatever precedes the metadata
// (strings holding braces, quotes and escapes, nested lists, literals, white space), and on
// generated objects of random shape.
func TestReadMetaMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		`{"metadata":{"name":"a"}}`,
		` { "kind" : "Pod" , "spec" : {"x":"}{][\"\\","y":[1,2,{"z":null}],"t":true} , "metadata" : {"name":"b","ownerReferences":[{"kind":"K","name":"n","uid":"u","apiVersion":"v1"}]} } `,
		"{\"a\":-1.5e3,\n\t\"b\":false,\r\n\"metadata\":{\"name\":\"c\\\"d\"}}",
		`{"spec":{"metadata":{"name":"nested"}},"metadata":{"name":"top"}}`,
		`{"kind":"Pod"}`,
		`{}`,
		`{"metadatax":{"name":"no"},"metadata":{"generateName":"g-"}}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		members := []string{`"metadata":{"name":"gen-` + strconv.Itoa(i) + `","ownerReferences":[{"kind":"RayCluster","name":"r` + strconv.Itoa(i) + `"}]}`}
		for range rng.IntN(6) {
			v := []string{`"s\"}{"`, `[1,[2,{"a":"]"}]]`, `{"k":{"k":"\\"}}`, `null`, `12.5`, `"\u00e9"`}[rng.IntN(6)]
			members = append(members, `"m`+strconv.Itoa(rng.IntN(100))+`":`+v)
		}
		rng.Shuffle(len(members), func(a, b int) { members[a], members[b] = members[b], members[a] })
		sep := []string{",", " , ", ",\n  "}[rng.IntN(3)]
		cases = append(cases, "{"+strings.Join(members, sep)+"}")
	}
	for _, c := range cases {
		require.True(t, json.Valid([]byte(c)), c)
		var want struct {
			Metadata struct {
				Name            string                  `json:"name"`
				OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
			} `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal([]byte(c), &want))
		got, err := readMeta([]byte(c))
		require.NoError(t, err, c)
		require.Equal(t, want.Metadata.Name, got.Name, c)
		require.Equal(t, len(want.Metadata.OwnerReferences), len(got.OwnerReferences), c)
		for i := range got.OwnerReferences {
			require.Equal(t, want.Metadata.OwnerReferences[i], got.OwnerReferences[i], c)
		}
	}
}

// An Event counts objects, not admissions: a named object admitted again (a controller's create
// retried after AlreadyExists, refused by the API server after admission) is one object, read
// back by its UID; Pods without a name yet (generateName) are one each.
func TestEventsCountObjectsOnce(t *testing.T) {
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc")
	stored := []*metav1.PartialObjectMetadata{rc}
	names := []string{"rc-worker-a", "rc-worker-b"}
	for i := range recentNames + 1 {
		names = append(names, fmt.Sprintf("rc-worker-%d", i))
	}
	for _, name := range names {
		p := createdAt(partial("v1", "Pod", "ns", name, refTo(rc)), admittedAt)
		p.Annotations = map[string]string{policies.AppliedAnnotation: "x"} // workerResult's patch
		stored = append(stored, p)
	}
	owners, _ := metaClient(t, stored...)
	e, log, _ := testEvents(t, owners, Options{Queue: 4096})
	offer := func(name, generateName string) {
		e.Offer(podRequest(podJSON(t, name, generateName, []metav1.OwnerReference{refTo(rc)}), false), workerResult("rc"), nil)
	}
	for range 3 {
		offer("rc-worker-a", "")
	}
	offer("rc-worker-b", "")
	offer("", "rc-worker-")
	offer("", "rc-worker-")
	for i := range recentNames + 1 { // more names than a group remembers: each counts
		offer(fmt.Sprintf("rc-worker-%d", i), "")
	}
	e.drain()
	e.agg.flush(context.Background())
	applied := log.byReason()[EventPoliciesApplied]
	require.Len(t, applied, 1)
	want := 2 + 2 + recentNames + 1
	require.Contains(t, applied[0].msg, fmt.Sprintf("to %d Pods (role worker, cluster rc;", want))
	require.Contains(t, applied[0].msg, fmt.Sprintf("%s (%d Pods)", gpuPolicy.Ref, want))
}

// A denied object (reference §5: an enforce policy that cannot be applied) is told in a
// PolicyDenied Event that names the policy and why, and never counted as applied.
func TestEventsDenied(t *testing.T) {
	rc := partial("ray.io/v1", "RayCluster", "ns", "rc")
	owners, _ := metaClient(t, rc)
	e, log, _ := testEvents(t, owners, Options{Queue: 64})
	denied := workerResult("rc")
	denied.Denied = true
	for range 3 {
		e.Offer(podRequest(podJSON(t, "", "rc-gpu-group-worker-", []metav1.OwnerReference{refTo(rc)}), false), denied, nil)
	}
	e.drain()
	e.agg.flush(context.Background())
	got := log.byReason()
	require.Empty(t, got[EventPoliciesApplied], "nothing was applied to a denied object")
	require.Empty(t, got[EventPolicySkipped])
	require.Len(t, got[EventPolicyDenied], 1)
	ev := got[EventPolicyDenied][0]
	require.Equal(t, corev1.EventTypeWarning, ev.typ)
	require.Contains(t, ev.msg, "podpatch denied 3 Pods (role worker, cluster rc;")
	require.Contains(t, ev.msg, mountPol.Ref+" (enforce): spec.containers[ray-worker].volumeMounts[scratch] (volume-mount-without-volume) (3 Pods)")
}
