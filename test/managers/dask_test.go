package managers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

var (
	daskClusterGVK     = schema.GroupVersionKind{Group: "kubernetes.dask.org", Version: "v1", Kind: "DaskCluster"}
	daskWorkerGroupGVK = schema.GroupVersionKind{Group: "kubernetes.dask.org", Version: "v1", Kind: "DaskWorkerGroup"}
)

// TestDaskOperator runs the Dask Kubernetes operator (kopf, from the virtualenv) on two
// clusters: one from Python with KubeCluster(...), one from a DaskCluster and a GPU
// DaskWorkerGroup, which is then scaled; every Pod runs on the pool its policies name, and the
// mgr-dask namespace's policies narrow the enforced scheduler placement to a zone, or fail to
// move it to spot.
func TestDaskOperator(t *testing.T) {
	venv := env.needVenv(t)
	pkg := pythonPackageDir(t, venv, "dask_kubernetes")
	env.createCRDs(t, filepath.Join(pkg, "operator", "deployment", "helm", "dask-kubernetes-operator", "crds"))
	ns, ctl := env.namespaces(t, "mgr-dask")

	// kopf's liveness endpoint, as the operator's chart has it, on a port the test holds.
	probe := holdPort(t)
	op := exec.Command(filepath.Join(venv, "bin", "kopf"), "run", "--standalone", "--namespace", ns, "--namespace", ctl,
		"--liveness=http://"+probe.Addr()+"/healthz", "-m", "dask_kubernetes.operator.controller")
	op.Env = append(os.Environ(), "KUBECONFIG="+env.tokenKubeconfig)
	env.startSharing(t, "dask-operator", op, probe)

	for _, n := range []string{ns, ctl} {
		py := exec.Command(filepath.Join(venv, "bin", "python"), filepath.Join(env.root, "test", "managers", "testdata", "dask", "kubecluster.py"), n)
		py.Env = append(os.Environ(), "KUBECONFIG="+env.tokenKubeconfig)
		start(t, "kubecluster-"+n, py)
		for _, f := range []string{"dask/gpu-cluster.yaml", "dask/gpu-workergroup.yaml"} {
			o := env.readTestdata(t, f)
			o.SetNamespace(n)
			require.NoError(t, env.k8s.Create(context.Background(), o), f)
		}
	}
	want := map[shape]int{
		pod(profiles.ManagerDask, profiles.RoleScheduler, "simple", ""):                      1,
		service(profiles.ManagerDask, profiles.RoleScheduler, "simple", ""):                  1,
		pod(profiles.ManagerDask, profiles.RoleWorker, "simple", "simple-default"):           2,
		pod(profiles.ManagerDask, profiles.RoleScheduler, "gpu-cluster", ""):                 1,
		service(profiles.ManagerDask, profiles.RoleScheduler, "gpu-cluster", ""):             1,
		pod(profiles.ManagerDask, profiles.RoleWorker, "gpu-cluster", "gpu-cluster-default"): 1,
		pod(profiles.ManagerDask, profiles.RoleWorker, "gpu-cluster", "gpu-cluster-gpu"):     1,
	}
	env.waitGenerated(t, ctl, want, 3*time.Minute)
	env.waitGenerated(t, ns, want, 3*time.Minute)

	// Scale the GPU worker group, as `kubectl scale daskworkergroup` does.
	for _, n := range []string{ns, ctl} {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(daskWorkerGroupGVK)
		o.SetNamespace(n)
		o.SetName("gpu-cluster-gpu")
		require.NoError(t, env.k8s.Patch(context.Background(), o,
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"worker":{"replicas":2}}}`))))
	}
	want[pod(profiles.ManagerDask, profiles.RoleWorker, "gpu-cluster", "gpu-cluster-gpu")] = 2
	control := env.waitGenerated(t, ctl, want, 2*time.Minute)
	served := env.waitGenerated(t, ns, want, 2*time.Minute)

	r := env.checkPatched(t, served, control, ns, ctl)
	// Schedulers on default-pool (managers-e2e's enforced placement), simple's in the zone its
	// namespace policy narrows it to; the GPU group on gpu-pool (the example gpu-workers), and
	// so is gpu-cluster's default group: the example's glob "*gpu*" matches the group's name,
	// which starts with its cluster's.
	placed := env.placeServedAndControl(t, ns, ctl, served, map[shape]where{
		pod(profiles.ManagerDask, profiles.RoleScheduler, "simple", ""):                      {poolDefault, zoneB},
		pod(profiles.ManagerDask, profiles.RoleScheduler, "gpu-cluster", ""):                 {pool: poolDefault},
		pod(profiles.ManagerDask, profiles.RoleWorker, "simple", "simple-default"):           {pool: poolDefault},
		pod(profiles.ManagerDask, profiles.RoleWorker, "gpu-cluster", "gpu-cluster-default"): {pool: poolGPU},
		pod(profiles.ManagerDask, profiles.RoleWorker, "gpu-cluster", "gpu-cluster-gpu"):     {pool: poolGPU},
	})
	t.Run("a namespace policy narrows the enforced placement but cannot escape it", func(t *testing.T) {
		for _, g := range served {
			if g.Kind != profiles.KindPod || g.Role != profiles.RoleScheduler {
				continue
			}
			pl := placed[g.obj.GetName()]
			applied := g.obj.GetAnnotations()[policies.AppliedAnnotation]
			require.Contains(t, applied, "podpatch-system/managers-e2e/dask-scheduler-pool@", "the enforced placement")
			switch g.Cluster {
			case "simple":
				// Against the defaults' preference for the other zone.
				require.Contains(t, applied, ns+"/team/scheduler-zone@")
				require.Equal(t, zoneB, pl.zone, "narrowed to %s: bound to %s", zoneB, pl.Node)
			case "gpu-cluster":
				// The namespace policy applied — its spot toleration is there — but the
				// enforced node selector has the last word: the Pod stays off spot.
				require.Contains(t, applied, ns+"/team/scheduler-spot@")
				var pod corev1.Pod
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(g.obj.Object, &pod))
				require.Contains(t, pod.Spec.Tolerations, corev1.Toleration{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual,
					Value: "true", Effect: corev1.TaintEffectNoSchedule})
				require.Equal(t, poolDefault, pod.Spec.NodeSelector["cloud.google.com/gke-nodepool"])
				require.Equal(t, poolDefault, pl.Pool, "bound to %s", pl.Node)
			default:
				t.Fatalf("scheduler of cluster %q", g.Cluster)
			}
		}
	})
	t.Run("Events on the DaskClusters", func(t *testing.T) {
		for _, c := range []string{"simple", "gpu-cluster"} {
			env.checkAppliedEvents(t, ns, "DaskCluster", c, c, served)
		}
	})
	t.Run("manager-aware checks", func(t *testing.T) {
		// The examples' internal load balancer keeps the DaskCluster Pending until it has an
		// address; the GPU group's --memory-limit is below what a policy gives (reference §8).
		env.checkFindings(t, control, ns, map[shape]wantFinding{
			service(profiles.ManagerDask, profiles.RoleScheduler, "simple", ""): {checks.DaskLoadBalancer,
				"podpatch-system/platform-defaults/scheduler-internal-lb"},
			pod(profiles.ManagerDask, profiles.RoleWorker, "gpu-cluster", "gpu-cluster-gpu"): {checks.DaskWorker,
				"podpatch-system/managers-checks/dask-gpu-worker-memory"},
		})
	})
	t.Run("the operator does not fight the mutation", func(t *testing.T) {
		// The example policies make scheduler Services internal load balancers; the operator
		// reports a cluster Pending until the load balancer has an address. A cloud's
		// load-balancer controller writes it; here the test does. The operator derives the
		// phase from the Service's status, racing its own create handler (which may set
		// Pending last), so the test changes every scheduler Service's status in both
		// namespaces alike to have the phase evaluated again.
		for _, n := range []string{ns, ctl} {
			env.writeServiceStatus(t, n)
		}
		for _, c := range []string{"simple", "gpu-cluster"} {
			for _, n := range []string{ns, ctl} {
				env.waitPhase(t, n, c, "Running")
			}
		}
		env.checkSteady(t, ns, ctl, daskClusterGVK, daskWorkerGroupGVK)
		for _, c := range []string{"simple", "gpu-cluster"} {
			env.checkStatus(t, r, daskClusterGVK, c, ns, ctl)
		}
	})
	env.dumpFixtures(t, "dask-operator", "dask-kubernetes operator "+pythonVersion(t, venv, "dask-kubernetes"), control, ctl)
}

// waitPhase waits for a DaskCluster's status.phase.
func (h *harness) waitPhase(t *testing.T, ns, name, phase string) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(daskClusterGVK)
		if err := h.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(o.Object, "status", "phase"); got != phase {
			return fmt.Errorf("phase %q", got)
		}
		return nil
	}, "DaskCluster %s/%s phase %s", ns, name, phase)
}

// writeServiceStatus does what a cloud's load-balancer controller does for every
// LoadBalancer Service of a namespace — writes an ingress address (from the documentation
// range) — and adds a condition to every Service's status.
func (h *harness) writeServiceStatus(t *testing.T, ns string) {
	t.Helper()
	svcs, err := h.list(context.Background(), serviceGVK, ns)
	require.NoError(t, err)
	for i := range svcs {
		s := &svcs[i]
		status := map[string]any{"conditions": []any{map[string]any{"type": "podpatch.io/ManagersTest", "status": "True",
			"reason": "StatusWritten", "message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
		if typ, _, _ := unstructured.NestedString(s.Object, "spec", "type"); typ == "LoadBalancer" {
			status["loadBalancer"] = map[string]any{"ingress": []any{map[string]any{"ip": fmt.Sprintf("192.0.2.%d", 10+i)}}}
		}
		patch, err := json.Marshal(map[string]any{"status": status})
		require.NoError(t, err)
		require.NoError(t, h.k8s.Status().Patch(context.Background(), s, client.RawPatch(types.MergePatchType, patch)))
	}
}

// pythonPackageDir is where a package is installed in the virtualenv.
func pythonPackageDir(t *testing.T, venv, pkg string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import os, "+pkg+"; print(os.path.dirname("+pkg+".__file__))").Output()
	require.NoError(t, err, "python: import %s", pkg)
	return string(trimNewline(out))
}

// sitePackages is the virtualenv's site-packages directory.
func sitePackages(t *testing.T, venv string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import sysconfig; print(sysconfig.get_paths()['purelib'])").Output()
	require.NoError(t, err, "python: site-packages")
	return string(trimNewline(out))
}

// pythonVersion is an installed distribution's version.
func pythonVersion(t *testing.T, venv, dist string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import importlib.metadata as m; print(m.version('"+dist+"'))").Output()
	require.NoError(t, err, "version of %s", dist)
	return string(trimNewline(out))
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
