package placement

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies/checks"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func gpuTaint() corev1.Taint {
	return corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}

func expr(key string, op corev1.NodeSelectorOperator, vs ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vs}
}

func TestCheckNodes(t *testing.T) {
	snap := &Snapshot{Nodes: []*corev1.Node{
		node("cpu-1", map[string]string{"pool": "cpu", "zone": "a", "cores": "8"}),
		node("gpu-1", map[string]string{"pool": "gpu", "zone": "b"}, gpuTaint()),
	}}
	tolerateGPU := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		ok   bool
	}{
		{"no constraints", corev1.PodSpec{}, true},
		{"nodeSelector matches", corev1.PodSpec{NodeSelector: map[string]string{"pool": "cpu"}}, true},
		{"nodeSelector matches no node", corev1.PodSpec{NodeSelector: map[string]string{"pool": "tpu"}}, false},
		{"tainted node, not tolerated", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}}, false},
		{"tainted node, tolerated", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: tolerateGPU}, true},
		{"In", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("zone", corev1.NodeSelectorOpIn, "a", "c")}})}, true},
		{"NotIn every zone", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("zone", corev1.NodeSelectorOpNotIn, "a")}})}, false},
		{"Gt", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("cores", corev1.NodeSelectorOpGt, "4")}})}, true},
		{"Lt", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("cores", corev1.NodeSelectorOpLt, "4")}})}, false},
		{"DoesNotExist", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("cores", corev1.NodeSelectorOpDoesNotExist)}}), Tolerations: tolerateGPU}, true},
		{"matchFields", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "cpu-1")}})}, true},
		{"matchFields of no node", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "gone")}})}, false},
		{"second term", corev1.PodSpec{Affinity: required(
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("zone", corev1.NodeSelectorOpIn, "z")}},
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("zone", corev1.NodeSelectorOpIn, "a")}})}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(&c.spec, snap)
			require.Equal(t, c.ok, r.Schedulable, r.Reason)
			if !c.ok {
				require.Contains(t, r.Reason, "no Node of 2 fits")
			}
		})
	}
	// Cordoned Nodes take nothing; an empty cluster with no autoscaler gives no verdict.
	cordoned := node("c", nil)
	cordoned.Spec.Unschedulable = true
	require.False(t, Check(&corev1.PodSpec{}, &Snapshot{Nodes: []*corev1.Node{cordoned}}).Schedulable)
	require.True(t, Check(&corev1.PodSpec{NodeSelector: map[string]string{"x": "y"}}, &Snapshot{}).Schedulable)
	require.True(t, Check(&corev1.PodSpec{NodeSelector: map[string]string{"x": "y"}}, nil).Schedulable)
	// Truncated: a Pod none of the Nodes held fits is not reported.
	require.True(t, Check(&corev1.PodSpec{NodeSelector: map[string]string{"x": "y"}}, &Snapshot{Nodes: snap.Nodes, Truncated: true}).Schedulable)
}

func two() *int { n := 2; return &n }

func TestCheckNodePools(t *testing.T) {
	pool := NodePool{Name: "spot", Labels: map[string]string{"team": "data"},
		Requirements: []Requirement{
			{NodeSelectorRequirement: expr("karpenter.sh/capacity-type", corev1.NodeSelectorOpIn, "spot")},
			{NodeSelectorRequirement: expr(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge", "m6i.large"), MinValues: two()},
		},
		Taints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectNoSchedule}}}
	snap := &Snapshot{HasKarpenter: true, NodePools: []NodePool{pool}}
	spot := []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		ok   bool
	}{
		{"tolerates, no selector", corev1.PodSpec{Tolerations: spot}, true},
		{"taint not tolerated", corev1.PodSpec{}, false},
		{"template label", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{"team": "data"}}, true},
		{"template label, other value", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{"team": "ml"}}, false},
		{"the pool's own name", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{NodePoolLabel: "spot"}}, true},
		{"requirement intersects", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{"karpenter.sh/capacity-type": "spot"}}, true},
		{"requirement does not", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{"karpenter.sh/capacity-type": "on-demand"}}, false},
		{"well-known label the pool leaves open", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{corev1.LabelTopologyZone: "us-east-1a"}}, true},
		{"custom label the pool does not set", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{"gpu": "a100"}}, false},
		{"custom label required absent", corev1.PodSpec{Tolerations: spot, Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("gpu", corev1.NodeSelectorOpDoesNotExist)}})}, true},
		{"minValues kept", corev1.PodSpec{Tolerations: spot, Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge")}})}, true},
		{"minValues broken", corev1.PodSpec{Tolerations: spot, NodeSelector: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"}}, false},
		{"matchFields: no new Node has the name", corev1.PodSpec{Tolerations: spot, Affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "n1")}})}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(&c.spec, snap)
			require.Equal(t, c.ok, r.Schedulable, r.Reason)
		})
	}
}

func TestCheckComputeClasses(t *testing.T) {
	snap := &Snapshot{HasComputeClasses: true, ComputeClasses: map[string]ComputeClass{"batch": {Name: "batch", AutoCreate: true}, "fixed": {Name: "fixed"}}}
	sel := func(name string) *corev1.PodSpec {
		return &corev1.PodSpec{NodeSelector: map[string]string{ComputeClassLabel: name}}
	}
	require.True(t, Check(sel("batch"), snap).Schedulable)
	r := Check(sel("missing"), snap)
	require.False(t, r.Schedulable)
	require.Contains(t, r.Reason, `ComputeClass "missing" does not exist`)
	require.False(t, Check(sel("fixed"), snap).Schedulable, "no auto-creation and no Node of the class")
	snap.Nodes = []*corev1.Node{node("n", map[string]string{ComputeClassLabel: "fixed"})}
	require.True(t, Check(sel("fixed"), snap).Schedulable, "a Node of the class")
	f := Finding(r, "p/c/x")
	require.Equal(t, checks.Unschedulable, f.Check)
	require.Equal(t, checks.SeverityError, f.Severity)
}

// TestNodePoolsAgreeWithNodes checks Karpenter's compatibility, as placement decides it, against
// the scheduler's own matching of every Node a NodePool could create (over a small universe of
// values): a pool is compatible exactly when one of its possible Nodes takes the Pod.
func TestNodePoolsAgreeWithNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 10))
	keys := []string{"k1", "k2"}
	universe := []string{"0", "1", "2", "3", "4", "x"}
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt}
	randomExpr := func(key string) corev1.NodeSelectorRequirement {
		op := ops[rng.IntN(len(ops))]
		var vs []string
		switch op {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			for _, v := range []string{"1", "2", "3"} {
				if rng.IntN(2) == 0 {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				vs = []string{"2"}
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			vs = []string{fmt.Sprint(1 + rng.IntN(3))}
		}
		return expr(key, op, vs...)
	}
	for i := range 800 {
		pool := NodePool{Name: "p"}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				pool.Requirements = append(pool.Requirements, Requirement{NodeSelectorRequirement: randomExpr(k)})
			}
		}
		var terms []corev1.NodeSelectorTerm
		for range 1 + rng.IntN(2) {
			var es []corev1.NodeSelectorRequirement
			for _, k := range keys {
				if rng.IntN(2) == 0 {
					es = append(es, randomExpr(k))
				}
			}
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: es})
		}
		spec := &corev1.PodSpec{Affinity: required(terms...)}
		// Every Node the pool could create: each key absent or one value of the universe,
		// as the pool's requirements allow (the scheduler's own matching).
		poolSel := &corev1.PodSpec{}
		if len(pool.Requirements) > 0 {
			var es []corev1.NodeSelectorRequirement
			for _, r := range pool.Requirements {
				es = append(es, r.NodeSelectorRequirement)
			}
			poolSel.Affinity = required(corev1.NodeSelectorTerm{MatchExpressions: es})
		}
		defined := map[string]bool{}
		for _, r := range pool.Requirements {
			defined[r.Key] = true
		}
		var nodes []*corev1.Node
		choices := append([]string{""}, universe...)
		for _, a := range choices {
			for _, b := range choices {
				labels := map[string]string{NodePoolLabel: "p"}
				for j, v := range []string{a, b} {
					if v != "" {
						if !defined[keys[j]] {
							continue // Karpenter sets only the labels a pool defines
						}
						labels[keys[j]] = v
					}
				}
				n := node(fmt.Sprintf("n-%s-%s", a, b), labels)
				if Check(poolSel, &Snapshot{Nodes: []*corev1.Node{n}}).Schedulable {
					nodes = append(nodes, n)
				}
			}
		}
		want := len(nodes) > 0 && Check(spec, &Snapshot{Nodes: nodes}).Schedulable
		got := Check(spec, &Snapshot{HasKarpenter: true, NodePools: []NodePool{pool}})
		require.Equal(t, want, got.Schedulable, "case %d: pool %s; pod %s; %s", i, describeReqs(pool.Requirements), spec.Affinity.NodeAffinity.String(), got.Reason)
	}
}

func describeReqs(rs []Requirement) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Key+" "+string(r.Operator)+" "+strings.Join(r.Values, ","))
	}
	return strings.Join(s, "; ")
}

func TestCacheLinear(t *testing.T) {
	snap := &Snapshot{Nodes: []*corev1.Node{node("a", map[string]string{"pool": "cpu"})}}
	c := &Cache{Snapshot: snap}
	for i := range 3 * MaxCached {
		spec := &corev1.PodSpec{NodeSelector: map[string]string{"pool": "cpu", "i": fmt.Sprint(i % (MaxCached + 10))}}
		require.False(t, c.Check(spec).Schedulable)
		require.LessOrEqual(t, len(c.verdicts), MaxCached)
	}
	require.True(t, c.Check(&corev1.PodSpec{NodeSelector: map[string]string{"pool": "cpu"}}).Schedulable)
}

// TestFits: Fits names every Node and NodePool that takes the Pod, and agrees with Check: some
// fit exactly when Check finds the Pod schedulable.
func TestFits(t *testing.T) {
	tolerateGPU := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	spot := NodePool{Name: "spot", Taints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectNoSchedule}}}
	snap := &Snapshot{Nodes: []*corev1.Node{
		node("cpu-a", map[string]string{"pool": "cpu"}),
		node("cpu-b", map[string]string{"pool": "cpu"}),
		node("gpu-a", map[string]string{"pool": "gpu"}, gpuTaint()),
	}, HasKarpenter: true, NodePools: []NodePool{spot}}
	for _, c := range []struct {
		name         string
		spec         corev1.PodSpec
		nodes, pools string
	}{
		{"no constraints", corev1.PodSpec{}, "cpu-a cpu-b", ""},
		{"gpu, tolerated", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: tolerateGPU}, "gpu-a", ""},
		{"gpu, not tolerated", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}}, "", ""},
		{"spot pool only", corev1.PodSpec{NodeSelector: map[string]string{NodePoolLabel: "spot"}, Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}}, "", "spot"},
		{"everything", corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, "cpu-a cpu-b gpu-a", "spot"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodes, pools := Fits(&c.spec, snap)
			require.Equal(t, c.nodes, strings.Join(nodes, " "))
			require.Equal(t, c.pools, strings.Join(pools, " "))
			require.Equal(t, len(nodes)+len(pools) > 0, Check(&c.spec, snap).Schedulable)
		})
	}
}

// TestSnapshotAdd: Add keeps what Read keeps of each kind, and refuses other objects.
func TestSnapshotAdd(t *testing.T) {
	snap := &Snapshot{}
	for _, obj := range []string{
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-a","labels":{"pool":"gpu"},"annotations":{"a":"b"}},
		  "spec":{"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]},"status":{"allocatable":{"cpu":"8"}}}`,
		`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"spot"},"spec":{"template":{"spec":{
		  "requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}],"taints":[{"key":"spot","effect":"NoSchedule"}]}}}}`,
		`{"apiVersion":"cloud.google.com/v1","kind":"ComputeClass","metadata":{"name":"batch"},"spec":{"nodePoolAutoCreation":{"enabled":true}}}`,
	} {
		_, err := snap.Add([]byte(obj))
		require.NoError(t, err)
	}
	require.Len(t, snap.Nodes, 1)
	require.Equal(t, "gpu-a", snap.Nodes[0].Name)
	require.Nil(t, snap.Nodes[0].Annotations, "only what the check reads is kept")
	require.Len(t, snap.Nodes[0].Spec.Taints, 1)
	require.True(t, snap.HasKarpenter)
	require.Equal(t, "spot", snap.NodePools[0].Name)
	require.Len(t, snap.NodePools[0].Requirements, 1)
	require.True(t, snap.HasComputeClasses)
	require.True(t, snap.ComputeClasses["batch"].AutoCreate)
	require.False(t, snap.Truncated)
	require.ErrorContains(t, second(snap.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))), "want a v1 Node")
	require.ErrorContains(t, second(snap.Add([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{}}`))), "metadata.name is required")
	require.ErrorContains(t, second(snap.Add([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"taints":"x"}}`))), "node n")
}

// labSnapshot is a cluster shaped like the lab's (test/cluster LabPools): GKE node pools (two
// GPU pools, tainted, and a spot pool), an EKS node group, a Node of a Karpenter NodePool and
// that NodePool, and a Node without a pool label.
func labSnapshot() *Snapshot {
	gke := func(name, pool string, extra map[string]string, taints ...corev1.Taint) *corev1.Node {
		l := map[string]string{"cloud.google.com/gke-nodepool": pool, corev1.LabelTopologyZone: "europe-west4-a"}
		for k, v := range extra {
			l[k] = v
		}
		return node(name, l, taints...)
	}
	spot := corev1.Taint{Key: "cloud.google.com/gke-spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	karpenterSpot := corev1.Taint{Key: "karpenter.sh/capacity-type", Value: "spot", Effect: corev1.TaintEffectNoSchedule}
	return &Snapshot{HasKarpenter: true, Nodes: []*corev1.Node{
		gke("default-pool-a", "default-pool", nil),
		gke("default-pool-b", "default-pool", nil),
		gke("gpu-a100-a", "gpu-a100", map[string]string{"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}, gpuTaint()),
		gke("gpu-l4-a", "gpu-l4", map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4"}, gpuTaint()),
		gke("spot-pool-a", "spot-pool", map[string]string{"cloud.google.com/gke-spot": "true"}, spot),
		node("eks-on-demand-a", map[string]string{"eks.amazonaws.com/nodegroup": "on-demand", "eks.amazonaws.com/capacityType": "ON_DEMAND"},
			corev1.Taint{Key: "eks.amazonaws.com/nodegroup", Value: "on-demand", Effect: corev1.TaintEffectNoSchedule}),
		node("karpenter-spot-b", map[string]string{NodePoolLabel: "spot", "karpenter.sh/capacity-type": "spot"}, karpenterSpot),
		node("bare-1", map[string]string{"role": "bare"}),
	}, NodePools: []NodePool{
		{Name: "spot", Requirements: []Requirement{{NodeSelectorRequirement: expr("karpenter.sh/capacity-type", corev1.NodeSelectorOpIn, "spot")}}, Taints: []corev1.Taint{karpenterSpot}},
		{Name: "batch", Labels: map[string]string{"workload": "batch"}},
	}}
}

// TestPools: the pools a Pod fits are the provider's pool labels of the Nodes it fits, the
// Karpenter NodePools that could create one, and a Node's name where it has no pool label.
func TestPools(t *testing.T) {
	snap := labSnapshot()
	tolerate := func(keys ...string) []corev1.Toleration {
		var out []corev1.Toleration
		for _, k := range keys {
			out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
		return out
	}
	for _, c := range []struct {
		name  string
		spec  corev1.PodSpec
		pools []string
	}{
		{"no constraints: the untainted pools", corev1.PodSpec{}, []string{"bare-1", "batch", "default-pool"}},
		{"a100 workers", corev1.PodSpec{NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}, Tolerations: tolerate("nvidia.com/gpu")}, []string{"gpu-a100"}},
		{"l4 workers", corev1.PodSpec{NodeSelector: map[string]string{"cloud.google.com/gke-nodepool": "gpu-l4"}, Tolerations: tolerate("nvidia.com/gpu")}, []string{"gpu-l4"}},
		{"any GPU", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("cloud.google.com/gke-accelerator", corev1.NodeSelectorOpExists)}}), Tolerations: tolerate("nvidia.com/gpu")}, []string{"gpu-a100", "gpu-l4"}},
		{"EKS node group", corev1.PodSpec{NodeSelector: map[string]string{"eks.amazonaws.com/nodegroup": "on-demand"}, Tolerations: tolerate("eks.amazonaws.com/nodegroup")}, []string{"on-demand"}},
		// Its Node and its NodePool are one pool; batch, which leaves the capacity type open,
		// could create a spot Node too (Karpenter sets the label itself).
		{"Karpenter spot", corev1.PodSpec{NodeSelector: map[string]string{"karpenter.sh/capacity-type": "spot"}, Tolerations: tolerate("karpenter.sh/capacity-type")}, []string{"batch", "spot"}},
		{"GKE spot", corev1.PodSpec{NodeSelector: map[string]string{"cloud.google.com/gke-spot": "true"}, Tolerations: tolerate("cloud.google.com/gke-spot")}, []string{"spot-pool"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(&c.spec, snap)
			require.True(t, r.Schedulable, r.Reason)
			require.True(t, r.Known)
			require.Equal(t, c.pools, r.Pools)
		})
	}
	// Spot executors where no spot pool exists: unschedulable, no pool, a reason.
	noSpot := &Snapshot{Nodes: snap.Nodes[:4]}
	r := Check(&corev1.PodSpec{NodeSelector: map[string]string{"cloud.google.com/gke-spot": "true"}, Tolerations: tolerate("cloud.google.com/gke-spot")}, noSpot)
	require.False(t, r.Schedulable)
	require.True(t, r.Known)
	require.Empty(t, r.Pools)
	require.Contains(t, r.Reason, "no Node of 4 fits: none matches cloud.google.com/gke-spot=true (")
	// Each requirement alone: the zone is met by some Node, the EKS capacity type by none.
	r = Check(&corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "europe-west4-a"), expr("eks.amazonaws.com/capacityType", corev1.NodeSelectorOpIn, "SPOT")}})}, noSpot)
	require.False(t, r.Schedulable)
	require.Contains(t, r.Reason, "no Node of 4 fits: none matches eks.amazonaws.com/capacityType In SPOT (")
	// A truncated snapshot: no verdict on the pools either.
	r = Check(&corev1.PodSpec{}, &Snapshot{Nodes: snap.Nodes, Truncated: true})
	require.True(t, r.Schedulable)
	require.False(t, r.Known)
	require.False(t, SamePools(Check(&corev1.PodSpec{}, snap), Check(&corev1.PodSpec{NodeSelector: map[string]string{"role": "bare"}}, snap)))
}

// TestPoolsBounded: a cluster of Nodes without pool labels has a pool per Node; at most
// MaxPools are named.
func TestPoolsBounded(t *testing.T) {
	snap := &Snapshot{}
	for i := range MaxPools + 7 {
		snap.Nodes = append(snap.Nodes, node(fmt.Sprintf("n-%03d", i), nil))
	}
	r := Check(&corev1.PodSpec{}, snap)
	require.Len(t, r.Pools, MaxPools)
	require.Equal(t, 7, r.MorePools)
}

func TestUnmodelled(t *testing.T) {
	term := []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{"nothing", corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}}, nil},
		{"spread, DoNotSchedule", corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}}}, []string{UnmodelledTopologySpread}},
		{"spread, ScheduleAnyway only ranks", corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway}}}, nil},
		{"pod affinity and anti-affinity", corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}}, []string{UnmodelledPodAffinity, UnmodelledPodAntiAffinity}},
		{"preferred anti-affinity only ranks", corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term[0]}}}}}, nil},
		{"a PVC", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}, []string{UnmodelledVolumes}},
		{"a priority class", corev1.PodSpec{PriorityClassName: "high"}, []string{UnmodelledPreemption}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Unmodelled(&c.spec))
		})
	}
	spec, err := Spec([]byte(`{"spec":{"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}],"volumes":[{"name":"d","ephemeral":{}}]}}`))
	require.NoError(t, err)
	require.Equal(t, []string{UnmodelledTopologySpread, UnmodelledVolumes}, Unmodelled(spec))
}

// TestSnapshotAddList: a List (`kubectl get nodes,nodepools -o yaml`) adds its items, and says
// which; an item of another kind is an error naming it.
func TestSnapshotAddList(t *testing.T) {
	list := `{"apiVersion": "v1", "kind": "List", "items": [
		{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-l4-a", "labels": {"cloud.google.com/gke-nodepool": "gpu-l4"}},
		 "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}},
		{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "spot"},
		 "spec": {"template": {"spec": {"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}}}}]}`
	cc := `{"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "gpu"}, "spec": {"nodePoolAutoCreation": {"enabled": true}}}`
	snap := &Snapshot{}
	added, err := snap.Add([]byte(list))
	require.NoError(t, err)
	require.Equal(t, []Object{{"Node", "gpu-l4-a"}, {"NodePool", "spot"}}, added)
	added, err = snap.Add([]byte(cc))
	require.NoError(t, err)
	require.Equal(t, []Object{{"ComputeClass", "gpu"}}, added)
	require.Len(t, snap.Nodes, 1)
	require.Equal(t, "gpu-l4", PoolOf(snap.Nodes[0]))
	require.Equal(t, gpuTaint(), snap.Nodes[0].Spec.Taints[0])
	require.True(t, snap.HasKarpenter)
	require.Equal(t, "spot", snap.NodePools[0].Name)
	require.True(t, snap.HasComputeClasses)
	require.True(t, snap.ComputeClasses["gpu"].AutoCreate)
	r := Check(&corev1.PodSpec{NodeSelector: map[string]string{"karpenter.sh/capacity-type": "spot"}}, snap)
	require.Equal(t, []string{"spot"}, r.Pools)

	_, err = snap.Add([]byte(`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}`))
	require.ErrorContains(t, err, "items[0]: v1 Pod p: want a v1 Node")
}

// second is the error of a two-valued call.
func second[T any](_ T, err error) error { return err }

func sized(name string, alloc corev1.ResourceList, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	n := node(name, labels, taints...)
	n.Status.Allocatable = alloc
	return n
}

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func requesting(req corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}
}

// TestCheckRequests: requests are held against each Node's allocatable as the scheduler's
// NodeResourcesFit sums them (containers added, init containers the largest, sidecars added to
// both, pod-level requests where set, overhead), an unreported allocatable holds anything, and
// the reason names the request no Node holds.
func TestCheckRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	snap := &Snapshot{Nodes: []*corev1.Node{
		sized("gpu", rl("cpu", "8", "memory", "64Gi", "nvidia.com/gpu", "4", "pods", "110"), map[string]string{"pool": "gpu"}),
		sized("small", rl("cpu", "4", "memory", "16Gi", "pods", "110"), map[string]string{"pool": "small"}),
	}}
	for _, c := range []struct {
		name  string
		spec  corev1.PodSpec
		pools string
	}{
		{"no requests", corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, "gpu small"},
		{"fits the small one", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "4"))}}, "gpu small"},
		{"a milli-cpu over", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "4001m"))}}, "gpu"},
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "3")), requesting(rl("cpu", "2"))}}, "gpu"},
		{"init containers: the largest", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("memory", "1Gi"))},
			InitContainers: []corev1.Container{requesting(rl("memory", "20Gi")), requesting(rl("memory", "2Gi"))}}, "gpu"},
		{"a sidecar adds to the containers", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "3"))},
			InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}}}, "gpu"},
		{"pod-level requests", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "1"))}, Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "6")}}, "gpu"},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "4"))}, Overhead: rl("cpu", "250m")}, "gpu"},
		{"an extended resource", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("nvidia.com/gpu", "2"))}}, "gpu"},
		{"more than any Node", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("nvidia.com/gpu", "8", "cpu", "1"))}}, ""},
		{"a resource no Node has", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("example.com/fpga", "1"))}}, ""},
		{"zero requests ask nothing", corev1.PodSpec{Containers: []corev1.Container{requesting(rl("example.com/fpga", "0", "cpu", "0"))}}, "gpu small"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(&c.spec, snap)
			require.Equal(t, c.pools, strings.Join(r.Pools, " "), r.Reason)
			require.Equal(t, c.pools != "", r.Schedulable)
			nodes, _ := Fits(&c.spec, snap)
			require.Equal(t, c.pools, strings.Join(nodes, " "))
		})
	}
	r := Check(&corev1.PodSpec{Containers: []corev1.Container{requesting(rl("nvidia.com/gpu", "8", "cpu", "1"))}}, snap)
	require.Equal(t, "no Node of 2 fits: none has the allocatable for nvidia.com/gpu 8 (Node gpu: Insufficient nvidia.com/gpu (requests 8 > allocatable 4); Node small: Insufficient nvidia.com/gpu (requests 8 > allocatable 0))", r.Reason)

	// A Node that reports no allocatable holds anything; one that reports some but no pods
	// holds no Pod, as the scheduler counts it.
	hand := &Snapshot{Nodes: []*corev1.Node{node("hand", nil)}}
	require.True(t, Check(&corev1.PodSpec{Containers: []corev1.Container{requesting(rl("cpu", "500"))}}, hand).Schedulable)
	noPods := &Snapshot{Nodes: []*corev1.Node{sized("no-pods", rl("cpu", "8"), nil)}}
	r = Check(&corev1.PodSpec{}, noPods)
	require.False(t, r.Schedulable)
	require.Contains(t, r.Reason, "Too many pods")
}

// TestRefusalOrder: a Node is refused for the first of the scheduler's filters that refuses it
// (cordon, taints, node affinity, resources), and a cordoned Node takes a Pod that tolerates
// the unschedulable taint, as the scheduler's NodeUnschedulable filter does.
func TestRefusalOrder(t *testing.T) {
	n := sized("n", rl("cpu", "1", "pods", "110"), map[string]string{"pool": "gpu"}, gpuTaint())
	n.Spec.Unschedulable = true
	snap := &Snapshot{Nodes: []*corev1.Node{n}}
	spec := corev1.PodSpec{NodeSelector: map[string]string{"pool": "cpu"}, Containers: []corev1.Container{requesting(rl("cpu", "2"))}}
	reason := func() string { return Check(&spec, snap).Reason }
	require.Contains(t, reason(), "(Node n: cordoned)")
	spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	require.Contains(t, reason(), "(Node n: taint nvidia.com/gpu=present:NoSchedule is not tolerated)")
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})
	require.Contains(t, reason(), "(Node n: its labels do not match the nodeSelector or required node affinity)")
	spec.NodeSelector["pool"] = "gpu"
	require.Contains(t, reason(), "(Node n: Insufficient cpu (requests 2 > allocatable 1))")
	spec.Containers[0].Resources.Requests = rl("cpu", "1")
	require.True(t, Check(&spec, snap).Schedulable)
}

// TestSpecKeepsRequests: Spec decodes all that requests are made of, so that a Pod read from its
// JSON asks the same of a Node as the Pod itself.
func TestSpecKeepsRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	rng := rand.New(rand.NewPCG(3, 5))
	q := []string{"0", "100m", "1", "3", "1Gi", "7"}
	res := func() corev1.ResourceList {
		l := corev1.ResourceList{}
		for _, name := range []corev1.ResourceName{"cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"} {
			if rng.IntN(2) == 0 {
				l[name] = resource.MustParse(q[rng.IntN(len(q))])
			}
		}
		return l
	}
	for i := range 500 {
		pod := &corev1.Pod{}
		for j := range rng.IntN(3) {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprint("c", j), Image: "x", Resources: corev1.ResourceRequirements{Requests: res()}})
		}
		for j := range rng.IntN(3) {
			c := corev1.Container{Name: fmt.Sprint("i", j), Image: "x", Resources: corev1.ResourceRequirements{Requests: res()}}
			if rng.IntN(2) == 0 {
				c.RestartPolicy = &always
			}
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		}
		if rng.IntN(3) == 0 {
			pod.Spec.Resources = &corev1.ResourceRequirements{Requests: res()}
		}
		if rng.IntN(3) == 0 {
			pod.Spec.Overhead = res()
		}
		b, err := json.Marshal(pod)
		require.NoError(t, err)
		spec, err := Spec(b)
		require.NoError(t, err)
		require.Equal(t, requests(pod), requests(&corev1.Pod{Spec: *spec}), "pod %d: %s", i, b)
		require.Equal(t, placementKey(&pod.Spec), placementKey(spec))
	}
}
