package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/test/cluster"
)

// TestPlacementDifferential compares package placement's verdict with kube-scheduler's on
// random placement fields (nodeSelector, required node affinity with every operator, tolerations
// with Equal and Exists) over the lab's pools: for every Pod, the Nodes placement says take it
// are exactly where the scheduler may bind it — bound to one of them, or unschedulable when there
// is none. Requests stay far below every Node's allocatable, which placement does not model.
func TestPlacementDifferential(t *testing.T) {
	startLab(t)
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
	// make test's seed (from the commit) when set, so a failure there reproduces; else a new one.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PODPATCH_PROPERTY_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PODPATCH_PROPERTY_SEED")
	}
	t.Logf("seed %d (PODPATCH_PROPERTY_SEED=%d reruns it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 35))
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
	t.Logf("%d cases, %d unschedulable, 0 disagreements", cases, unschedulable)
}

func nodeRefs(l *corev1.NodeList) []*corev1.Node {
	out := make([]*corev1.Node, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}
