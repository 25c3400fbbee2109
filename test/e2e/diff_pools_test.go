package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/preview"
	"github.com/podpatch/podpatch/test/cluster"
)

// diffPoolsNamespace is where TestDiffPoolMoves's Pods live; its policies match only it.
const diffPoolsNamespace = "diff-pools-e2e"

// diffPoolsCM is TestDiffPoolMoves's placement ConfigMap: per manager's workers, the
// nodeSelector, tolerations and (Dask, after the change) topology spread it gives them.
func diffPoolsCM(dask, spark, ray string) *corev1.ConfigMap {
	doc := func(name, manager, spec string) string {
		return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\nspec:\n  mode: merge\n" +
			"  match: {namespaces: [" + diffPoolsNamespace + "], managers: [" + manager + "], roles: [worker]}\n  template:\n    spec:\n" + spec
	}
	return policyConfigMap("podpatch-system", "diff-pools", map[string]string{
		"dask.yaml":  doc("dask-workers", "dask", dask),
		"spark.yaml": doc("spark-executors", "spark", spark),
		"ray.yaml":   doc("ray-workers", "ray", ray),
	})
}

const (
	onGPUPool = "      nodeSelector: {cloud.google.com/gke-nodepool: gpu-pool}\n" +
		"      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	onGKESpot = "      nodeSelector: {cloud.google.com/gke-spot: \"true\"}\n" +
		"      tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: \"true\", effect: NoSchedule}]\n"
	onEKSOnDemand = "      nodeSelector: {eks.amazonaws.com/nodegroup: on-demand}\n" +
		"      tolerations: [{key: eks.amazonaws.com/nodegroup, operator: Equal, value: on-demand, effect: NoSchedule}]\n" +
		"      topologySpreadConstraints:\n" +
		"        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {dask.org/component: worker}}}\n"
	onKarpenterSpot = "      nodeSelector: {karpenter.sh/capacity-type: spot}\n" +
		"      tolerations: [{key: karpenter.sh/capacity-type, operator: Equal, value: spot, effect: NoSchedule}]\n"
	// The lab's GPU pool has nvidia-l4 accelerators: no pool has an A100.
	onA100 = "      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-tesla-a100}\n" +
		"      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
)

// TestDiffPoolMoves: `podpatch diff` says where Pods move, and kube-scheduler agrees. Dask,
// Spark and Ray workers run in the lab (kube-scheduler, kwok, cluster.LabPools) under a
// placement policy; diff previews a change against the live cluster (Dask workers from the GKE
// gpu-pool to the EKS node group, with a topology spread it does not model; Spark executors
// from GKE spot to the Karpenter spot pool; Ray workers to an accelerator no pool has); the
// change is applied, the Pods created again, and the pools kube-scheduler binds them to are the
// pools diff predicted — and the Pods it said would be unschedulable stay Pending.
func TestDiffPoolMoves(t *testing.T) {
	ctx := contextBackground()
	ensureNamespace(t, diffPoolsNamespace)
	base := diffPoolsCM(onGPUPool, onGKESpot, onGPUPool)
	require.NoError(t, k8s.Create(ctx, base.DeepCopy()))
	t.Cleanup(func() { _ = k8s.Delete(ctx, base.DeepCopy()) })
	servePodpatch(t)

	daskPod := func(name string) *corev1.Pod {
		return inNamespace(labPod(t, "dask-operator/worker-pod.yaml", name, nil))
	}
	waitForSelector := func(key, value string) {
		t.Helper()
		require.Eventually(t, func() bool {
			return dryRunCreate(t, daskPod("probe")).Spec.NodeSelector[key] == value
		}, 30*time.Second, 200*time.Millisecond, "the webhook never set %s=%s", key, value)
	}
	waitForSelector("cloud.google.com/gke-nodepool", "gpu-pool")
	startLab(t)

	// diff's pools (placement.PoolOf) of the lab's pools (cluster.PoolOf).
	var nodes corev1.NodeList
	require.NoError(t, k8s.List(ctx, &nodes))
	poolOf := map[string]string{}
	for i := range nodes.Items {
		poolOf[cluster.PoolOf(&nodes.Items[i])] = placement.PoolOf(&nodes.Items[i])
	}

	type labCase struct {
		fixture string
		labels  map[string]string
		manager profiles.Manager
	}
	pods := map[string]labCase{
		"pools-dask-1":  {"dask-operator/worker-pod.yaml", nil, profiles.ManagerDask},
		"pools-dask-2":  {"dask-operator/worker-pod.yaml", nil, profiles.ManagerDask},
		"pools-spark-1": {"spark/executor-pod.yaml", nil, profiles.ManagerSpark},
		"pools-spark-2": {"spark/executor-pod.yaml", nil, profiles.ManagerSpark},
		"pools-ray-1":   {"kuberay/worker-pod.yaml", nil, profiles.ManagerRay},
	}
	place := func(name string, c labCase) cluster.Placement {
		t.Helper()
		pod := inNamespace(labPod(t, c.fixture, name, c.labels))
		require.NoError(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { _ = k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
		pl, err := cluster.WaitPlaced(ctx, k8s, pod.Namespace, pod.Name, 60*time.Second)
		require.NoError(t, err, name)
		return pl
	}
	wantBefore := map[profiles.Manager]string{profiles.ManagerDask: "gpu-pool", profiles.ManagerSpark: "spot-pool", profiles.ManagerRay: "gpu-pool"}
	for name, c := range pods {
		pl := place(name, c)
		require.Equal(t, wantBefore[c.manager], pl.Pool, "%s: %s", name, pl.Unschedulable)
	}

	// The preview, live.
	change := writeConfigMaps(t, diffPoolsCM(onEKSOnDemand, onKarpenterSpot, onA100))
	run := runDiff(t, "--policies", change, "-n", diffPoolsNamespace, "-o", "json")
	require.Equal(t, 4, run.code, "the Ray worker is stranded; stderr:\n%s", run.stderr)
	rep := &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(run.stdout), rep))
	require.Equal(t, len(pods), rep.Stats.Moved)
	predicted := map[string]*preview.Move{}
	for _, g := range rep.Groups {
		require.Zero(t, g.More)
		require.Len(t, g.Moves, 1, "%s %s: one move for all its Pods", g.Manager, g.Cluster)
		require.Equal(t, g.Changed, g.Moves[0].Pods)
		for _, o := range g.Objects {
			require.NotNil(t, o.Move, o.Name)
			require.Equal(t, []string{poolOf[wantBefore[pods[o.Name].manager]]}, o.Move.From, o.Name)
			predicted[o.Name] = o.Move
		}
	}
	require.Len(t, predicted, len(pods))
	require.Equal(t, []string{placement.UnmodelledTopologySpread}, predicted["pools-dask-1"].NotModelled)
	require.Empty(t, predicted["pools-ray-1"].To)
	table := runDiff(t, "--policies", change, "-n", diffPoolsNamespace)
	require.Equal(t, 4, table.code, table.stderr)
	require.Contains(t, table.stdout, "2 dask worker(s) of "+diffPoolsNamespace+"/simple: gpu-pool → on-demand (not modelled: topologySpreadConstraints)\n")
	require.Contains(t, table.stdout, "2 spark executor(s) of "+diffPoolsNamespace+"/spark-pi: spot-pool → spot\n")
	require.Contains(t, table.stdout, "1 ray worker(s) of "+diffPoolsNamespace+"/raycluster-kuberay: gpu-pool → now unschedulable: no Node of ")
	md := runDiff(t, "--policies", change, "-n", diffPoolsNamespace, "-o", "markdown")
	require.Equal(t, 4, md.code, md.stderr)
	require.Contains(t, md.stdout, "**Pool moves**")
	t.Logf("podpatch diff:\n%s\npodpatch diff -o markdown:\n%s", table.stdout, md.stdout)

	// The change, applied; the Pods created again: kube-scheduler binds each to a pool diff
	// named, and leaves the one it said would be unschedulable Pending.
	cur := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(base), cur))
	cur.Data = diffPoolsCM(onEKSOnDemand, onKarpenterSpot, onA100).Data
	require.NoError(t, k8s.Update(ctx, cur))
	waitForSelector("eks.amazonaws.com/nodegroup", "on-demand")
	for name, c := range pods {
		pl := place(name+"-again", c)
		want := predicted[name]
		if len(want.To) == 0 {
			require.Empty(t, pl.Node, name)
			require.NotEmpty(t, pl.Unschedulable, name)
			continue
		}
		require.Empty(t, pl.Unschedulable, name)
		require.True(t, slices.Contains(want.To, poolOf[pl.Pool]), "%s: bound to %s (%s), diff said %s", name, pl.Node, poolOf[pl.Pool], strings.Join(want.To, ", "))
		require.Len(t, want.To, 1, name)
	}
}

// inNamespace moves a lab Pod into TestDiffPoolMoves's namespace.
func inNamespace(pod *corev1.Pod) *corev1.Pod {
	pod.Namespace = diffPoolsNamespace
	return pod
}
