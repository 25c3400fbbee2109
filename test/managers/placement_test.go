package managers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
)

// The lab: kube-scheduler binds the managers' Pods to the Nodes of cluster.LabPools and kwok
// brings them to Running, so that each test reads where the policies made them run.

const (
	// Pools of the lab (cluster.LabPools) the suite's policies name.
	poolDefault      = "default-pool"
	poolGPU          = "gpu-pool"
	poolSpot         = "spot-pool"
	poolEKSOnDemand  = "eks-on-demand"
	poolKarpenterSpt = "karpenter-spot"
	// Zones of the GKE pools.
	zoneA = "europe-west4-a"
	zoneB = "europe-west4-b"
)

// unscheduled is the scheduler that Pods the lab must leave Pending name: none runs.
const unscheduled = "podpatch-not-scheduled"

// placeTimeout is how long a Pod may take to be bound and brought to Running.
const placeTimeout = 2 * time.Minute

// lab is kube-scheduler and kwok, started once for the suite.
type lab struct {
	scheduler, kwok *cluster.Process
}

// startLab runs kube-scheduler and kwok against the control plane and creates the suite's
// pools (labPools).
func startLab(ctx context.Context, cp *cluster.ControlPlane, binDir string) (*lab, error) {
	sched, err := cp.StartScheduler(binDir)
	if err != nil {
		return nil, err
	}
	kwok, err := cp.StartKwok(binDir)
	if err != nil {
		return nil, errors.Join(err, sched.Stop())
	}
	l := &lab{scheduler: sched, kwok: kwok}
	if _, err := cluster.CreatePools(ctx, cp.Client, labPools()); err != nil {
		return nil, errors.Join(err, l.stop())
	}
	return l, nil
}

func (l *lab) stop() error { return errors.Join(l.kwok.Stop(), l.scheduler.Stop()) }

// labPools are the lab's pools with default-pool's two Nodes four times as large
// (n2-standard-32). It is the lab's one untainted pool: besides the served Pods the policies put
// there, every test's control copies (unpatched: no toleration, no node selector) land on it,
// and all of them stay until the suite ends. Sized so that no Pod waits for room and the
// scheduler never preempts a control copy (priority 0) for a served Pod (priority 1000, the
// defaults' managers-batch).
func labPools() []cluster.Pool {
	pools := cluster.LabPools()
	for i := range pools {
		p := &pools[i]
		if p.Name != poolDefault {
			continue
		}
		p.Allocatable = cluster.Resources("cpu", "32", "memory", "128Gi", "pods", "250")
		p.Labels[corev1.LabelInstanceTypeStable] = "n2-standard-32"
	}
	return pools
}

// where is where the Pods of a shape must run: their Node's pool and, when set, its zone.
type where struct{ pool, zone string }

func (w where) String() string {
	if w.zone == "" {
		return w.pool
	}
	return w.pool + " in " + w.zone
}

// placed is a Pod as the scheduler placed it.
type placed struct {
	name string
	cluster.Placement
	zone string
}

// checkPlaced waits until the scheduler has bound every served Pod of the shapes in want and
// kwok has brought it to Running, then reads from the API server the Node each is bound to
// (spec.nodeName), that Node's pool and zone labels, and the Pod's phase: each must be where
// want says. Every served Pod must have an entry. It returns the placements by Pod name.
func (h *harness) checkPlaced(t *testing.T, ns string, served []generated, want map[shape]where) map[string]placed {
	t.Helper()
	out := map[string]placed{}
	for _, g := range served {
		if g.Kind != profiles.KindPod {
			continue
		}
		w, ok := want[g.key]
		require.True(t, ok, "%s %s: no pool expected for %v", ns, g.obj.GetName(), g.key)
		p := h.waitPlaced(t, ns, g.obj.GetName())
		require.Equal(t, w.pool, p.Pool, "Pod %s/%s (%v) bound to %s", ns, p.name, g.key, p.Node)
		if w.zone != "" {
			require.Equal(t, w.zone, p.zone, "Pod %s/%s (%v) bound to %s", ns, p.name, g.key, p.Node)
		}
		t.Logf("%s/%s (%s %s, group %q): bound to %s (%s), Running", ns, p.name, g.Manager, g.Role, g.Group, p.Node, w)
		out[p.name] = p
	}
	return out
}

// waitPlaced waits for a Pod to be bound and Running, failing with the scheduler's reason if it
// found no Node, and reads its Node's zone.
func (h *harness) waitPlaced(t *testing.T, ns, name string) placed {
	t.Helper()
	ctx := context.Background()
	pl, err := cluster.WaitPlaced(ctx, h.k8s, ns, name, placeTimeout)
	if err != nil || pl.Unschedulable != "" {
		t.Fatalf("Pod %s/%s: %v; the scheduler: %q; Pods of %s:%s", ns, name, err, pl.Unschedulable, ns, h.describePods(ns))
	}
	require.True(t, pl.Running, "Pod %s/%s Running", ns, name)
	n := &corev1.Node{}
	require.NoError(t, h.k8s.Get(ctx, client.ObjectKey{Name: pl.Node}, n))
	return placed{name: name, Placement: pl, zone: n.Labels[corev1.LabelTopologyZone]}
}

// checkControlPlaced waits until every Pod of a control namespace is bound and Running: on
// default-pool, the lab's one untainted pool, as no policy placed them. Both copies then run,
// so that the managers see the same cluster in both namespaces (their status is compared) and
// nothing is still being scheduled once the fight window starts.
func (h *harness) checkControlPlaced(t *testing.T, ctl string) {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, h.k8s.List(context.Background(), pods, client.InNamespace(ctl)))
	require.NotEmpty(t, pods.Items, "Pods in %s", ctl)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		pl := h.waitPlaced(t, ctl, p.Name)
		require.Equal(t, poolDefault, pl.Pool, "unplaced control copy %s/%s bound to %s", ctl, p.Name, pl.Node)
	}
}

// placeServedAndControl checks where the served Pods run (want) and waits for the control
// copies to run, as a subtest.
func (h *harness) placeServedAndControl(t *testing.T, ns, ctl string, served []generated, want map[shape]where) map[string]placed {
	t.Helper()
	var out map[string]placed
	if !t.Run("every Pod bound to a Node of its pool and Running", func(t *testing.T) {
		out = h.checkPlaced(t, ns, served, want)
		h.checkControlPlaced(t, ctl)
	}) {
		t.FailNow()
	}
	return out
}

// ipNames maps the Pod and Service IPs of a namespace to "ip-of-<kind>/<name>", so that a
// manager's status naming an address (KubeRay's status.head.podIP) compares across namespaces
// through the generated names the rewriter knows.
func (h *harness) ipNames(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	pods := &corev1.PodList{}
	require.NoError(t, h.k8s.List(ctx, pods, client.InNamespace(ns)))
	for _, p := range pods.Items {
		for _, ip := range p.Status.PodIPs {
			out[ip.IP] = "ip-of-pod/" + p.Name
		}
	}
	svcs := &corev1.ServiceList{}
	require.NoError(t, h.k8s.List(ctx, svcs, client.InNamespace(ns)))
	for _, s := range svcs.Items {
		for _, ip := range s.Spec.ClusterIPs {
			if ip != corev1.ClusterIPNone {
				out[ip] = "ip-of-service/" + s.Name
			}
		}
	}
	return out
}

// namedIPs replaces, in a decoded object, every string that is one of ips' addresses by its name.
func namedIPs(v any, ips map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = namedIPs(e, ips)
		}
	case []any:
		for i, e := range x {
			x[i] = namedIPs(e, ips)
		}
	case string:
		if n, ok := ips[x]; ok {
			return n
		}
	}
	return v
}

// podCPU is the CPU a Pod requests, for the failure messages of capacity.
func podCPU(p *corev1.Pod) string {
	var sum resource.Quantity
	for _, c := range p.Spec.Containers {
		sum.Add(c.Resources.Requests[corev1.ResourceCPU])
	}
	return sum.String()
}

// describePods lists where each Pod of a namespace is, for failure messages.
func (h *harness) describePods(ns string) string {
	pods := &corev1.PodList{}
	if err := h.k8s.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\n  %s: node %q, phase %s, cpu %s, nodeSelector %v", p.Name, p.Spec.NodeName, p.Status.Phase, podCPU(&p), p.Spec.NodeSelector)
	}
	return b.String()
}

// changePolicy replaces one data key of a policy ConfigMap in the platform namespace, waits
// until podpatch serves the changed set (its policy generation, on /readyz, is no longer the one
// before), and when the test ends puts the key back and waits until podpatch serves the suite's
// policies again (generations are content hashes: the same as before).
func (h *harness) changePolicy(t *testing.T, name, key, policy string) {
	t.Helper()
	ctx := context.Background()
	before, err := h.podpatch.Generation()
	require.NoError(t, err)
	require.NotEmpty(t, before, "podpatch serves a generation")
	cm := &corev1.ConfigMap{}
	require.NoError(t, h.k8s.Get(ctx, client.ObjectKey{Namespace: "podpatch-system", Name: name}, cm))
	old, ok := cm.Data[key]
	require.True(t, ok, "%s has %s", name, key)
	cm.Data[key] = policy
	require.NoError(t, h.k8s.Update(ctx, cm))
	t.Cleanup(func() {
		cm := &corev1.ConfigMap{}
		require.NoError(t, h.k8s.Get(ctx, client.ObjectKey{Namespace: "podpatch-system", Name: name}, cm))
		cm.Data[key] = old
		require.NoError(t, h.k8s.Update(ctx, cm))
		eventually(t, 30*time.Second, func() error {
			if g, err := h.podpatch.Generation(); err != nil || g != before {
				return fmt.Errorf("generation %q (%v), want %q", g, err, before)
			}
			return nil
		}, "podpatch serves %s/%s as before", name, key)
	})
	eventually(t, 30*time.Second, func() error {
		g, err := h.podpatch.Generation()
		if err != nil || g == "" || g == before {
			return fmt.Errorf("generation %q (%v), before the change %q", g, err, before)
		}
		return nil
	}, "podpatch serves the changed %s/%s", name, key)
}
