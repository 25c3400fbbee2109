package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/test/cluster"
)

// TestPlacementDifferential compares package placement's verdict with kube-scheduler's on
// random placement fields (nodeSelector, required node affinity with every operator, tolerations
// with Equal and Exists, of the pools' taints and of a cordoned Node's) and requests (drawRequests: containers, init containers, sidecars,
// pod-level resources; cpu, memory and nvidia.com/gpu, some larger than any Node) over the lab's
// pools and three pools drawn at random (randomPools: provider labels, taints of every effect,
// allocatable): for every Pod, the Nodes placement says take it are exactly where the scheduler
// may bind it — bound to one of them, or unschedulable when there is none, and then for the
// same reasons, Node by Node (refusals against the scheduler's FailedScheduling message).
func TestPlacementDifferential(t *testing.T) {
	startLab(t)
	seed := propertySeed(t)
	rng := rand.New(rand.NewPCG(seed, 35))
	pools := randomPools(rng, 3)
	created, err := cluster.CreatePools(contextBackground(), k8s, pools)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, n := range created {
			_ = k8s.Delete(contextBackground(), n)
		}
	})
	for _, p := range pools {
		t.Logf("random pool %s: labels %v, taints %v", p.Name, p.Labels, p.Taints)
	}
	// One random Node cordoned: only Pods that tolerate the unschedulable taint go there.
	cordoned := created[rng.IntN(len(created))]
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(contextBackground(), client.ObjectKeyFromObject(cordoned), cordoned); err != nil {
			return err
		}
		cordoned.Spec.Unschedulable = true
		return k8s.Update(contextBackground(), cordoned)
	}))
	t.Logf("cordoned: %s", cordoned.Name)
	nodes := &corev1.NodeList{}
	require.NoError(t, k8s.List(contextBackground(), nodes))
	// Label keys and values to draw from: the lab's, and one no Node has.
	values := map[string][]string{}
	var taints []corev1.Taint
	for _, n := range nodes.Items {
		for k, v := range n.Labels {
			values[k] = append(values[k], v)
		}
		taints = append(taints, n.Spec.Taints...)
	}
	taints = append(taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	keys := []string{"cloud.google.com/gke-nodepool", "cloud.google.com/gke-spot", "cloud.google.com/gke-accelerator",
		"eks.amazonaws.com/capacityType", "karpenter.sh/capacity-type", "topology.kubernetes.io/zone",
		"node.kubernetes.io/instance-type", "no.such/label"}
	values["no.such/label"] = []string{"x"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	value := func(k string) string {
		if rng.IntN(6) == 0 {
			return "other"
		}
		return pick(values[k])
	}
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist}

	const cases = 120
	var unschedulable, withRequests int
	for i := range cases {
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}
		if rng.IntN(2) == 0 {
			spec.NodeSelector = map[string]string{}
			for range 1 + rng.IntN(2) {
				k := pick(keys)
				spec.NodeSelector[k] = value(k)
			}
		}
		if rng.IntN(2) == 0 {
			sel := &corev1.NodeSelector{}
			for range 1 + rng.IntN(2) {
				var term corev1.NodeSelectorTerm
				for range 1 + rng.IntN(2) {
					k, op := pick(keys), ops[rng.IntN(len(ops))]
					r := corev1.NodeSelectorRequirement{Key: k, Operator: op}
					if op == corev1.NodeSelectorOpIn || op == corev1.NodeSelectorOpNotIn {
						r.Values = []string{value(k), value(k)}
						sort.Strings(r.Values)
						if r.Values[0] == r.Values[1] {
							r.Values = r.Values[:1]
						}
					}
					term.MatchExpressions = append(term.MatchExpressions, r)
				}
				sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, term)
			}
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
		}
		for _, tn := range taints {
			switch rng.IntN(4) {
			case 0:
				spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: tn.Key, Operator: corev1.TolerationOpEqual, Value: tn.Value, Effect: tn.Effect})
			case 1:
				spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: tn.Key, Operator: corev1.TolerationOpExists})
			}
		}
		drawRequests(rng, &spec)

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("differential-%d", i)}, Spec: spec}
		require.NoError(t, k8s.Create(contextBackground(), pod))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
		// placement's verdict on the Pod as stored (the API server may drop pod-level resources),
		// over the Nodes as the scheduler sees them now: each one's allocatable less what the Pods
		// already bound to it request (placement holds requests against an empty Node).
		free := freeNodes(t, pod)
		var fits []string
		for _, n := range free {
			if placement.Check(&pod.Spec, &placement.Snapshot{Nodes: []*corev1.Node{n}}).Schedulable {
				fits = append(fits, n.Name)
			}
		}
		all := placement.Check(&pod.Spec, &placement.Snapshot{Nodes: free})
		require.Equal(t, len(fits) > 0, all.Schedulable, "case %d: a Node fits alone but not among all, or the reverse", i)

		pl, err := cluster.WaitPlaced(contextBackground(), k8s, pod.Namespace, pod.Name, 60*time.Second)
		require.NoError(t, err)
		if len(fits) == 0 {
			unschedulable++
			require.NotEmpty(t, pl.Unschedulable, "case %d: placement says no Node fits (%s), the scheduler bound it to %s\nspec: %v", i, all.Reason, pl.Node, pod.Spec.String())
			require.Equal(t, refusals(&pod.Spec, free), schedulerRefusals(pl.Unschedulable),
				"case %d: why each Node refuses, placement's (left) and the scheduler's: %s\nspec: %v", i, pl.Unschedulable, pod.Spec.String())
			continue
		}
		require.Empty(t, pl.Unschedulable, "case %d: placement says %v fit, the scheduler: %s\nspec: %v", i, fits, pl.Unschedulable, pod.Spec.String())
		require.Contains(t, fits, pl.Node, "case %d: bound to a Node placement says does not fit\nspec: %v", i, pod.Spec.String())
		if len(placement.Unmodelled(&pod.Spec)) == 0 && len(requestsOf(pod)) > 0 {
			withRequests++
		}
	}
	t.Logf("%d cases over %d Nodes (%d of random pools), %d unschedulable, %d placed with requests, 0 disagreements", cases, len(nodes.Items), len(created), unschedulable, withRequests)
}

// randomPools are n node pools drawn at random beside the lab's: provider labels with the lab's
// values or new ones, taints of every effect (PreferNoSchedule only scores, so both sides must
// ignore it), allocatable of other sizes, one zone each.
func randomPools(rng *rand.Rand, n int) []cluster.Pool {
	labelValues := map[string][]string{
		"cloud.google.com/gke-spot":        {"true"},
		"cloud.google.com/gke-accelerator": {"nvidia-l4", "nvidia-tesla-a100", "nvidia-h100-80gb"},
		"eks.amazonaws.com/capacityType":   {"ON_DEMAND", "SPOT"},
		"karpenter.sh/capacity-type":       {"on-demand", "spot"},
		"node.kubernetes.io/instance-type": {"n2-standard-8", "m6i.2xlarge", "g5.xlarge"},
	}
	taintKeys := []string{"nvidia.com/gpu", "cloud.google.com/gke-spot", "karpenter.sh/capacity-type", "dedicated"}
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule}
	zones := []string{"europe-west4-a", "europe-west4-b", "europe-west4-c"}
	var out []cluster.Pool
	for i := range n {
		p := cluster.Pool{Name: fmt.Sprintf("random-%d", i), Zones: []string{zones[rng.IntN(len(zones))]},
			Labels:      map[string]string{"cloud.google.com/gke-nodepool": fmt.Sprintf("random-%d", i)},
			Allocatable: cluster.Resources("cpu", strconv.Itoa(2+rng.IntN(60)), "memory", strconv.Itoa(4+rng.IntN(250))+"Gi", "pods", "110")}
		for _, k := range slices.Sorted(maps.Keys(labelValues)) {
			if rng.IntN(2) == 0 {
				p.Labels[k] = labelValues[k][rng.IntN(len(labelValues[k]))]
			}
		}
		if _, gpu := p.Labels["cloud.google.com/gke-accelerator"]; gpu {
			p.Allocatable["nvidia.com/gpu"] = resource.MustParse(strconv.Itoa(1 + rng.IntN(8)))
		}
		for _, k := range taintKeys {
			if rng.IntN(3) == 0 {
				p.Taints = append(p.Taints, corev1.Taint{Key: k, Value: "true", Effect: effects[rng.IntN(len(effects))]})
			}
		}
		out = append(out, p)
	}
	return out
}

func nodeRefs(l *corev1.NodeList) []*corev1.Node {
	out := make([]*corev1.Node, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

// drawRequests gives a Pod's containers requests, sometimes an init container or a sidecar
// (restartPolicy Always, whose requests add to the containers') and sometimes pod-level
// requests over its containers' sum (placement and the scheduler then read those): cpu and
// memory from small to more than any Node has, and nvidia.com/gpu as a limit (its request
// defaults to it).
func drawRequests(rng *rand.Rand, spec *corev1.PodSpec) {
	cpus := []string{"100m", "500m", "1", "2", "3", "6", "12", "70"}
	mems := []string{"256Mi", "1Gi", "4Gi", "8Gi", "20Gi", "60Gi", "300Gi"}
	gpus := []string{"1", "2", "4", "9"}
	draw := func(c *corev1.Container) {
		req, lim := corev1.ResourceList{}, corev1.ResourceList{}
		if rng.IntN(2) == 0 {
			req[corev1.ResourceCPU] = resource.MustParse(cpus[rng.IntN(len(cpus))])
		}
		if rng.IntN(2) == 0 {
			req[corev1.ResourceMemory] = resource.MustParse(mems[rng.IntN(len(mems))])
		}
		if rng.IntN(5) == 0 {
			lim["nvidia.com/gpu"] = resource.MustParse(gpus[rng.IntN(len(gpus))])
		}
		c.Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
	if rng.IntN(4) == 0 {
		return
	}
	draw(&spec.Containers[0])
	if rng.IntN(3) == 0 {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "second", Image: "registry.k8s.io/pause:3.10"})
		draw(&spec.Containers[1])
	}
	switch rng.IntN(5) {
	case 0:
		c := corev1.Container{Name: "init", Image: "registry.k8s.io/pause:3.10"}
		draw(&c)
		spec.InitContainers = append(spec.InitContainers, c)
	case 1:
		always := corev1.ContainerRestartPolicyAlways
		c := corev1.Container{Name: "sidecar", Image: "registry.k8s.io/pause:3.10", RestartPolicy: &always}
		draw(&c)
		spec.InitContainers = append(spec.InitContainers, c)
	case 2:
		// Pod-level requests at least the containers' sum (the API server's rule).
		sum := corev1.ResourceList{}
		for _, c := range spec.Containers {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				q := sum[name]
				q.Add(c.Resources.Requests[name])
				sum[name] = q
			}
		}
		extra := map[corev1.ResourceName]string{corev1.ResourceCPU: cpus[rng.IntN(len(cpus))], corev1.ResourceMemory: mems[rng.IntN(len(mems))]}
		for name, q := range sum {
			q.Add(resource.MustParse(extra[name]))
			sum[name] = q
		}
		spec.Resources = &corev1.ResourceRequirements{Requests: sum}
	}
}

// requestsOf is what kube-scheduler's NodeResourcesFit asks of a Node for the Pod.
func requestsOf(pod *corev1.Pod) corev1.ResourceList {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range req {
		if q.IsZero() {
			delete(req, name)
		}
	}
	return req
}

// freeNodes are the cluster's Nodes with what the scheduler has left of each: allocatable less
// the requests of the Pods bound to it that have not ended, and one pod less per such Pod; the
// Pod being placed, which the scheduler may have bound already, is not counted.
func freeNodes(t *testing.T, placing *corev1.Pod) []*corev1.Node {
	t.Helper()
	nodes := &corev1.NodeList{}
	require.NoError(t, k8s.List(contextBackground(), nodes))
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(contextBackground(), pods))
	used := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.UID == placing.UID {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		for name, q := range requestsOf(p) {
			sum := u[name]
			sum.Add(q)
			u[name] = sum
		}
		n := u[corev1.ResourcePods]
		n.Add(resource.MustParse("1"))
		u[corev1.ResourcePods] = n
	}
	out := nodeRefs(nodes)
	for _, n := range out {
		for name, q := range used[n.Name] {
			left := n.Status.Allocatable[name]
			left.Sub(q)
			n.Status.Allocatable[name] = left
		}
	}
	return out
}

// refusals counts why each Node refuses the Pod as the scheduler's FailedScheduling message
// words it, from placement's verdict on each Node alone: the scheduler names, per Node, the
// first filter that refuses it (placement checks in the same order) and every resource it
// lacks. A Node that takes the Pod counts as "fits"; a reason placement words otherwise, as
// itself.
func refusals(spec *corev1.PodSpec, nodes []*corev1.Node) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		r := placement.Check(spec, &placement.Snapshot{Nodes: []*corev1.Node{n}})
		_, why, ok := strings.Cut(r.Reason, "(Node "+n.Name+": ")
		why = strings.TrimSuffix(why, ")")
		switch {
		case r.Schedulable:
			out["fits"]++
		case !ok:
			out[r.Reason]++
		case why == "cordoned":
			out["node(s) were unschedulable"]++
		case strings.HasPrefix(why, "taint "):
			out["node(s) had untolerated taint(s)"]++
		case strings.HasPrefix(why, "its labels do not match"):
			out["node(s) didn't match Pod's node affinity/selector"]++
		default:
			for _, short := range strings.Split(why, ", ") {
				name, _, _ := strings.Cut(short, " (")
				out[name]++
			}
		}
	}
	return out
}

// propertySeed is a seeded test's seed: make test's (from the commit) when PODPATCH_PROPERTY_SEED
// is set, so that a failure there reproduces; else a new one. It is logged with how to rerun it.
func propertySeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PODPATCH_PROPERTY_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PODPATCH_PROPERTY_SEED")
	}
	t.Logf("seed %d (PODPATCH_PROPERTY_SEED=%d reruns it)", seed, seed)
	return seed
}
