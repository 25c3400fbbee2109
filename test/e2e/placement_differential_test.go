package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/test/cluster"
)

// TestPlacementDifferential compares package placement's verdict with kube-scheduler's on
// random placement fields (nodeSelector, required node affinity with every operator, tolerations
// with Equal and Exists) over the lab's pools and three pools drawn at random (randomPools:
// provider labels, taints of every effect, allocatable): for every Pod, the Nodes placement says take it
// are exactly where the scheduler may bind it — bound to one of them, or unschedulable when there
// is none. Requests stay far below every Node's allocatable, which placement does not model.
func TestPlacementDifferential(t *testing.T) {
	startLab(t)
	// make test's seed (from the commit) when set, so a failure there reproduces; else a new one.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PODPATCH_PROPERTY_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PODPATCH_PROPERTY_SEED")
	}
	t.Logf("seed %d (PODPATCH_PROPERTY_SEED=%d reruns it)", seed, seed)
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

	const cases = 80
	var unschedulable int
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
		var fits []string
		for j := range nodes.Items {
			if placement.Check(&spec, &placement.Snapshot{Nodes: []*corev1.Node{&nodes.Items[j]}}).Schedulable {
				fits = append(fits, nodes.Items[j].Name)
			}
		}
		all := placement.Check(&spec, &placement.Snapshot{Nodes: nodeRefs(nodes)})
		require.Equal(t, len(fits) > 0, all.Schedulable, "case %d: a Node fits alone but not among all, or the reverse", i)

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("differential-%d", i)}, Spec: spec}
		require.NoError(t, k8s.Create(contextBackground(), pod))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
		pl, err := cluster.WaitPlaced(contextBackground(), k8s, pod.Namespace, pod.Name, 60*time.Second)
		require.NoError(t, err)
		if len(fits) == 0 {
			unschedulable++
			require.NotEmpty(t, pl.Unschedulable, "case %d: placement says no Node fits (%s), the scheduler bound it to %s\nspec: %v", i, all.Reason, pl.Node, spec.String())
			continue
		}
		require.Empty(t, pl.Unschedulable, "case %d: placement says %v fit, the scheduler: %s\nspec: %v", i, fits, pl.Unschedulable, spec.String())
		require.Contains(t, fits, pl.Node, "case %d: bound to a Node placement says does not fit\nspec: %v", i, spec.String())
	}
	t.Logf("%d cases over %d Nodes (%d of random pools), %d unschedulable, 0 disagreements", cases, len(nodes.Items), len(created), unschedulable)
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
