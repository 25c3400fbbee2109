package managers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
	"github.com/podpatch/podpatch/webhook/ownerevents"
)

var rayClusterGVK = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}

// TestKubeRay runs the KubeRay operator (bin/ray-operator, built from the Go module) on a
// RayCluster with a head, a CPU and a GPU worker group, then scales the CPU group out; every Pod
// runs on the pool its policies name. A change of the CPU workers' placement policy then moves
// the worker a further scale-out adds, and only that one.
func TestKubeRay(t *testing.T) {
	bin := rayOperatorBin(t)
	env.createKubeRayCRDs(t)

	ns, ctl := env.namespaces(t, "mgr-ray")
	start(t, "ray-operator", rayOperator(bin, ns, ctl))

	rc := env.readTestdata(t, "kuberay/raycluster.yaml")
	for _, n := range []string{ns, ctl} {
		o := rc.DeepCopy()
		o.SetNamespace(n)
		require.NoError(t, env.k8s.Create(context.Background(), o))
	}
	const name = "raycluster-kuberay"
	want := map[shape]int{
		pod(profiles.ManagerRay, profiles.RoleScheduler, name, "headgroup"): 1,
		pod(profiles.ManagerRay, profiles.RoleWorker, name, "workergroup"):  1,
		pod(profiles.ManagerRay, profiles.RoleWorker, name, "gpu-group"):    1,
		service(profiles.ManagerRay, profiles.RoleScheduler, name, ""):      1,
	}
	env.waitGenerated(t, ctl, want, 2*time.Minute)
	env.waitGenerated(t, ns, want, 2*time.Minute)

	// Scale out, as `kubectl patch` or the autoscaler does.
	for _, n := range []string{ns, ctl} {
		scaleWorkergroup(t, n, name, 3)
	}
	want[pod(profiles.ManagerRay, profiles.RoleWorker, name, "workergroup")] = 3
	control := env.waitGenerated(t, ctl, want, 2*time.Minute)
	served := env.waitGenerated(t, ns, want, 2*time.Minute)

	r := env.checkPatched(t, served, control, ns, ctl)
	// The head and the CPU group on default-pool (managers-e2e), the GPU group on gpu-pool (the
	// example gpu-workers).
	placed := env.placeServedAndControl(t, ns, ctl, served, map[shape]where{
		pod(profiles.ManagerRay, profiles.RoleScheduler, name, "headgroup"): {pool: poolDefault},
		pod(profiles.ManagerRay, profiles.RoleWorker, name, "workergroup"):  {pool: poolDefault},
		pod(profiles.ManagerRay, profiles.RoleWorker, name, "gpu-group"):    {pool: poolGPU},
	})
	t.Run("manager-aware checks", func(t *testing.T) {
		// The GPUs gpu-workers adds are not in the `ray start` KubeRay generated (reference §8).
		env.checkFindings(t, control, ns, map[shape]wantFinding{
			pod(profiles.ManagerRay, profiles.RoleWorker, name, "gpu-group"): {checks.RayResources, "podpatch-system/gpu-workers/gpu-workers"},
		})
	})
	t.Run("GPU limit on the Ray container only", func(t *testing.T) {
		for _, g := range served {
			if g.Kind != profiles.KindPod || g.Group != "gpu-group" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(g.obj.Object, "spec", "containers")
			require.Len(t, containers, 2)
			limit := func(c any) string {
				v, _, _ := unstructured.NestedString(c.(map[string]any), "resources", "limits", "nvidia.com/gpu")
				return v
			}
			require.Equal(t, "1", limit(containers[0]), "\"@main\" is KubeRay's first container")
			require.Empty(t, limit(containers[1]), "the sidecar gets no GPU")
		}
	})
	t.Run("Events on the RayCluster", func(t *testing.T) {
		env.checkAppliedEvents(t, ns, "RayCluster", name, name, served)
		// `kubectl describe raycluster` also says what the check above found, with its fix
		// (reference §9, PolicyCheck): the user learns it where they look.
		eventually(t, 30*time.Second, func() error {
			evs, err := env.describeEvents(context.Background(), ns, "RayCluster", name)
			if err != nil {
				return err
			}
			msg := latest(evs, ownerevents.EventPolicyCheck)["Pod/worker"]
			for _, want := range []string{checks.RayResources, "podpatch-system/gpu-workers/gpu-workers", "fix: set it in the RayCluster", "rayStartParams"} {
				if !strings.Contains(msg, want) {
					return fmt.Errorf("PolicyCheck on the RayCluster: want %q in %q", want, msg)
				}
			}
			t.Logf("RayCluster %s: PolicyCheck: %s", name, msg)
			return nil
		}, "PolicyCheck Event on the RayCluster")
	})
	t.Run("the operator does not fight the mutation", func(t *testing.T) {
		env.checkSteady(t, ns, ctl, rayClusterGVK)
		env.checkStatus(t, r, rayClusterGVK, name, ns, ctl)
	})
	t.Run("a policy change moves the new Pods", func(t *testing.T) {
		// The platform moves Ray's CPU workers to spot; the group is then scaled out, and only
		// the worker KubeRay creates now lands there: podpatch patches Pods when they are made.
		env.changePolicy(t, "managers-e2e", "ray-cpu-workers.yaml", rayCPUWorkersOnSpot)
		scaleWorkergroup(t, ns, name, 4)
		want[pod(profiles.ManagerRay, profiles.RoleWorker, name, "workergroup")] = 4
		now := env.waitGenerated(t, ns, want, 2*time.Minute)
		var added []generated
		for _, g := range now {
			if _, ok := placed[g.obj.GetName()]; g.Kind == profiles.KindPod && !ok {
				added = append(added, g)
			}
		}
		require.Len(t, added, 1, "one new Pod")
		env.checkPlaced(t, ns, added, map[shape]where{pod(profiles.ManagerRay, profiles.RoleWorker, name, "workergroup"): {pool: poolSpot}})
		for podName, before := range placed {
			after := env.waitPlaced(t, ns, podName)
			require.Equal(t, before.Node, after.Node, "%s stays where it runs", podName)
		}
	})
	env.dumpFixtures(t, "kuberay", "KubeRay operator "+kuberayVersion, control, ctl)
}

// rayCPUWorkersOnSpot is managers-e2e's ray-cpu-workers.yaml moved to GKE spot.
const rayCPUWorkersOnSpot = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata:
  name: ray-cpu-workers-pool
spec:
  match:
    managers: [ray]
    roles: [worker]
    groups: [workergroup]
  template:
    spec:
      nodeSelector: {cloud.google.com/gke-nodepool: spot-pool}
      tolerations:
        - {key: cloud.google.com/gke-spot, operator: Equal, value: "true", effect: NoSchedule}
`

// kuberayVersion is the ray-operator module test/tools/ray-operator builds.
const kuberayVersion = "v1.5.0"

// scaleWorkergroup sets the replicas of a RayCluster's first worker group, which the patch
// checks is "workergroup", as `kubectl patch` or the autoscaler does.
func scaleWorkergroup(t *testing.T, ns, name string, replicas int) {
	t.Helper()
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(rayClusterGVK)
	o.SetNamespace(ns)
	o.SetName(name)
	patch := fmt.Appendf(nil, `[{"op":"test","path":"/spec/workerGroupSpecs/0/groupName","value":"workergroup"},`+
		`{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":%d}]`, replicas)
	require.NoError(t, env.k8s.Patch(context.Background(), o, client.RawPatch(types.JSONPatchType, patch)))
}

// rayOperatorBin is bin/ray-operator, which hack/build-managers.sh builds.
func rayOperatorBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(env.binDir, "ray-operator")
	_, err := os.Stat(bin)
	require.NoError(t, err, "bin/ray-operator: run hack/build-managers.sh")
	return bin
}

// createKubeRayCRDs creates the CRDs of the KubeRay that test/tools/ray-operator builds.
func (h *harness) createKubeRayCRDs(t *testing.T) {
	t.Helper()
	h.createCRDs(t, filepath.Join(goModuleDir(t, "test/tools/ray-operator", "github.com/ray-project/kuberay/ray-operator"), "config", "crd", "bases"))
}

// rayOperator is the KubeRay operator (bin) watching namespaces. Its metrics and health probe
// listeners are off: no test reads them, and controller-runtime, which KubeRay v1.5.0's main.go
// hands both flags to, takes "0" for "disabled".
func rayOperator(bin string, namespaces ...string) *exec.Cmd {
	op := exec.Command(bin, "--enable-leader-election=false", "--metrics-addr=0", "--health-probe-bind-address=0",
		"--watch-namespace="+strings.Join(namespaces, ","), "--log-stdout-encoder=console")
	op.Env = append(os.Environ(), "KUBECONFIG="+env.cp.Kubeconfig)
	return op
}

// goModuleDir is the directory of a module required by one of the repository's tool modules.
// `go mod download` fetches it when this machine's module cache lacks it (the tool's binary may
// have come from the build cache, so nothing else downloaded it); `go list -m` would give "".
func goModuleDir(t *testing.T, moduleDir, module string) string {
	t.Helper()
	dir, err := cluster.ModuleDir(filepath.Join(env.root, moduleDir), module)
	require.NoError(t, err)
	return dir
}

// createCRDs creates (never applies: KubeRay's RayCluster CRD is too big for the
// last-applied annotation) every CRD in a directory and waits until they are established.
func (h *harness) createCRDs(t *testing.T, dir string) {
	t.Helper()
	objs, err := readObjects(dir)
	require.NoError(t, err)
	ctx := context.Background()
	for _, o := range objs {
		require.Equal(t, "CustomResourceDefinition", o.GetKind(), "%s", dir)
		if err := h.k8s.Create(ctx, o); err != nil && !strings.Contains(err.Error(), "already exists") {
			require.NoError(t, err, o.GetName())
		}
	}
	for _, o := range objs {
		eventually(t, 30*time.Second, func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := h.k8s.Get(ctx, client.ObjectKey{Name: o.GetName()}, cur); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established")
		}, "CRD %s", o.GetName())
	}
}

// readTestdata reads one object from test/managers/testdata.
func (h *harness) readTestdata(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, "test", "managers", "testdata", name))
	require.NoError(t, err)
	objs, err := decodeYAMLStream(b)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs[0]
}
