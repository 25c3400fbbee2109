package managers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/test/cluster"
)

const (
	// kueueTestLabel marks the namespaces Kueue manages (its managedJobsNamespaceSelector) and
	// this suite's Kueue policies select.
	kueueTestLabel = "podpatch.io/kueue-test"
	// flavorKey is the node label key the ResourceFlavors of ClusterQueue main and the first of
	// preempt decide: the lab's GKE node pool.
	flavorKey = "cloud.google.com/gke-nodepool"
	// acceleratorKey is the GPU flavor's other node label key.
	acceleratorKey = "cloud.google.com/gke-accelerator"
	// eksKey is the node label key of preempt's second flavor: the lab's EKS node group.
	eksKey = "eks.amazonaws.com/nodegroup"
)

var (
	workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}
	// spotToleration is the spot flavor's toleration of the spot pool's taint.
	spotToleration = corev1.Toleration{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	// noSpotToleration is the platform policy's toleration on the same key (left out on Kueue's Pods).
	noSpotToleration = corev1.Toleration{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "false", Effect: corev1.TaintEffectNoSchedule}
)

// kueueObjects are the flavors, queues and priorities of the suite, on the lab's pools
// (cluster.LabPools): ClusterQueue "main" with one resource group of a spot flavor (spot-pool,
// no GPU quota) before a GPU flavor (gpu-pool, NVIDIA L4); ClusterQueue "preempt" with two
// flavors, on-demand (default-pool, 4 CPUs) before eks-on-demand (the EKS node group, 2 CPUs),
// preempting lower priorities.
const kueueObjects = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {cloud.google.com/gke-nodepool: spot-pool}
  tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: l4}
spec:
  nodeLabels: {cloud.google.com/gke-nodepool: gpu-pool, cloud.google.com/gke-accelerator: nvidia-l4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {cloud.google.com/gke-nodepool: default-pool}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: eks-on-demand}
spec:
  nodeLabels: {eks.amazonaws.com/nodegroup: on-demand}
  tolerations: [{key: eks.amazonaws.com/nodegroup, operator: Equal, value: on-demand, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: main}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: spot
      resources:
      - {name: cpu, nominalQuota: "200"}
      - {name: memory, nominalQuota: 2000Gi}
      - {name: nvidia.com/gpu, nominalQuota: "0"}
    - name: l4
      resources:
      - {name: cpu, nominalQuota: "16"}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: "8"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: preempt}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: "4"}
      - {name: memory, nominalQuota: 64Gi}
    - name: eks-on-demand
      resources:
      - {name: cpu, nominalQuota: "2"}
      - {name: memory, nominalQuota: 8Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
`

// kueuePolicies are the platform's policies on the Kueue namespaces: a placement every Pod
// gets on a key the flavors decide (the conflict), and, in the namespaces of ClusterQueue main,
// the shaping of Ray heads and of Ray, Dask and Spark workers on keys they do not — a zone
// each, which the lab's spot-pool and gpu-pool both span — with an accelerator for the workers
// on a key they do.
const kueuePolicies = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: kueue-e2e
  namespace: podpatch-system
  labels: {podpatch.io/policy: "true"}
data:
  placement.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: on-demand-pool}
    spec:
      mode: merge
      match:
        namespaceSelector: {matchLabels: {podpatch.io/kueue-test: "true"}}
      template:
        metadata:
          labels: {kueue-e2e/shaped: "true"}
        spec:
          nodeSelector: {cloud.google.com/gke-nodepool: default-pool}
          tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: "false", effect: NoSchedule}]
          containers:
          - name: "@main"
            env: [{name: SHAPED_BY, value: podpatch}]
  seen-kueue.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: seen-kueue}
    spec:
      mode: merge
      match:
        namespaceSelector: {matchLabels: {podpatch.io/kueue-test: "true"}}
        selector: {matchLabels: {kueue.x-k8s.io/managed: "true"}}
      template:
        metadata:
          annotations: {kueue-e2e/saw-kueue-label: "true"}
  cpu-head.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: cpu-head}
    spec:
      mode: merge
      match:
        namespaceSelector: {matchLabels: {podpatch.io/kueue-test: "true"}}
        namespaces: [kueue-pods, kueue-ray]
        managers: [ray]
        roles: [head]
      template:
        spec:
          nodeSelector: {topology.kubernetes.io/zone: europe-west4-a}
  gpu-workers.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: gpu-workers}
    spec:
      mode: merge
      match:
        namespaceSelector: {matchLabels: {podpatch.io/kueue-test: "true"}}
        namespaces: [kueue-pods, kueue-ray]
        managers: [ray, dask, spark]
        roles: [worker]
      template:
        spec:
          nodeSelector: {topology.kubernetes.io/zone: europe-west4-b, cloud.google.com/gke-accelerator: nvidia-h100-80gb}
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
`

// kueuePolicyCount is how many policies kueuePolicies holds.
const kueuePolicyCount = 4

// TestKueue runs the real Kueue controller (bin/kueue, hack/build-kueue.sh) with its webhooks
// next to podpatch's, and the real KubeRay operator, and checks reference §8's
// kueue-placement-conflict: on the Pods Kueue manages, Kueue's flavor placement wins over the
// platform's placement policy (quota and Pods agree, no Pod stays gated) while everything else
// the policies set applies.
func TestKueue(t *testing.T) {
	kueueBin := os.Getenv("PODPATCH_KUEUE_BIN")
	if kueueBin == "" {
		kueueBin = filepath.Join(env.binDir, "kueue")
	}
	_, err := os.Stat(kueueBin)
	require.NoError(t, err, "%s: run hack/build-kueue.sh (make test-managers does)", kueueBin)
	rayBin := rayOperatorBin(t)
	ctx := context.Background()

	// CRDs: KubeRay's first, so that Kueue finds its Ray integrations' kinds.
	env.createKubeRayCRDs(t)
	kueueDir := goModuleDir(t, "test/tools/kueue", "sigs.k8s.io/kueue")
	env.createCRDs(t, filepath.Join(kueueDir, "config", "components", "crd", "bases"))

	namespaces := []string{"kueue-pods", "kueue-ray", "kueue-preempt"}
	for _, ns := range append([]string{"kueue-system"}, namespaces...) {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if ns != "kueue-system" {
			obj.Labels = map[string]string{kueueTestLabel: "true"}
		}
		if err := env.k8s.Create(ctx, obj); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	startKueue(t, kueueBin, kueueDir)

	// Flavors, queues, priorities (through Kueue's own webhooks), a LocalQueue per namespace.
	objs, err := decodeYAMLStream([]byte(kueueObjects))
	require.NoError(t, err)
	for _, o := range objs {
		eventually(t, 30*time.Second, func() error {
			err := env.k8s.Create(ctx, o.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}, "create %s %s", o.GetKind(), o.GetName())
	}
	for _, ns := range namespaces {
		cq := "main"
		if ns == "kueue-preempt" {
			cq = "preempt"
		}
		lq := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "queue", "namespace": ns},
			"spec":     map[string]any{"clusterQueue": cq},
		}}
		require.NoError(t, env.k8s.Create(ctx, lq))
	}

	// The platform's policies, once podpatch serves them.
	before, err := env.podpatch.MetricSum("podpatch_policies")
	require.NoError(t, err)
	pols, err := decodeYAMLStream([]byte(kueuePolicies))
	require.NoError(t, err)
	require.NoError(t, cluster.Apply(ctx, env.k8s, pols))
	t.Cleanup(func() {
		for _, o := range pols {
			_ = env.k8s.Delete(context.Background(), o)
		}
	})
	eventually(t, 30*time.Second, func() error {
		n, err := env.podpatch.MetricSum("podpatch_policies")
		if err != nil || n != before+kueuePolicyCount {
			return fmt.Errorf("podpatch serves %v policies (%v), want %v", n, err, before+kueuePolicyCount)
		}
		return nil
	}, "podpatch loads the Kueue policies")
	// podpatch finds the ResourceFlavor API by discovery within 15 s of its creation; until then
	// it leaves all placement on Kueue's Pods out. A dry run shows when it knows the flavors:
	// then the worker's zone (not a flavor key) applies.
	eventually(t, 60*time.Second, func() error {
		p := daskWorkerPod(t, "kueue-pods", "probe")
		if err := env.k8s.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if p.Spec.NodeSelector[corev1.LabelTopologyZone] != zoneB {
			return fmt.Errorf("node selector %v", p.Spec.NodeSelector)
		}
		return nil
	}, "podpatch knows Kueue's ResourceFlavors")

	start(t, "ray-operator-kueue", rayOperator(rayBin, namespaces...))

	t.Run("webhook order: Kueue's pod webhook runs before podpatch's", func(t *testing.T) {
		p := daskWorkerPod(t, "kueue-pods", "order")
		require.NoError(t, env.k8s.Create(ctx, p, client.DryRunAll))
		// Kueue's webhook added its gate and label before podpatch saw the Pod: a policy selecting
		// Kueue's label applied.
		require.Contains(t, gateNames(p), kueue.AdmissionGate)
		require.Equal(t, "true", p.Labels[kueue.ManagedLabel])
		require.Equal(t, "true", p.Annotations["kueue-e2e/saw-kueue-label"], "podpatch saw Kueue's label")
		// And podpatch left the flavor key out.
		require.NotContains(t, p.Spec.NodeSelector, flavorKey)
		require.Equal(t, "true", p.Labels["kueue-e2e/shaped"])
	})

	t.Run("plain Pods: Kueue's flavor wins, the rest applies, none stays gated, each runs on the flavor's pool", func(t *testing.T) {
		ns := "kueue-pods"
		pods := []*corev1.Pod{daskWorkerPod(t, ns, "dask-worker"), sparkExecutorPod(t, ns, "spark-exec")}
		for _, p := range pods {
			require.NoError(t, env.k8s.Create(ctx, p))
		}
		for _, p := range pods {
			got := waitUngated(t, ns, p.Name, 90*time.Second)
			wl := admittedWorkload(t, ns, func(w *unstructured.Unstructured) bool {
				return ownedBy(w, got.UID)
			})
			flavors := assignedFlavors(wl)
			require.Equal(t, []string{"spot"}, flavors, "quota charged to spot")
			require.Equal(t, poolSpot, got.Spec.NodeSelector[flavorKey], "the Pod goes where the quota is")
			require.Contains(t, got.Spec.Tolerations, spotToleration)
			require.NotContains(t, got.Spec.Tolerations, noSpotToleration)
			requireShaped(t, got)
			require.Equal(t, zoneB, got.Spec.NodeSelector[corev1.LabelTopologyZone], "other keys apply")
			requireRunsOn(t, ns, got.Name, where{poolSpot, zoneB})
		}
	})

	t.Run("RayCluster in one queue: head on spot, GPU workers on the GPU pool, Kueue's flavors placed", func(t *testing.T) {
		ns := "kueue-ray"
		rc := rayCluster(t, ns, "shaped", "low", map[string]string{"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})
		require.NoError(t, env.k8s.Create(ctx, rc))
		pods := waitRayPods(t, ns, "shaped", 2, 2*time.Minute)
		wl := admittedWorkload(t, ns, func(w *unstructured.Unstructured) bool { return ownedByName(w, "RayCluster", "shaped") })
		require.ElementsMatch(t, []string{"spot", "l4"}, assignedFlavors(wl))
		for _, p := range pods {
			require.NotEmpty(t, p.Labels[kueue.PodSetLabel], "%s: Kueue's podset label, from the template", p.Name)
			requireShaped(t, &p)
			switch p.Labels["ray.io/node-type"] {
			case "head":
				require.Equal(t, poolSpot, p.Spec.NodeSelector[flavorKey], "%s: Kueue's CPU flavor", p.Name)
				require.Equal(t, zoneA, p.Spec.NodeSelector[corev1.LabelTopologyZone], "other keys apply")
				require.NotContains(t, p.Spec.NodeSelector, acceleratorKey)
				requireRunsOn(t, ns, p.Name, where{poolSpot, zoneA})
			case "worker":
				require.Equal(t, poolGPU, p.Spec.NodeSelector[flavorKey], "%s: Kueue's GPU flavor", p.Name)
				require.Equal(t, "nvidia-l4", p.Spec.NodeSelector[acceleratorKey], "Kueue's GPU flavor, not the policy's H100")
				require.Equal(t, zoneB, p.Spec.NodeSelector[corev1.LabelTopologyZone], "other keys apply")
				require.Contains(t, p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
				requireRunsOn(t, ns, p.Name, where{poolGPU, zoneB})
			default:
				t.Fatalf("%s: node type %q", p.Name, p.Labels["ray.io/node-type"])
			}
		}
	})

	t.Run("RayJob: its cluster's Pods get Kueue's flavor", func(t *testing.T) {
		ns := "kueue-ray"
		rj := rayJob(t, ns, "job")
		require.NoError(t, env.k8s.Create(ctx, rj))
		var rcName string
		eventually(t, 2*time.Minute, func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"})
			if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "job"}, cur); err != nil {
				return err
			}
			rcName, _, _ = unstructured.NestedString(cur.Object, "status", "rayClusterName")
			if rcName == "" {
				st, _, _ := unstructured.NestedMap(cur.Object, "status")
				return fmt.Errorf("no RayCluster yet: %v", st)
			}
			return nil
		}, "the RayJob's RayCluster")
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			for _, gvk := range []schema.GroupVersionKind{{Group: "ray.io", Version: "v1", Kind: "RayJob"}, rayClusterGVK, workloadGVK} {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := env.k8s.List(ctx, l, client.InNamespace(ns)); err == nil {
					for _, o := range l.Items {
						spec, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "suspend")
						st, _, _ := unstructured.NestedFieldNoCopy(o.Object, "status")
						t.Logf("%s %s: labels %v, suspend %v, status %v", gvk.Kind, o.GetName(), o.GetLabels(), spec, st)
					}
				}
			}
		})
		pods := waitRayPods(t, ns, rcName, 2, 2*time.Minute)
		for _, p := range pods {
			require.Equal(t, poolSpot, p.Spec.NodeSelector[flavorKey], p.Name)
			requireShaped(t, &p)
			requireRunsOn(t, ns, p.Name, where{pool: poolSpot})
		}
	})

	t.Run("preempted and re-admitted on another flavor: the new flavor's placement and pool, podpatch's fields again", func(t *testing.T) {
		ns := "kueue-preempt"
		rc := rayCluster(t, ns, "low", "low", map[string]string{"cpu": "1", "memory": "1Gi"})
		require.NoError(t, env.k8s.Create(ctx, rc))
		pods := waitRayPods(t, ns, "low", 2, 2*time.Minute)
		for _, p := range pods {
			require.Equal(t, poolDefault, p.Spec.NodeSelector[flavorKey], p.Name)
			requireShaped(t, &p)
			requireRunsOn(t, ns, p.Name, where{pool: poolDefault})
		}
		// A high-priority batch Job that only fits on-demand (4 CPUs): Kueue preempts the
		// RayCluster, which fits eks-on-demand (2 CPUs) on its next admission.
		require.NoError(t, env.k8s.Create(ctx, highJob(ns)))
		eventually(t, 3*time.Minute, func() error {
			pods, err := rayPods(ctx, ns, "low")
			if err != nil {
				return err
			}
			if len(pods) != 2 {
				return fmt.Errorf("%d Pods", len(pods))
			}
			for _, p := range pods {
				if p.Spec.NodeSelector[eksKey] != "on-demand" {
					return fmt.Errorf("%s: node selector %v", p.Name, p.Spec.NodeSelector)
				}
			}
			return nil
		}, "the RayCluster's Pods come back on eks-on-demand")
		pods, err := rayPods(ctx, ns, "low")
		require.NoError(t, err)
		for _, p := range pods {
			requireShaped(t, &p)
			require.NotContains(t, p.Spec.NodeSelector, flavorKey, "%s: the platform's default-pool, a flavor key, left out", p.Name)
			requireRunsOn(t, ns, p.Name, where{pool: poolEKSOnDemand})
		}
		wl := admittedWorkload(t, ns, func(w *unstructured.Unstructured) bool { return ownedByName(w, "RayCluster", "low") })
		require.Equal(t, []string{"eks-on-demand"}, assignedFlavors(wl))
		job := admittedWorkload(t, ns, func(w *unstructured.Unstructured) bool { return ownedByName(w, "Job", "high") })
		require.Equal(t, []string{"on-demand"}, assignedFlavors(job))
	})
}

// requireRunsOn waits until a Pod Kueue admitted is bound and Running, and checks its Node's
// pool and zone (when set).
func requireRunsOn(t *testing.T, ns, name string, w where) {
	t.Helper()
	p := env.waitPlaced(t, ns, name)
	require.Equal(t, w.pool, p.Pool, "Pod %s/%s bound to %s", ns, name, p.Node)
	if w.zone != "" {
		require.Equal(t, w.zone, p.zone, "Pod %s/%s bound to %s", ns, name, p.Node)
	}
	t.Logf("%s/%s: bound to %s (%s), Running", ns, name, p.Node, w)
}

// startKueue runs Kueue with its webhooks served on a loopback port (startOnFixedPort) from
// certificates the test makes (internal certificate management off), and registers its webhook
// configurations (only the integrations enabled, and Kueue's own kinds) pointing there. Both go
// when the test ends: Kueue's webhooks fail closed, and later tests must not meet them.
func startKueue(t *testing.T, bin, moduleDir string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	require.NoError(t, os.MkdirAll(certDir, 0o700))
	ca, err := cluster.ServingCerts(certDir)
	require.NoError(t, err)
	// With its own certificate management off, Kueue v0.17 reads a metrics serving certificate
	// from a fixed path, metrics on or off (cmd/kueue/main.go): made here if absent, and removed
	// again.
	const metricsCerts = "/etc/kueue/metrics/certs"
	if _, err := os.Stat(filepath.Join(metricsCerts, "tls.crt")); os.IsNotExist(err) {
		made := "/etc/kueue" // the first directory of the path this test makes
		for _, d := range []string{"/etc/kueue", "/etc/kueue/metrics", metricsCerts} {
			if _, err := os.Stat(d); err == nil {
				made = ""
			} else if made == "" {
				made = d
			}
		}
		require.NoError(t, os.MkdirAll(metricsCerts, 0o755), "Kueue needs %s", metricsCerts)
		_, err := cluster.ServingCerts(metricsCerts)
		require.NoError(t, err)
		t.Cleanup(func() {
			if made != "" {
				_ = os.RemoveAll(made)
			}
		})
	}
	// Kueue listens on its webhook port only: health probes and metrics off ("0", as
	// controller-runtime takes it), and no visibility server (VisibilityOnDemand off, its port
	// unused). The webhook server cannot bind port 0 (controller-runtime makes it 9443) nor share
	// a held port, and its port must be known to register the webhooks: one below the ephemeral
	// range.
	_, port := startOnFixedPort(t, "kueue", "Serving webhook server", func(port int) *exec.Cmd {
		cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "0"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: %d, certDir: %q}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
managedJobsNamespaceSelector:
  matchLabels: {%s: "true"}
integrations:
  frameworks: [batch/job, pod, ray.io/raycluster, ray.io/rayjob]
`, port, certDir, kueueTestLabel)
		cfgFile := filepath.Join(dir, fmt.Sprintf("kueue-%d.yaml", port))
		require.NoError(t, os.WriteFile(cfgFile, []byte(cfg), 0o600))
		cmd := exec.Command(bin, "--config="+cfgFile, "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cp.Kubeconfig)
		return cmd
	})

	b, err := os.ReadFile(filepath.Join(moduleDir, "config", "components", "webhook", "manifests.yaml"))
	require.NoError(t, err)
	objs, err := decodeYAMLStream(b)
	require.NoError(t, err)
	served := func(path string) bool {
		for _, s := range []string{"-v1-pod", "-batch-v1-job", "-ray-io-v1-raycluster", "-ray-io-v1-rayjob", "-kueue-x-k8s-io-"} {
			if strings.Contains(path, s) {
				return true
			}
		}
		return false
	}
	url := func(path string) *string { // the serving certificate names localhost
		u := fmt.Sprintf("https://localhost:%d%s", port, path)
		return &u
	}
	// The two kinds of configuration hold webhooks of two types: each is pointed at the Kueue
	// process and narrowed to the suite's Kueue namespaces the same way.
	retarget := func(cc *admissionregistrationv1.WebhookClientConfig, sel **metav1.LabelSelector) {
		*cc = admissionregistrationv1.WebhookClientConfig{URL: url(*cc.Service.Path), CABundle: ca}
		*sel = kueueNamespaces(*sel)
	}
	install := func(c client.Object) {
		c.SetName("kueue-" + c.GetName()) // as Kueue's kustomization names it: sorted before "podpatch"
		require.NoError(t, env.k8s.Create(ctx, c))
		t.Cleanup(func() { _ = env.k8s.Delete(context.Background(), c) })
	}
	for _, o := range objs {
		js, err := o.MarshalJSON()
		require.NoError(t, err)
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			require.NoError(t, json.Unmarshal(js, &c))
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return !served(*w.ClientConfig.Service.Path) })
			for i := range c.Webhooks {
				retarget(&c.Webhooks[i].ClientConfig, &c.Webhooks[i].NamespaceSelector)
			}
			install(&c)
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			require.NoError(t, json.Unmarshal(js, &c))
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return !served(*w.ClientConfig.Service.Path) })
			for i := range c.Webhooks {
				retarget(&c.Webhooks[i].ClientConfig, &c.Webhooks[i].NamespaceSelector)
			}
			install(&c)
		}
	}
}

// kueueNamespaces narrows a Kueue webhook to the suite's Kueue namespaces, so that the other
// tests sharing the control plane never meet it (cluster-scoped kinds are not affected).
func kueueNamespaces(sel *metav1.LabelSelector) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchLabels = map[string]string{kueueTestLabel: "true"}
	return sel
}

// fixturePod reads a manager's Pod fixture as a Pod to create in ns: no owner (the garbage
// collector would delete it), no status, in Kueue's queue.
func fixturePod(t *testing.T, fixture, ns, name string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, "policies", "testdata", "fixtures", fixture))
	require.NoError(t, err)
	var p corev1.Pod
	require.NoError(t, yaml.Unmarshal(b, &p))
	p.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns, Labels: p.Labels, Annotations: p.Annotations}
	p.Labels[kueue.QueueLabel] = "queue"
	p.Status = corev1.PodStatus{}
	p.Spec.NodeName = ""
	// Defaults of another namespace's ServiceAccount token volume are the API server's to set.
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return strings.HasPrefix(v.Name, "kube-api-access-") })
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(m.Name, "kube-api-access-") })
	}
	return &p
}

func daskWorkerPod(t *testing.T, ns, name string) *corev1.Pod {
	return fixturePod(t, "dask-operator/worker-pod.yaml", ns, name)
}

func sparkExecutorPod(t *testing.T, ns, name string) *corev1.Pod {
	return fixturePod(t, "spark/executor-pod.yaml", ns, name)
}

func gateNames(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

// requireShaped checks the policies' fields that are not placement.
func requireShaped(t *testing.T, p *corev1.Pod) {
	t.Helper()
	require.Equal(t, "true", p.Labels["kueue-e2e/shaped"], "%s: the policy's label", p.Name)
	require.Contains(t, p.Spec.Containers[0].Env, corev1.EnvVar{Name: "SHAPED_BY", Value: "podpatch"}, "%s: the policy's env", p.Name)
}

// waitUngated waits until Kueue lifted its gate from a Pod.
func waitUngated(t *testing.T, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	eventually(t, timeout, func() error {
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		if g := gateNames(&p); len(g) > 0 {
			return fmt.Errorf("still gated by %v, node selector %v", g, p.Spec.NodeSelector)
		}
		return nil
	}, "Pod %s/%s ungated", ns, name)
	return &p
}

// admittedWorkload waits for the admitted Workload that match picks.
func admittedWorkload(t *testing.T, ns string, match func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	eventually(t, 60*time.Second, func() error {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(workloadGVK.GroupVersion().WithKind("WorkloadList"))
		if err := env.k8s.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range l.Items {
			w := &l.Items[i]
			if !match(w) {
				continue
			}
			if _, ok, _ := unstructured.NestedMap(w.Object, "status", "admission"); ok {
				got = w
				return nil
			}
			conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
			return fmt.Errorf("workload %s not admitted: %v", w.GetName(), conds)
		}
		return fmt.Errorf("no workload among %d", len(l.Items))
	}, "admitted workload in %s", ns)
	return got
}

func ownedBy(w *unstructured.Unstructured, uid types.UID) bool {
	for _, o := range w.GetOwnerReferences() {
		if o.UID == uid {
			return true
		}
	}
	return false
}

func ownedByName(w *unstructured.Unstructured, kind, name string) bool {
	for _, o := range w.GetOwnerReferences() {
		if o.Kind == kind && o.Name == name {
			return true
		}
	}
	return false
}

// assignedFlavors are the flavors of a Workload's admission, sorted, each once.
func assignedFlavors(w *unstructured.Unstructured) []string {
	var out []string
	psas, _, _ := unstructured.NestedSlice(w.Object, "status", "admission", "podSetAssignments")
	for _, psa := range psas {
		m, _ := psa.(map[string]any)
		fl, _ := m["flavors"].(map[string]any)
		for _, f := range fl {
			if s, ok := f.(string); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// rayCluster is a RayCluster in Kueue's queue with a head and one worker of the given resources.
func rayCluster(t *testing.T, ns, name, priority string, workerResources map[string]string) *unstructured.Unstructured {
	t.Helper()
	res := map[string]any{}
	for k, v := range workerResources {
		res[k] = v
	}
	container := func(n string, r map[string]any) map[string]any {
		return map[string]any{"name": n, "image": "rayproject/ray:2.46.0",
			"resources": map[string]any{"requests": r, "limits": r}}
	}
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{
			kueue.QueueLabel: "queue", "kueue.x-k8s.io/priority-class": priority}},
		"spec": map[string]any{
			"rayVersion": "2.46.0",
			"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": map[string]any{"spec": map[string]any{
				"containers": []any{container("ray-head", map[string]any{"cpu": "1", "memory": "1Gi"})}}}},
			"workerGroupSpecs": []any{map[string]any{"groupName": "workers", "replicas": int64(1), "minReplicas": int64(1), "maxReplicas": int64(1),
				"rayStartParams": map[string]any{}, "template": map[string]any{"spec": map[string]any{
					"containers": []any{container("ray-worker", res)}}}}},
		},
	}}
	return rc
}

// rayJob is a RayJob in Kueue's queue whose cluster has a head and one worker.
func rayJob(t *testing.T, ns, name string) *unstructured.Unstructured {
	rc := rayCluster(t, ns, name, "low", map[string]string{"cpu": "1", "memory": "1Gi"})
	spec := rc.Object["spec"].(map[string]any)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{kueue.QueueLabel: "queue"}},
		"spec": map[string]any{
			"entrypoint":               "python -c 'print(1)'",
			"shutdownAfterJobFinishes": true,
			// KubeRay submits the job itself, through the head's dashboard (which nothing serves
			// here), instead of through a submitter Job: kwok would complete that Job's Pod at
			// once, and KubeRay would then fail the RayJob and delete its cluster.
			"submissionMode": "HTTPMode",
			"rayClusterSpec": spec,
		},
	}}
}

// rayPods lists a RayCluster's Pods.
func rayPods(ctx context.Context, ns, clusterName string) ([]corev1.Pod, error) {
	var l corev1.PodList
	if err := env.k8s.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{"ray.io/cluster": clusterName}); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }), nil
}

// waitRayPods waits for n Pods of a RayCluster.
func waitRayPods(t *testing.T, ns, clusterName string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, timeout, func() error {
		var err error
		if pods, err = rayPods(context.Background(), ns, clusterName); err != nil {
			return err
		}
		if len(pods) != n {
			return fmt.Errorf("%d Pods, want %d", len(pods), n)
		}
		return nil
	}, "%d Ray Pods in %s", n, ns)
	return pods
}

// highJob is a high-priority batch Job asking for 4 CPUs in Kueue's queue. Its Pod names a
// scheduler that does not run (unscheduled), so that the lab leaves it Pending: kwok completes
// a Job's Pods at once, and the finished Job would give on-demand's quota back, maybe before
// the preempted RayCluster is admitted again, which would then return there.
func highJob(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "high", "namespace": ns, "labels": map[string]any{
			kueue.QueueLabel: "queue", "kueue.x-k8s.io/priority-class": "high"}},
		"spec": map[string]any{
			"suspend": true,
			"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"schedulerName": unscheduled,
				"containers": []any{map[string]any{"name": "main", "image": "busybox", "command": []any{"true"},
					"resources": map[string]any{"requests": map[string]any{"cpu": "4", "memory": "1Gi"}}}},
			}},
		},
	}}
}
