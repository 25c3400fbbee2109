package managers

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/webhook/ownerevents"
)

// describeEvents lists the Events podpatch wrote on one object: what `kubectl describe` on it
// shows of podpatch (its Events whose involvedObject is the object).
func (h *harness) describeEvents(ctx context.Context, ns, kind, name string) ([]corev1.Event, error) {
	l, err := h.clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if e.Source.Component == "podpatch" {
			out = append(out, e)
		}
	}
	return out, nil
}

// objectsRe reads the count, kind and role an aggregated Event's message states.
var objectsRe = regexp.MustCompile(`(?:to|of|in) (\d+) (Pod|Service)s? \(role (\w+)`)

// latest is, per kind and role, the message of the latest Event of a reason: the one stating
// the most objects (the count only grows).
func latest(events []corev1.Event, reason string) map[string]string {
	out := map[string]string{}
	most := map[string]int{}
	for _, e := range events {
		if e.Reason != reason {
			continue
		}
		m := objectsRe.FindStringSubmatch(e.Message)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		k := m[2] + "/" + m[3]
		if n >= most[k] {
			most[k], out[k] = n, e.Message
		}
	}
	return out
}

func objectsText(n int, kind profiles.Kind) string {
	if n == 1 {
		return "1 " + string(kind)
	}
	return fmt.Sprintf("%d %ss", n, kind)
}

// checkAppliedEvents checks, on the custom resource (or top owner) kind/name, what `kubectl
// describe` shows of the objects of one compute cluster: for each kind and role among them, a
// PoliciesApplied Event stating how many objects podpatch patched and, for every policy their
// podpatch.io/applied annotations name, on how many of them it applied (reference §9).
func (h *harness) checkAppliedEvents(t *testing.T, ns, kind, name, cluster string, served []generated) {
	t.Helper()
	type want struct {
		n        int
		policies map[string]int
	}
	wants := map[string]*want{}
	for _, g := range served {
		applied := g.obj.GetAnnotations()[policies.AppliedAnnotation]
		if g.Cluster != cluster || applied == "" {
			continue
		}
		k := string(g.Kind) + "/" + string(g.Role)
		w := wants[k]
		if w == nil {
			w = &want{policies: map[string]int{}}
			wants[k] = w
		}
		w.n++
		for _, ref := range strings.Split(applied, ",") {
			w.policies[strings.TrimSpace(ref)]++
		}
	}
	require.NotEmpty(t, wants, "objects of %s patched", cluster)
	var msgs map[string]string
	eventually(t, 30*time.Second, func() error {
		evs, err := h.describeEvents(context.Background(), ns, kind, name)
		if err != nil {
			return err
		}
		msgs = latest(evs, ownerevents.EventPoliciesApplied)
		for k, w := range wants {
			kd, role, _ := strings.Cut(k, "/")
			msg, ok := msgs[k]
			if !ok {
				return fmt.Errorf("no PoliciesApplied Event for %s on %s/%s (has %v)", k, kind, name, msgs)
			}
			if !strings.Contains(msg, "to "+objectsText(w.n, profiles.Kind(kd))+" (role "+role) {
				return fmt.Errorf("%s: want %d objects: %s", k, w.n, msg)
			}
		}
		return nil
	}, "PoliciesApplied Events on %s/%s", kind, name)
	for k, w := range wants {
		kd, _, _ := strings.Cut(k, "/")
		msg := msgs[k]
		t.Logf("%s/%s: %s", kind, name, msg)
		for _, ref := range slices.Sorted(maps.Keys(w.policies)) {
			require.Contains(t, msg, ref+" ("+objectsText(w.policies[ref], profiles.Kind(kd))+")", "%s on %s/%s", k, kind, name)
		}
	}
}

// eventsPolicies are a team's namespace policies in the Events test's namespace: one that
// applies to Ray workers, and one that podpatch leaves out of them because it raises the
// memory request above the limit KubeRay set (reference §8, rule request-above-limit).
const eventsPolicies = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: team-label}
spec:
  match: {roles: [worker]}
  template:
    metadata:
      labels: {team: events}
---
apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: big-memory}
spec:
  match: {roles: [worker]}
  template:
    spec:
      containers:
        - name: "@main"
          resources:
            requests: {memory: 64Gi}
`

// installTeamPolicies creates the Events test's namespace policies and waits for podpatch to
// serve them; it returns their ConfigMap's resourceVersion.
func (h *harness) installTeamPolicies(t *testing.T, ns string) string {
	t.Helper()
	before, err := h.podpatch.MetricSum("podpatch_policies")
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-events", Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{"policies.yaml": eventsPolicies}}
	require.NoError(t, h.k8s.Create(context.Background(), cm))
	eventually(t, 30*time.Second, func() error {
		n, err := h.podpatch.MetricSum("podpatch_policies")
		if err != nil || n != before+2 {
			return fmt.Errorf("%v policies, %v", n, err)
		}
		return nil
	}, "podpatch serves the team's policies")
	return cm.ResourceVersion
}

// TestOwnerEventsRay: the real KubeRay operator makes a RayCluster's Pods; `kubectl describe
// raycluster` then shows, from podpatch, which policies applied to how many of its Pods, and
// which policy was left out of its workers and why — each figure checked against the Pods the
// API server stored.
func TestOwnerEventsRay(t *testing.T) {
	bin := rayOperatorBin(t)
	env.createKubeRayCRDs(t)
	ns := "mgr-events-ray"
	require.NoError(t, env.k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	rv := env.installTeamPolicies(t, ns)

	start(t, "ray-operator", rayOperator(bin, ns))

	rc := env.readTestdata(t, "kuberay/raycluster.yaml")
	rc.SetNamespace(ns)
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	groups[0].(map[string]any)["replicas"] = int64(4)
	require.NoError(t, unstructured.SetNestedSlice(rc.Object, groups, "spec", "workerGroupSpecs"))
	require.NoError(t, env.k8s.Create(context.Background(), rc))
	const name = "raycluster-kuberay"
	want := map[shape]int{
		pod(profiles.ManagerRay, profiles.RoleScheduler, name, "headgroup"): 1,
		pod(profiles.ManagerRay, profiles.RoleWorker, name, "workergroup"):  4,
		pod(profiles.ManagerRay, profiles.RoleWorker, name, "gpu-group"):    1,
		service(profiles.ManagerRay, profiles.RoleScheduler, name, ""):      1,
	}
	served := env.waitGenerated(t, ns, want, 2*time.Minute)
	env.checkAppliedEvents(t, ns, "RayCluster", name, name, served)

	// Every worker lacks the 64Gi request: the policy was left out of each, and the Event
	// says so, counting them.
	workers := 0
	for _, g := range served {
		if g.Kind != profiles.KindPod || g.Role != profiles.RoleWorker {
			continue
		}
		workers++
		containers, _, _ := unstructured.NestedSlice(g.obj.Object, "spec", "containers")
		mem, _, _ := unstructured.NestedString(containers[0].(map[string]any), "resources", "requests", "memory")
		require.NotEqual(t, "64Gi", mem, "left out")
		require.Equal(t, "events", g.obj.GetLabels()["team"], "the rest applied")
	}
	ref := ns + "/team-events/big-memory@" + rv
	eventually(t, 30*time.Second, func() error {
		evs, err := env.describeEvents(context.Background(), ns, "RayCluster", name)
		if err != nil {
			return err
		}
		msg := latest(evs, ownerevents.EventPolicySkipped)["Pod/worker"]
		wantText := ref + ": spec.containers[ray-worker].resources.requests[memory] (request-above-limit) (" + objectsText(workers, profiles.KindPod) + ")"
		if !strings.Contains(msg, "out of "+objectsText(workers, profiles.KindPod)+" (role worker") || !strings.Contains(msg, wantText) {
			return fmt.Errorf("PolicySkipped on the RayCluster: want %q in %q", wantText, msg)
		}
		t.Logf("RayCluster %s: PolicySkipped: %s", name, msg)
		for _, e := range evs {
			require.Equal(t, string(rcUID(t, ns, name)), string(e.InvolvedObject.UID), "on this RayCluster")
		}
		return nil
	}, "PolicySkipped Event on the RayCluster")
}

// rcUID is the UID of a RayCluster.
func rcUID(t *testing.T, ns, name string) types.UID {
	t.Helper()
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(rayClusterGVK)
	require.NoError(t, env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o))
	return o.GetUID()
}

// rayClusterAndWorker creates namespace ns and in it a RayCluster named name (KubeRay's CRDs
// installed), owned by nothing and watched by no operator, and returns it and KubeRay's worker
// Pod fixture in ns, for a scheduler that does not run (unscheduled): these tests make up to
// 1,000 of them, which would otherwise fill the lab's Nodes and, with the defaults' priority
// class, have the scheduler preempt other tests' Pods.
func rayClusterAndWorker(t *testing.T, ns, name string) (*unstructured.Unstructured, corev1.Pod) {
	t.Helper()
	env.createKubeRayCRDs(t)
	require.NoError(t, env.k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	rc := env.readTestdata(t, "kuberay/raycluster.yaml")
	rc.SetNamespace(ns)
	rc.SetName(name)
	require.NoError(t, env.k8s.Create(context.Background(), rc))
	b, err := os.ReadFile(filepath.Join(env.root, "policies", "testdata", "fixtures", "kuberay", "worker-pod.yaml"))
	require.NoError(t, err)
	var worker corev1.Pod
	require.NoError(t, yaml.Unmarshal(b, &worker))
	worker.Namespace = ns
	worker.Spec.SchedulerName = unscheduled
	return rc, worker
}

// TestOwnerEvents1000Pods measures reference §9's promise: 1,000 worker Pods of one RayCluster,
// created through podpatch as fast as the API server takes them, give a handful of Event
// writes on the RayCluster, not 1,000. The Pods are KubeRay's worker fixture, owned by a
// RayCluster no operator watches (nothing runs them).
func TestOwnerEvents1000Pods(t *testing.T) {
	const n = 1000
	ns := "mgr-events-1000"
	rc, worker := rayClusterAndWorker(t, ns, "rc-1000")
	worker.GenerateName = "rc-1000-workergroup-worker-"
	worker.Labels["ray.io/cluster"] = "rc-1000"
	worker.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc-1000", UID: rc.GetUID(), Controller: new(true)}}

	cfg := rest.CopyConfig(env.cp.Config)
	cfg.QPS, cfg.Burst = 500, 500
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	began := time.Now()
	var g errgroup.Group
	g.SetLimit(8)
	for range n {
		g.Go(func() error {
			_, err := cs.CoreV1().Pods(ns).Create(context.Background(), worker.DeepCopy(), metav1.CreateOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	created := time.Since(began)
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, n)
	for _, p := range pods.Items {
		require.NotEmpty(t, p.Annotations[policies.AppliedAnnotation], "patched by podpatch")
	}
	var served []generated
	for i := range pods.Items {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pods.Items[i])
		require.NoError(t, err)
		served = append(served, generated{shape: pod(profiles.ManagerRay, profiles.RoleWorker, "rc-1000", "workergroup"),
			obj: &unstructured.Unstructured{Object: u}})
	}
	env.checkAppliedEvents(t, ns, "RayCluster", "rc-1000", "rc-1000", served)
	time.Sleep(2 * ownerevents.DefaultEventWindow) // anything still to write is written by now
	evs, err := env.describeEvents(context.Background(), ns, "RayCluster", "rc-1000")
	require.NoError(t, err)
	writes := 0
	for _, e := range evs {
		writes += int(max(e.Count, 1)) // a create, then a patch per repeat
	}
	t.Logf("%d worker Pods of one RayCluster created in %v: %d Events on it, %d Event writes", n, created.Round(time.Millisecond), len(evs), writes)
	require.LessOrEqual(t, writes, 10, "a handful of Event writes, not one per Pod")
}

// TestOwnerEventsMadeUpOwners: Pods whose ownerReferences a user made up (the API server checks
// neither that an owner exists nor its UID) make podpatch write no Event on anything but the
// real RayCluster among them: not on a RayCluster that does not exist, on the real one's name
// with another UID, on another kind of that name, or on a kind nothing serves. Without the
// owner walk's verification, 20 such Pods gave 40 Events on objects that do not exist.
func TestOwnerEventsMadeUpOwners(t *testing.T) {
	ns := "mgr-events-made-up"
	rc, worker := rayClusterAndWorker(t, ns, "rc-real")
	madeUp := []metav1.OwnerReference{
		{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "nobody", UID: "0b7e1f3c-0000-4000-8000-000000000001"},
		{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc-real", UID: "0b7e1f3c-0000-4000-8000-000000000002"},
		{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "rc-real", UID: rc.GetUID()},
		{APIVersion: "example.com/v1", Kind: "Pipeline", Name: "rc-real", UID: rc.GetUID()},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "kube-root-ca.crt", UID: "0b7e1f3c-0000-4000-8000-000000000003"},
	}
	droppedBefore, err := env.podpatch.MetricSum("podpatch_events_dropped_total")
	require.NoError(t, err)
	for i := range 20 {
		p := worker.DeepCopy()
		p.GenerateName = fmt.Sprintf("made-up-%d-", i)
		ref := madeUp[i%len(madeUp)]
		ref.Controller = new(true)
		ref.Name = strings.Replace(ref.Name, "nobody", fmt.Sprintf("nobody-%d", i), 1)
		p.OwnerReferences = []metav1.OwnerReference{ref}
		require.NoError(t, env.k8s.Create(context.Background(), p))
	}
	real := worker.DeepCopy()
	real.GenerateName = "rc-real-worker-"
	real.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc-real", UID: rc.GetUID(), Controller: new(true)}}
	require.NoError(t, env.k8s.Create(context.Background(), real))

	// The real owner's Event comes, and the made-up ones are settled as unresolved (a window
	// after their first object for those not found).
	eventually(t, 6*ownerevents.DefaultEventWindow, func() error {
		evs, err := env.describeEvents(context.Background(), ns, "RayCluster", "rc-real")
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("no Event on the real RayCluster yet")
		}
		dropped, err := env.podpatch.MetricSum("podpatch_events_dropped_total")
		if err != nil {
			return err
		}
		if dropped-droppedBefore < 20 {
			return fmt.Errorf("%v of the 20 made-up owners' objects settled as unresolved", dropped-droppedBefore)
		}
		return nil
	}, "the real owner's Event, and the made-up owners settled")
	l, err := env.clientset.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range l.Items {
		if e.Source.Component != "podpatch" {
			continue
		}
		o := e.InvolvedObject
		require.True(t, o.Kind == "RayCluster" && o.Name == "rc-real" && o.UID == rc.GetUID(),
			"an Event on %s %s (uid %s), which is not the real RayCluster: %s %s", o.Kind, o.Name, o.UID, e.Reason, e.Message)
	}
}
