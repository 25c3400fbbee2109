package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// startLab runs kube-scheduler and kwok against the shared control plane and creates the lab's
// node pools (cluster.LabPools); all of it is removed when the test ends, so that the other
// tests see a cluster without Nodes again.
func startLab(t *testing.T) {
	t.Helper()
	bin := filepath.Join(repoRoot, "bin")
	sched, err := controlPlane.StartScheduler(bin)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-scheduler output:\n%s", sched.Output)
		}
		require.NoError(t, sched.Stop())
	})
	kwok, err := controlPlane.StartKwok(bin)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kwok output:\n%s", kwok.Output)
		}
		require.NoError(t, kwok.Stop())
	})
	nodes, err := cluster.CreatePools(contextBackground(), k8s, cluster.LabPools())
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, n := range nodes {
			require.NoError(t, client.IgnoreNotFound(k8s.Delete(contextBackground(), n)))
		}
	})
}

// labPod reads a manager fixture Pod, renamed (generateName dropped) and with labels changed,
// for creating through the API.
func labPod(t *testing.T, fixture, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	u := readObject(t, cluster.FixtureDir+fixture)
	pod := &corev1.Pod{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod))
	pod.Name, pod.GenerateName, pod.ResourceVersion, pod.OwnerReferences = name, "", "", nil
	for k, v := range labels {
		pod.Labels[k] = v
	}
	return pod
}

// TestPlacementLab creates the managers' Pods through the API with podpatch and the example
// policies in front, and reads where kube-scheduler bound them (spec.nodeName and that Node's
// pool) once kwok has brought them to Running: the GPU worker groups land on gpu-pool, Spark
// executors on spot Nodes, everything else on the untainted default-pool. Then a policy change
// moves new Pods, and a namespace policy narrows the platform's placement but cannot escape it.
func TestPlacementLab(t *testing.T) {
	p := servePodpatch(t)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	p.waitForExamplesApplied(t, "default")
	startLab(t)

	place := func(t *testing.T, pod *corev1.Pod) cluster.Placement {
		t.Helper()
		require.NoError(t, k8s.Create(contextBackground(), pod))
		t.Cleanup(func() {
			_ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0))
		})
		pl, err := cluster.WaitPlaced(contextBackground(), k8s, pod.Namespace, pod.Name, 60*time.Second)
		require.NoError(t, err, pod.Name)
		return pl
	}

	cases := []struct {
		fixture, name string
		labels        map[string]string
		pool          string
	}{
		{"dask-operator/scheduler-pod.yaml", "lab-dask-scheduler", nil, "default-pool"},
		{"dask-operator/worker-pod.yaml", "lab-dask-worker", nil, "default-pool"},
		{"dask-operator/worker-pod.yaml", "lab-dask-gpu-worker", map[string]string{"dask.org/workergroup-name": "simple-gpu"}, "gpu-pool"},
		{"kuberay/head-pod.yaml", "lab-ray-head", nil, "default-pool"},
		{"kuberay/worker-pod.yaml", "lab-ray-gpu-worker", map[string]string{"ray.io/group": "gpu-group"}, "gpu-pool"},
		{"spark/driver-pod.yaml", "lab-spark-driver", nil, "default-pool"},
		{"spark/executor-pod.yaml", "lab-spark-exec-1", nil, "spot-pool"},
		{"flink/jobmanager-pod.yaml", "lab-flink-jobmanager", nil, "default-pool"},
	}
	t.Run("each manager's Pods run on the intended pool", func(t *testing.T) {
		for _, c := range cases {
			pl := place(t, labPod(t, c.fixture, c.name, c.labels))
			require.Empty(t, pl.Unschedulable, "%s: the scheduler found no Node", c.name)
			require.True(t, pl.Running, c.name)
			require.Equal(t, c.pool, pl.Pool, "%s bound to %s", c.name, pl.Node)
		}
	})

	nsPolicy := func(t *testing.T, name, body string) {
		t.Helper()
		createPolicies(t, "spark-jobs", name, map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\nspec:\n  match: {managers: [spark], roles: [executor]}\n  template:\n    spec:\n" + body})
		require.Eventually(t, func() bool {
			got := dryRunCreate(t, labPod(t, "spark/executor-pod.yaml", "probe-"+name, nil)).Annotations[policies.AppliedAnnotation]
			return strings.Contains(got, name)
		}, 20*time.Second, 100*time.Millisecond, "podpatch never applied %s", name)
	}

	t.Run("a namespace policy narrows the platform's placement", func(t *testing.T) {
		nsPolicy(t, "zone-b", "      nodeSelector: {topology.kubernetes.io/zone: europe-west4-b}\n")
		for _, name := range []string{"lab-spark-exec-zb-1", "lab-spark-exec-zb-2"} {
			pl := place(t, labPod(t, "spark/executor-pod.yaml", name, nil))
			require.Equal(t, "spot-pool", pl.Pool, name)
			require.Equal(t, "spot-pool-b", pl.Node, name)
		}
	})

	t.Run("a namespace policy cannot escape the platform's placement", func(t *testing.T) {
		// Its required affinity is ANDed into the platform's (reference §3): an executor asking
		// for on-demand Nodes stays Pending, with the scheduler's reason, instead of leaving spot.
		nsPolicy(t, "escape-spot", "      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n              - matchExpressions: [{key: cloud.google.com/gke-spot, operator: DoesNotExist}]\n")
		pl := place(t, labPod(t, "spark/executor-pod.yaml", "lab-spark-exec-escape", nil))
		require.Empty(t, pl.Node)
		require.Contains(t, pl.Unschedulable, "didn't match Pod's node affinity/selector")
	})

	t.Run("a policy change moves the new Pods", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: "podpatch-system", Name: "spark-spot"}, cm))
		// Executors leave spot for the EKS on-demand node group.
		cm.Data["spot-executors.yaml"] = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: spot-executors}\nspec:\n  match: {managers: [spark], roles: [executor]}\n  template:\n    spec:\n      nodeSelector: {eks.amazonaws.com/nodegroup: on-demand}\n      tolerations: [{key: eks.amazonaws.com/nodegroup, operator: Equal, value: on-demand, effect: NoSchedule}]\n"
		require.NoError(t, k8s.Update(contextBackground(), cm))
		require.Eventually(t, func() bool {
			return dryRunCreate(t, labPod(t, "spark/executor-pod.yaml", "probe-moved", nil)).Spec.NodeSelector["eks.amazonaws.com/nodegroup"] == "on-demand"
		}, 20*time.Second, 100*time.Millisecond, "the changed policy never applied")
		// The namespace policies of the subtests above are gone with them.
		pl := place(t, labPod(t, "spark/executor-pod.yaml", "lab-spark-exec-moved", nil))
		require.Equal(t, "eks-on-demand", pl.Pool, pl.Unschedulable)
	})
}
