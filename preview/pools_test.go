package preview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// labNodes is a cluster shaped like the lab's (test/cluster LabPools), with two GPU node pools
// and no GKE spot pool: GKE's default-pool, gpu-a100 and gpu-l4 (tainted nvidia.com/gpu), an
// EKS node group, and a Karpenter spot NodePool with one Node.
func labNodes() *placement.Snapshot {
	n := func(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	spot := corev1.Taint{Key: "karpenter.sh/capacity-type", Value: "spot", Effect: corev1.TaintEffectNoSchedule}
	return &placement.Snapshot{HasKarpenter: true, Nodes: []*corev1.Node{
		n("default-pool-a", map[string]string{"cloud.google.com/gke-nodepool": "default-pool"}),
		n("default-pool-b", map[string]string{"cloud.google.com/gke-nodepool": "default-pool"}),
		n("gpu-a100-a", map[string]string{"cloud.google.com/gke-nodepool": "gpu-a100", "cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}, gpu),
		n("gpu-l4-a", map[string]string{"cloud.google.com/gke-nodepool": "gpu-l4", "cloud.google.com/gke-accelerator": "nvidia-l4"}, gpu),
		n("eks-on-demand-a", map[string]string{"eks.amazonaws.com/nodegroup": "on-demand"},
			corev1.Taint{Key: "eks.amazonaws.com/nodegroup", Value: "on-demand", Effect: corev1.TaintEffectNoSchedule}),
		n("karpenter-spot-a", map[string]string{"karpenter.sh/nodepool": "spot", "karpenter.sh/capacity-type": "spot"}, spot),
	}, NodePools: []placement.NodePool{{Name: "spot", Taints: []corev1.Taint{spot},
		Requirements: []placement.Requirement{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}}}}}
}

// placementCM is the platform's placement ConfigMap: Dask workers on a GPU node pool, and,
// when spot, Spark executors on GKE spot Nodes, and, when spread, Ray workers spread over zones.
func placementCM(gpuPool string, spot, spread bool) policies.SourcedConfigMap {
	docs := map[string]string{
		"gpu-workers": "  mode: merge\n  match:\n    managers: [dask]\n    roles: [worker]\n  template:\n    spec:\n      nodeSelector: {cloud.google.com/gke-nodepool: " + gpuPool + "}\n      tolerations:\n        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n",
	}
	if spot {
		docs["spot-executors"] = "  mode: merge\n  match:\n    managers: [spark]\n    roles: [worker]\n  template:\n    spec:\n      nodeSelector: {cloud.google.com/gke-spot: \"true\"}\n      tolerations:\n        - {key: cloud.google.com/gke-spot, operator: Equal, value: \"true\", effect: NoSchedule}\n"
	}
	if spread {
		docs["spread-ray"] = "  mode: merge\n  match:\n    managers: [ray]\n    roles: [worker]\n  template:\n    spec:\n      topologySpreadConstraints:\n        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n"
	}
	return policyCM(platform, "placement", docs)
}

// TestPreviewPoolMoves: a change that moves Dask's GPU workers from gpu-a100 to gpu-l4, sends
// Spark executors to GKE spot Nodes where the cluster has none, and spreads Ray workers over
// zones says where each Pod moves, aggregated per group, and what it does not model.
func TestPreviewPoolMoves(t *testing.T) {
	opts := policies.Options{PlatformNamespace: platform, NamespaceAllowed: mustAllowed(t), NamespaceDenied: mustDenied(t)}
	s, probs, baseProbs, err := NewSets([]policies.SourcedConfigMap{placementCM("gpu-a100", false, false)},
		[]policies.SourcedConfigMap{placementCM("gpu-l4", true, true)}, nil, opts)
	require.NoError(t, err)
	require.Empty(t, probs)
	require.Empty(t, baseProbs)
	r := NewRunner(s, labNodes(), 1)
	seen := map[profiles.Manager]int{}
	for _, in := range fixtures(t) {
		r.Add(in)
	}
	rep := r.Report()
	for _, g := range rep.Groups {
		for _, o := range g.Objects {
			if o.Kind != profiles.KindPod || g.Role != profiles.RoleWorker {
				require.Nil(t, o.Move, "%s %s", g.Manager, o.Name)
				continue
			}
			seen[g.Manager]++
			require.NotNil(t, o.Move, "%s %s", g.Manager, o.Name)
			switch g.Manager {
			case profiles.ManagerDask:
				require.Equal(t, Move{From: []string{"gpu-a100"}, To: []string{"gpu-l4"}}, *o.Move, o.Name)
				require.False(t, o.Breaks)
			case profiles.ManagerSpark:
				require.Equal(t, Move{From: []string{"default-pool"}, To: []string{}}, *o.Move, o.Name)
				require.True(t, o.Breaks)
				require.Contains(t, o.Unschedulable, "no Node of 6 fits")
			case profiles.ManagerRay:
				// The pools are the same by the modelled predicates; the spread is not modelled.
				require.Equal(t, Move{From: []string{"default-pool"}, To: []string{"default-pool"}, NotModelled: []string{placement.UnmodelledTopologySpread}}, *o.Move, o.Name)
				require.False(t, o.Move.Moved())
			}
		}
		if g.Role == profiles.RoleWorker && g.Manager != profiles.ManagerFlink {
			require.Len(t, g.Moves, 1, "%s %s", g.Manager, g.Cluster)
			require.Equal(t, g.Changed, g.Moves[0].Pods)
		}
	}
	require.NotZero(t, seen[profiles.ManagerDask])
	require.NotZero(t, seen[profiles.ManagerSpark])
	require.NotZero(t, seen[profiles.ManagerRay])
	require.Equal(t, rep.Stats.Moved, seen[profiles.ManagerDask]+seen[profiles.ManagerSpark])

	var table, md strings.Builder
	require.NoError(t, Write(&table, rep, "table"))
	require.NoError(t, Write(&md, rep, "markdown"))
	for _, want := range []string{
		"Pool moves (the pools the Pods fit, before → after):",
		"1 dask worker(s) of team/simple: gpu-a100 → gpu-l4\n",
		"2 spark executor(s) of team/spark-pi: default-pool → now unschedulable: no Node of 6 fits: none matches cloud.google.com/gke-spot=true, no Karpenter NodePool of 1 can create one\n",
		"1 ray worker(s) of team/raycluster-kuberay: fits default-pool (not modelled: topologySpreadConstraints)\n",
		"    @ pools: gpu-a100 → gpu-l4\n",
		"    @ pools: default-pool → now unschedulable\n",
	} {
		require.Contains(t, table.String(), want)
	}
	for _, want := range []string{
		"**Pool moves** (the pools the Pods fit, before → after):",
		"- 1 dask worker(s) of `team/simple`: `gpu-a100` → `gpu-l4`\n",
		"- 2 spark executor(s) of `team/spark-pi`: `default-pool` → now unschedulable: no Node of 6 fits: none matches cloud.google.com/gke-spot=true, no Karpenter NodePool of 1 can create one\n",
		"- 1 ray worker(s) of `team/raycluster-kuberay`: fits `default-pool` (not modelled: topologySpreadConstraints)\n",
		"  - `@ pools: gpu-a100 → gpu-l4`\n",
	} {
		require.Contains(t, md.String(), want)
	}
	t.Logf("\n%s\n%s", table.String(), md.String())
}

// TestMovesBounded: however many Pods move, and however many pools with whatever names, a
// group lists at most MaxGroupMoves moves of MaxMovePools pools a side, and the Markdown stays
// within its bound, with no escape sequence or HTML from the cluster's labels.
func TestMovesBounded(t *testing.T) {
	c := NewCollector(newSets(t, scenario{changes: []policies.SourcedConfigMap{workerDefaults("2222Mi", "finance")}}))
	long := strings.Repeat("x\x1b[31m|`<", 70)
	for i := range 3000 {
		var from []string
		for j := range 15 {
			from = append(from, fmt.Sprintf("%s-%d-%d", long, i%40, j))
		}
		o := Object{Kind: profiles.KindPod, Namespace: "ns", Name: fmt.Sprint(i), identity: profiles.Identity{Manager: profiles.ManagerDask, Role: profiles.RoleWorker, Cluster: fmt.Sprint(i % 150)},
			Fields: []Field{{Path: "spec.nodeSelector.pool", Old: "a", New: "b"}},
			Move:   &Move{From: from, To: []string{}, MoreFrom: 3}, Unschedulable: long + " (" + long + ")", Breaks: true}
		c.Add(o)
	}
	rep := c.Report()
	require.Equal(t, 3000, rep.Stats.Moved)
	for _, g := range rep.Groups {
		require.LessOrEqual(t, len(g.Moves), MaxGroupMoves)
		pods := g.MoreMoves
		for _, m := range g.Moves {
			require.Len(t, m.From, MaxMovePools)
			require.Equal(t, 8, m.MoreFrom)
			require.LessOrEqual(t, len(m.Unschedulable), report.MaxString)
			pods += m.Pods
		}
		require.Equal(t, g.Changed, pods)
		for _, o := range g.Objects {
			require.Len(t, o.Move.From, MaxMovePools)
		}
	}
	for _, f := range Formats {
		var b strings.Builder
		require.NoError(t, Write(&b, rep, f))
		require.NotContains(t, b.String(), "\x1b", f)
		if f == "markdown" {
			require.LessOrEqual(t, b.Len(), MaxMarkdownBytes)
			require.NotContains(t, b.String(), "<m")
			require.Contains(t, b.String(), "more move(s): see `podpatch diff -o json`")
		}
	}
}

// TestPreviewRequestsMove: a change that raises the Dask workers' requests beyond what gpu-l4's
// Nodes have moves them to the larger gpu-a100 pool, and beyond every Node strands them, naming
// the request no Node holds; a Karpenter NodePool's size is unknown, so it is not held against it.
func TestPreviewRequestsMove(t *testing.T) {
	snap := labNodes()
	alloc := map[string]corev1.ResourceList{
		"gpu-a100-a": {corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("680Gi"), corev1.ResourcePods: resource.MustParse("110")},
		"gpu-l4-a":   {corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
	}
	for _, n := range snap.Nodes {
		n.Status.Allocatable = alloc[n.Name]
		if n.Status.Allocatable == nil {
			n.Status.Allocatable = alloc["gpu-l4-a"]
		}
	}
	withCPU := func(cpu string) policies.SourcedConfigMap {
		return policyCM(platform, "placement", map[string]string{
			"gpu-workers": "  mode: merge\n  match:\n    managers: [dask]\n    roles: [worker]\n  template:\n    spec:\n      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n              - matchExpressions: [{key: cloud.google.com/gke-accelerator, operator: Exists}]\n      tolerations:\n        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n      containers:\n        - name: \"*\"\n          resources:\n            requests: {cpu: \"" + cpu + "\"}\n            limits: {cpu: \"" + cpu + "\"}\n",
		})
	}
	opts := policies.Options{PlatformNamespace: platform, NamespaceAllowed: mustAllowed(t), NamespaceDenied: mustDenied(t)}
	moves := func(before, after string) *Object {
		t.Helper()
		s, probs, baseProbs, err := NewSets([]policies.SourcedConfigMap{withCPU(before)}, []policies.SourcedConfigMap{withCPU(after)}, nil, opts)
		require.NoError(t, err)
		require.Empty(t, probs)
		require.Empty(t, baseProbs)
		r := NewRunner(s, snap, 1)
		for _, in := range fixtures(t) {
			r.Add(in)
		}
		var got *Object
		for _, g := range r.Report().Groups {
			for i, o := range g.Objects {
				if g.Manager == profiles.ManagerDask && g.Role == profiles.RoleWorker && o.Kind == profiles.KindPod {
					require.NotNil(t, o.Move, o.Name)
					got = &g.Objects[i]
				}
			}
		}
		require.NotNil(t, got, "no Dask worker Pod among the fixtures")
		return got
	}
	require.Equal(t, Move{From: []string{"gpu-a100", "gpu-l4"}, To: []string{"gpu-a100"}}, *moves("1", "16").Move)
	stranded := moves("1", "128")
	require.Empty(t, stranded.Move.To)
	require.True(t, stranded.Breaks)
	require.Contains(t, stranded.Unschedulable, "none has the allocatable for cpu 128")
}
