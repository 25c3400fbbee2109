package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/preview"
	"github.com/podpatch/podpatch/test/cluster"
)

// diffNamespace is where TestDiff's objects and namespace policies live; its platform policies
// match only this namespace, so that other tests' objects are not theirs.
const diffNamespace = "diff-e2e"

// karpenterVersion is the sigs.k8s.io/karpenter module whose NodePool CRD the test installs
// (fetched with `go mod download`, not a dependency of the product).
const karpenterVersion = "v1.8.0"

// diffPlatformCM is TestDiff's platform policy ConfigMap: a label default, an env merge on the
// main container of workers and a default toleration, as the change sets them.
func diffPlatformCM(mark, toleration string, withEnv bool) *corev1.ConfigMap {
	docs := map[string]string{
		"mark.yaml": `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: mark}
spec:
  mode: default
  match: {namespaces: [` + diffNamespace + `]}
  template:
    metadata:
      labels: {diff-mark: ` + mark + `}
  service:
    metadata:
      labels: {diff-mark: ` + mark + `}
`,
		"toleration.yaml": `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: toleration}
spec:
  mode: default
  match: {namespaces: [` + diffNamespace + `], roles: [worker]}
  template:
    spec:
      tolerations:
        - {key: diff, operator: Equal, value: ` + toleration + `, effect: NoSchedule}
`,
	}
	if withEnv {
		docs["env.yaml"] = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: env}
spec:
  mode: merge
  match: {namespaces: [` + diffNamespace + `], roles: [worker]}
  template:
    spec:
      containers:
        - name: "@main"
          env:
            - {name: DIFF_ENV, value: "1"}
`
	}
	return policyConfigMap("podpatch-system", "diff-platform", docs)
}

// diffTeamCM is TestDiff's namespace policy ConfigMap.
func diffTeamCM(team string) *corev1.ConfigMap {
	return policyConfigMap(diffNamespace, "diff-team", map[string]string{"team.yaml": `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: team}
spec:
  mode: default
  template:
    metadata:
      labels: {team: ` + team + `}
`})
}

// diffGPUCM sends the workers of diffNamespace to Nodes labelled diff-pool=gpu.
func diffGPUCM() *corev1.ConfigMap {
	return policyConfigMap("podpatch-system", "diff-gpu", map[string]string{"gpu.yaml": `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: gpu}
spec:
  mode: merge
  match: {namespaces: [` + diffNamespace + `], roles: [worker]}
  template:
    spec:
      nodeSelector: {diff-pool: gpu}
`})
}

func policyConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: data}
}

// writeConfigMaps writes ConfigMaps as YAML files into a new directory, as a pull request holds them.
func writeConfigMaps(t testing.TB, cms ...*corev1.ConfigMap) string {
	t.Helper()
	dir := t.TempDir()
	for _, cm := range cms {
		b, err := yaml.Marshal(cm)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, cm.Namespace+"-"+cm.Name+".yaml"), b, 0o600))
	}
	return dir
}

// runDiff runs `podpatch diff` against the test control plane.
func runDiff(t *testing.T, args ...string) auditRun {
	t.Helper()
	return runCommand(t, append([]string{"diff", "--kubeconfig", kubeconfig}, args...)...)
}

func diffReport(t *testing.T, wantCode int, args ...string) *preview.Report {
	t.Helper()
	run := runDiff(t, append(args, "-n", diffNamespace, "-o", "json")...)
	require.Equal(t, wantCode, run.code, "exit status; stderr:\n%s\nstdout:\n%s", run.stderr, run.stdout)
	rep := &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(run.stdout), rep), run.stdout)
	return rep
}

// previewed indexes a report's objects by "Kind/name".
func previewed(t *testing.T, rep *preview.Report) map[string]preview.Object {
	out := map[string]preview.Object{}
	for _, g := range rep.Groups {
		require.Zero(t, g.More, "every object is shown")
		for _, o := range g.Objects {
			out[string(o.Kind)+"/"+o.Name] = o
		}
	}
	return out
}

// serverSet drops what the API server sets anew when an object is created again (identity,
// versions, allocated IPs and ports), leaving what the object's creator and the webhook decide.
func serverSet(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	c := u.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if c.GetGenerateName() != "" {
		unstructured.RemoveNestedField(c.Object, "metadata", "name")
	}
	unstructured.RemoveNestedField(c.Object, "status")
	unstructured.RemoveNestedField(c.Object, "spec", "clusterIP")
	unstructured.RemoveNestedField(c.Object, "spec", "clusterIPs")
	if ports, ok, _ := unstructured.NestedSlice(c.Object, "spec", "ports"); ok {
		for _, p := range ports {
			delete(p.(map[string]any), "nodePort")
		}
		require.NoError(t, unstructured.SetNestedSlice(c.Object, ports, "spec", "ports"))
	}
	b, err := json.Marshal(c.Object)
	require.NoError(t, err)
	return b
}

// waitForMark waits until the webhook patches a probe worker with a diff-mark label value.
func waitForMark(t *testing.T, mark string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return dryRunCreate(t, daskWorker(diffNamespace, "probe")).Labels["diff-mark"] == mark
	}, 30*time.Second, 200*time.Millisecond, "the webhook never served diff-mark=%s", mark)
}

// TestDiff: the preview is honest. Objects of every manager are created through the webhook
// under the base policies; `podpatch diff` previews a change of a platform and a namespace
// ConfigMap against them, live; the change is applied and the objects created again through
// the webhook; what the API server then stores differs from what it stored before in exactly
// the fields, with exactly the values, the preview said, for exactly the objects it named.
// Then a change that strands workers: against Nodes, and against Karpenter NodePools.
func TestDiff(t *testing.T) {
	ctx := contextBackground()
	ensureNamespace(t, diffNamespace)
	base := []*corev1.ConfigMap{diffPlatformCM("base", "base", true), diffTeamCM("a")}
	for _, cm := range base {
		require.NoError(t, k8s.Create(ctx, cm.DeepCopy()))
		t.Cleanup(func() { _ = k8s.Delete(ctx, cm.DeepCopy()) })
	}
	servePodpatch(t)
	waitForMark(t, "base")

	// The objects, as their managers create them, admitted under the base policies.
	before := map[string]*unstructured.Unstructured{}
	for _, f := range cluster.ManagerFixtures {
		obj := readObject(t, cluster.FixtureDir+f)
		obj.SetNamespace(diffNamespace)
		require.NoError(t, k8s.Create(ctx, obj), f)
		require.Equal(t, "base", obj.GetLabels()["diff-mark"], f)
		before[f] = obj
	}
	t.Cleanup(func() {
		for _, obj := range before {
			_ = k8s.Delete(ctx, obj)
		}
	})
	unchanged := diffReport(t, 0, "--policies", writeConfigMaps(t, base...))
	require.Equal(t, len(before), unchanged.Stats.Previewed)

	// The preview of the change, live.
	change := []*corev1.ConfigMap{diffPlatformCM("new", "new", false), diffTeamCM("b")}
	start := time.Now()
	rep := diffReport(t, 3, "--policies", writeConfigMaps(t, change...))
	t.Logf("preview of %d live objects: %s", rep.Stats.Objects, time.Since(start))
	require.Equal(t, len(before), rep.Stats.Changed, "every object carries the label default")
	require.Zero(t, rep.Stats.Breaking)
	shown := previewed(t, rep)
	md := runDiff(t, "--policies", writeConfigMaps(t, change...), "-n", diffNamespace, "-o", "markdown")
	require.Equal(t, 3, md.code, md.stderr)
	t.Logf("podpatch diff -o markdown:\n%s", md.stdout)

	// The change, applied; the objects created again through the webhook.
	for _, cm := range change {
		cur := &corev1.ConfigMap{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(cm), cur))
		cur.Data = cm.Data
		require.NoError(t, k8s.Update(ctx, cur))
	}
	waitForMark(t, "new")
	require.Eventually(t, func() bool {
		return dryRunCreate(t, daskWorker(diffNamespace, "probe")).Labels["team"] == "b"
	}, 30*time.Second, 200*time.Millisecond, "the webhook never served the namespace change")
	for _, f := range cluster.ManagerFixtures {
		old := before[f]
		require.NoError(t, k8s.Delete(ctx, old.DeepCopy()))
		obj := readObject(t, cluster.FixtureDir+f)
		obj.SetNamespace(diffNamespace)
		require.Eventually(t, func() bool {
			return k8s.Create(ctx, obj) == nil // the old one may still be going
		}, 30*time.Second, 200*time.Millisecond, f)
		name := old.GetKind() + "/" + old.GetName()
		changes, err := objdiff.Compare(old.GetKind(), serverSet(t, old), serverSet(t, obj), policies.AppliedAnnotation)
		require.NoError(t, err)
		var got []preview.Field
		for _, c := range changes {
			got = append(got, preview.Field{Path: c.Path, Old: c.Before, New: c.After})
		}
		want, ok := shown[name]
		require.True(t, ok || len(got) == 0, "%s changed (%v) but the preview did not name it", name, got)
		require.JSONEq(t, mustJSON(t, want.Fields), mustJSON(t, got), "%s: the preview and what the API server stores", name)
		before[f] = obj
	}

	// A change that sends the workers to Nodes no one has: exit 4, whatever else changes.
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "diff-cpu", Labels: map[string]string{"diff-pool": "cpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "diff-gpu", Labels: map[string]string{"diff-pool": "gpu"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}}},
	} {
		createReadyNode(t, n)
	}
	gpu := writeConfigMaps(t, diffGPUCM())
	stranded := diffReport(t, 4, "--policies", gpu)
	workers := 0
	for _, o := range previewed(t, stranded) {
		if o.Kind == profiles.KindPod && slicesContainsPrefix(o.Fields, "spec.nodeSelector.diff-pool") {
			workers++
			require.True(t, o.Breaks, o.Name)
			require.Contains(t, o.Unschedulable, "Node diff-gpu: taint nvidia.com/gpu:NoSchedule is not tolerated", o.Name)
			require.Equal(t, checks.Unschedulable, o.NewFindings[0].Check)
			require.Equal(t, "podpatch-system/diff-gpu/gpu", o.NewFindings[0].Policy)
		}
	}
	require.GreaterOrEqual(t, workers, 4, "the workers of Dask, Spark, Ray and Flink")
	require.Equal(t, workers, stranded.Stats.Breaking)

	// Karpenter: a NodePool that can make a Node the workers fit, and one that cannot.
	installKarpenterCRD(t)
	pool := func(name string, taint bool) *unstructured.Unstructured {
		spec := map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
			"requirements": []any{map[string]any{"key": "diff-pool", "operator": "In", "values": []any{"gpu"}}},
		}
		if taint {
			spec["taints"] = []any{map[string]any{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}}
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"template": map[string]any{"spec": spec}}}}
	}
	tainted := pool("diff-tainted", true)
	require.Eventually(t, func() bool { return k8s.Create(ctx, tainted.DeepCopy()) == nil }, 30*time.Second, 200*time.Millisecond, "the NodePool CRD never served")
	t.Cleanup(func() { _ = k8s.Delete(ctx, tainted) })
	withPools := diffReport(t, 4, "--policies", gpu)
	for _, o := range previewed(t, withPools) {
		if o.Breaks {
			require.Contains(t, o.Unschedulable, "NodePool diff-tainted: taint dedicated=ml:NoSchedule is not tolerated", o.Name)
		}
	}
	open := pool("diff-open", false)
	require.NoError(t, k8s.Create(ctx, open))
	t.Cleanup(func() { _ = k8s.Delete(ctx, open) })
	fits := diffReport(t, 3, "--policies", gpu)
	require.Zero(t, fits.Stats.Breaking, "a NodePool can create a Node the workers fit")

	// GKE ComputeClasses (a CRD of the documented schema): a class that does not exist
	// strands the workers that select it; one with node auto-creation does not.
	installComputeClassCRD(t)
	batch := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass",
		"metadata": map[string]any{"name": "diff-batch"},
		"spec":     map[string]any{"priorities": []any{map[string]any{"machineFamily": "n2"}}, "nodePoolAutoCreation": map[string]any{"enabled": true}}}}
	require.Eventually(t, func() bool { return k8s.Create(ctx, batch.DeepCopy()) == nil }, 30*time.Second, 200*time.Millisecond, "the ComputeClass CRD never served")
	t.Cleanup(func() { _ = k8s.Delete(ctx, batch) })
	selectClass := func(name string) string {
		return writeConfigMaps(t, policyConfigMap("podpatch-system", "diff-class", map[string]string{"class.yaml": `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: class}
spec:
  mode: merge
  match: {namespaces: [` + diffNamespace + `], roles: [worker]}
  template:
    spec:
      nodeSelector: {cloud.google.com/compute-class: ` + name + `}
`}))
	}
	missing := diffReport(t, 4, "--policies", selectClass("diff-missing"))
	for _, o := range previewed(t, missing) {
		if o.Breaks {
			require.Contains(t, o.Unschedulable, `ComputeClass "diff-missing" does not exist`, o.Name)
		}
	}
	require.Equal(t, workers, missing.Stats.Breaking)
	autoCreated := diffReport(t, 3, "--policies", selectClass("diff-batch"))
	require.Zero(t, autoCreated.Stats.Breaking, "GKE creates nodes for a class with auto-creation")
}

// installComputeClassCRD installs a CRD of GKE's ComputeClass with the documented schema
// (cloud.google.com/v1, cluster-scoped; spec.priorities, spec.nodePoolAutoCreation.enabled).
func installComputeClassCRD(t *testing.T) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "computeclasses.cloud.google.com"},
		"spec": map[string]any{
			"group": "cloud.google.com", "scope": "Cluster",
			"names": map[string]any{"kind": "ComputeClass", "plural": "computeclasses", "singular": "computeclass", "listKind": "ComputeClassList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"priorities":           map[string]any{"type": "array", "items": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
						"nodePoolAutoCreation": map[string]any{"type": "object", "properties": map[string]any{"enabled": map[string]any{"type": "boolean"}}},
						"whenUnsatisfiable":    map[string]any{"type": "string"},
					}},
				}}}}},
		},
	}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), crd)))
}

// createReadyNode creates a Node with its own taints only: the API server's admission taints a
// new Node not-ready (no kubelet reports here), which the test takes off again.
func createReadyNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	ctx := contextBackground()
	taints := n.Spec.Taints
	require.NoError(t, k8s.Create(ctx, n))
	t.Cleanup(func() { _ = k8s.Delete(ctx, n) })
	require.Eventually(t, func() bool {
		cur := &corev1.Node{}
		if k8s.Get(ctx, client.ObjectKeyFromObject(n), cur) != nil {
			return false
		}
		cur.Spec.Taints = taints
		return k8s.Update(ctx, cur) == nil
	}, 10*time.Second, 100*time.Millisecond, "untaint %s", n.Name)
}

func slicesContainsPrefix(fields []preview.Field, prefix string) bool {
	for _, f := range fields {
		if strings.HasPrefix(f.Path, prefix) {
			return true
		}
	}
	return false
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// installKarpenterCRD installs Karpenter's own NodePool CRD, from the sigs.k8s.io/karpenter
// module (downloaded into the module cache; no dependency of podpatch's).
func installKarpenterCRD(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/karpenter@"+karpenterVersion).Output()
	require.NoError(t, err, "go mod download sigs.k8s.io/karpenter")
	var mod struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &mod))
	b, err := os.ReadFile(filepath.Join(mod.Dir, "pkg", "apis", "crds", "karpenter.sh_nodepools.yaml"))
	require.NoError(t, err)
	crd := fromYAML(t, b)
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), crd)), fmt.Sprint(crd.GetName()))
}

// TestDiffScale previews a change against N live Pods (PODPATCH_DIFF_SCALE=N, e.g. 10000; off
// by default: creating them takes minutes): the time of `podpatch diff` end to end, List
// calls included, and the size of its Markdown for a change that touches every Pod.
func TestDiffScale(t *testing.T) {
	n := 0
	if _, err := fmt.Sscan(os.Getenv("PODPATCH_DIFF_SCALE"), &n); err != nil || n <= 0 {
		t.Skip("PODPATCH_DIFF_SCALE=N runs this test with N Pods")
	}
	ctx := contextBackground()
	const ns = "diff-scale"
	ensureNamespace(t, ns)
	base := diffPlatformCM("base", "base", true)
	base.Name = "diff-scale"
	for i, d := range base.Data { // this namespace only
		base.Data[i] = strings.ReplaceAll(d, "namespaces: ["+diffNamespace+"]", "namespaces: ["+ns+"]")
	}
	require.NoError(t, k8s.Create(ctx, base.DeepCopy()))
	t.Cleanup(func() { _ = k8s.Delete(ctx, base) })
	// The Pods are created without the webhook (as if admitted while podpatch was down): the
	// preview reads them the same way.
	worker := readObject(t, cluster.FixtureDir+"dask-operator/worker-pod.yaml")
	work := make(chan int)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			for i := range work {
				obj := worker.DeepCopy()
				obj.SetNamespace(ns)
				obj.SetName(fmt.Sprintf("worker-%05d", i))
				obj.SetGenerateName("")
				labels := obj.GetLabels()
				labels["dask.org/cluster-name"] = fmt.Sprintf("c%d", i/50)
				obj.SetLabels(labels)
				if err := k8s.Create(ctx, obj); err != nil && !strings.Contains(err.Error(), "already exists") {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	start := time.Now()
	for i := range n {
		work <- i
	}
	close(work)
	for range 16 {
		require.NoError(t, <-errs)
	}
	t.Logf("created %d Pods in %s", n, time.Since(start))
	changed := base.DeepCopy()
	for i, d := range changed.Data {
		changed.Data[i] = strings.ReplaceAll(d, "diff-mark: base", "diff-mark: new")
	}
	dir := writeConfigMaps(t, changed)
	start = time.Now()
	md := runDiff(t, "--policies", dir, "-n", ns, "-o", "markdown")
	elapsed := time.Since(start)
	require.Equal(t, 3, md.code, md.stderr)
	t.Logf("podpatch diff of %d live Pods: %s; Markdown %d bytes", n, elapsed, len(md.stdout))
	rep := diffReport0(t, ns, dir)
	require.Equal(t, n, rep.Stats.Changed)
}

// diffReport0 is diffReport for another namespace.
func diffReport0(t *testing.T, ns, dir string) *preview.Report {
	t.Helper()
	run := runDiff(t, "--policies", dir, "-n", ns, "-o", "json")
	require.Equal(t, 3, run.code, run.stderr)
	rep := &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(run.stdout), rep))
	return rep
}
